"""An Ollama pod's launch as the pod runs it, run here by bash and a real Python: the release
archive is fetched (from a loopback stand-in of its URL) and checked against its SHA-256, kept
on the "volume" and unpacked; the tags the store lacks are pulled through a first server that
is stopped before the server is exec'd; every failure exits before the server serves.

The stand-in release is a .tar.gz holding a fake `bin/ollama` (a shell script that records
what it is asked): Python reads Ollama's real .tar.zst only from 3.14 on (the pod's image),
and tarfile's "r:*" reads either the same way."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from frutebox_infra.catalog.schema import EngineArchive
from frutebox_infra.recipes.archives import ArchiveInstall
from frutebox_infra.recipes.ollama import PULLS_ENV, launch_script
from tests.recipes.test_gateway_launch import release_server

FAKE_OLLAMA = """#!/bin/sh
# A stand-in for Ollama's CLI and server: `serve` runs until stopped (the first) or says it
# serves and ends (the second, which the launch execs); `list` answers once a server is up;
# `show` finds a tag in the store; `pull` puts it there (a tag named bad:tag fails); `rm`
# removes it; `list` prints a header and the tags, as Ollama's does.
store="$OLLAMA_MODELS"
case "$1" in
  serve)
    echo "serve on $OLLAMA_HOST" >> "$FAKE_LOG"
    if [ -e "$store/.served" ]; then echo "the-server-serves"; exit 0; fi
    touch "$store/.served" "$store/.up"
    trap 'rm -f "$store/.up"; exit 0' TERM
    while :; do sleep 0.05; done ;;
  list)
    [ -e "$store/.up" ] || exit 1
    echo "NAME    ID    SIZE    MODIFIED"
    for f in "$store"/*; do [ -f "$f" ] && echo "$(basename "$f")    0123    1 GB    now"; done
    exit 0 ;;
  rm) echo "rm $2" >> "$FAKE_LOG"; rm -f "$store/$2" ;;
  show) [ -e "$store/$2" ] ;;
  pull) echo "pull $2" >> "$FAKE_LOG"; [ "$2" != "bad:tag" ] && touch "$store/$2" ;;
esac
"""


def release(tmp: Path, *, evil: bool = False) -> Path:
    """The stand-in release archive: bin/ollama and a runner library under lib/ollama."""
    path = tmp / "www" / "ollama-linux-amd64.tar.gz"
    path.parent.mkdir(parents=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data, mode in (("bin/ollama", FAKE_OLLAMA.encode(), 0o755),
                                 ("lib/ollama/libggml-base.so", b"\0" * 64, 0o644)):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        if evil:
            info = tarfile.TarInfo("../../escaped")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return path


def install_for(archive: Path, url: str, tmp: Path, *, sha256: str | None = None) -> ArchiveInstall:
    digest = sha256 or hashlib.sha256(archive.read_bytes()).hexdigest()
    pinned = EngineArchive(url=f"{url}/{archive.name}", sha256=digest, source="a test")
    return ArchiveInstall(archive=pinned, version="ollama-0.0.0", home=str(tmp / "disk" / "o"),
                          volume_dir=str(tmp / "volume" / "engines"))  # fmt: skip


def run(install: ArchiveInstall, tmp: Path, tags: str) -> subprocess.CompletedProcess[str]:
    script = launch_script(install).replace("python3 -c", f"{sys.executable} -c", 1)
    store = tmp / "volume" / "store"
    store.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ["PATH"], "OLLAMA_MODELS": str(store), PULLS_ENV: tags,
           "OLLAMA_HOST": "127.0.0.1:21434", "FAKE_LOG": str(tmp / "log")}  # fmt: skip
    (tmp / "log").touch()
    return subprocess.run(["bash", "-c", f"set -eo pipefail\n{script}"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_the_release_is_fetched_checked_kept_and_unpacked_then_pulls_go_before_the_server(
    tmp_path: Path,
) -> None:
    archive = release(tmp_path)
    with release_server(archive.parent) as url:
        install = install_for(archive, url, tmp_path)
        done = run(install, tmp_path, "qwen3:8b llama3.2:1b")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "the-server-serves"
    assert Path(install.kept).read_bytes() == archive.read_bytes()  # kept for the next pod
    assert Path(install.home, "lib", "ollama", "libggml-base.so").exists()
    log = (tmp_path / "log").read_text().splitlines()
    assert log == ["serve on 127.0.0.1:21434", "pull qwen3:8b", "pull llama3.2:1b",
                   "serve on 127.0.0.1:21434"]  # fmt: skip


def test_a_tag_the_pod_no_longer_serves_is_removed_from_its_store(tmp_path: Path) -> None:
    archive = release(tmp_path)
    store = tmp_path / "volume" / "store"
    store.mkdir(parents=True)
    (store / "llama3.2:1b").touch()  # a member disarmed since the last start
    (store / "qwen3:8b").touch()
    with release_server(archive.parent) as url:
        done = run(install_for(archive, url, tmp_path), tmp_path, "qwen3:8b")
    assert done.returncode == 0, done.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert log[1:] == ["rm llama3.2:1b", "serve on 127.0.0.1:21434"]
    assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) == ["qwen3:8b"]


def test_a_kept_release_and_a_full_store_fetch_nothing(tmp_path: Path) -> None:
    archive = release(tmp_path)
    with release_server(archive.parent) as url:
        install = install_for(archive, url, tmp_path)
    Path(install.kept).parent.mkdir(parents=True)
    Path(install.kept).write_bytes(archive.read_bytes())
    store = tmp_path / "volume" / "store"
    store.mkdir(parents=True)
    (store / "qwen3:8b").touch()  # seeded
    done = run(install, tmp_path, "qwen3:8b")  # the release URL no longer answers
    assert done.returncode == 0, done.stderr
    assert "pull" not in (tmp_path / "log").read_text()


@pytest.mark.parametrize(
    "spoil", ["wrong-checksum", "tampered-no-release", "failed-pull", "escaping-member"]
)
def test_a_launch_that_cannot_install_or_pull_exits_before_the_server(
    spoil: str, tmp_path: Path
) -> None:
    archive = release(tmp_path, evil=spoil == "escaping-member")
    sha256 = hashlib.sha256(b"another release").hexdigest() if spoil == "wrong-checksum" else None
    with release_server(archive.parent) as url:
        install = install_for(archive, url, tmp_path, sha256=sha256)
        if spoil == "tampered-no-release":
            Path(install.kept).parent.mkdir(parents=True)
            Path(install.kept).write_bytes(archive.read_bytes() + b"x")
            gone = replace(install.archive, url=f"{url}/gone.tar.gz")
            install = replace(install, archive=gone)
        done = run(install, tmp_path, "bad:tag" if spoil == "failed-pull" else "qwen3:8b")
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "the-server-serves" not in done.stdout
    if spoil == "wrong-checksum":
        assert "does not match its pinned SHA-256" in done.stderr
        assert not Path(install.kept).exists()  # a file that fails its check is never kept
    if spoil == "tampered-no-release":
        assert "could not be fetched" in done.stderr
    if spoil == "escaping-member":
        assert not (tmp_path / "escaped").exists() and not Path(install.home).exists()
    if spoil == "failed-pull":
        # The first server was stopped; no second one started.
        assert (tmp_path / "log").read_text().count("serve on") == 1


def test_a_seeded_launch_only_checks_the_release_and_exits_without_it(tmp_path: Path) -> None:
    archive = release(tmp_path)
    with release_server(archive.parent) as url:
        install = replace(install_for(archive, url, tmp_path), fetch=False)
        done = run(install, tmp_path, "qwen3:8b")  # its seed never placed the release
        assert done.returncode != 0 and "the-server-serves" not in done.stdout
        assert f"engine: {install.kept} is missing or fails its SHA-256 check" in done.stderr
        assert not Path(install.kept).exists()  # nothing fetched on the GPU

        Path(install.kept).parent.mkdir(parents=True)
        Path(install.kept).write_bytes(archive.read_bytes())  # as the seed places it
        placed = run(install, tmp_path, "qwen3:8b")
    assert placed.returncode == 0, placed.stderr
    assert placed.stdout.strip() == "the-server-serves"
