"""The checkout's directories: the package finds registry/, stacks/ and .tools/ beside itself."""

from __future__ import annotations

from frutebox_infra.plumbing import paths


def test_the_checkout_holds_the_registry_and_the_stacks_the_package_reads() -> None:
    assert (paths.REPO_ROOT / "Pulumi.yaml").is_file()
    assert (paths.REGISTRY_DIR / "models.yaml").is_file()
    assert (paths.STACKS_DIR / "Pulumi.dev.yaml").is_file()
    assert paths.TOOLS_DIR == paths.REPO_ROOT / ".tools"
    assert (paths.REPO_ROOT / "frutebox_infra" / "plumbing" / "paths.py").resolve() == paths.Path(
        paths.__file__
    ).resolve()
