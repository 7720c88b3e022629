"""The checkout's directories: the package finds registry/ and stacks/ beside itself (.tools/ is
held to tools/env.sh by the hermetic environment's tests)."""

from __future__ import annotations

from frutebox_infra.plumbing import paths


def test_the_checkout_holds_the_registry_and_the_stacks_the_package_reads() -> None:
    assert (paths.REPO_ROOT / "Pulumi.yaml").is_file()
    assert (paths.REGISTRY_DIR / "models.yaml").is_file()
    assert (paths.STACKS_DIR / "Pulumi.dev.yaml").is_file()
