"""The process's one TLS context for RunPod's API and proxy, built on first use."""

from __future__ import annotations

import ssl
from functools import cache

import httpx


@cache
def tls_context() -> ssl.SSLContext:
    """What httpx builds for a client by default (its CA bundle, or SSL_CERT_FILE/SSL_CERT_DIR),
    built once: loading the bundle costs tens of milliseconds per client otherwise, and one
    deploy step or `frutebox status` run makes several clients. A context serves many
    connections and threads at once."""
    return httpx.create_ssl_context()
