"""The shared TLS context: built once, verifying as httpx's default does."""

from __future__ import annotations

import ssl

from frutebox_infra.runpod.tls import tls_context


def test_one_context_per_process_that_verifies_certificates_and_hosts() -> None:
    context = tls_context()
    assert tls_context() is context
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded
