"""The real seeder program, run as a subprocess against a fake Hub, CDN and Ollama registry on
loopback; what it leaves on the "volume" is read back with huggingface_hub itself, offline."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import snapshot_download, try_to_load_from_cache

from frutebox_infra.plumbing.validation import validate
from frutebox_infra.seeding.protocol import (
    FilesJob,
    FileSpec,
    HfSnapshotJob,
    JobState,
    OllamaJob,
    PlacedArchive,
    PlacedText,
    SeedJob,
    SeedPlan,
    SeedState,
    SeedStatus,
)
from tests.seeding.fake_hub import TOKEN, FakeHub, Repo, running_hub, sha256

SEEDER = Path(__file__).parents[2] / "frutebox_infra" / "seeding" / "seeder.py"
MB = 1 << 20
COMMIT = "a" * 40

CONFIG = b'{"architectures": ["Qwen3ForCausalLM"]}'
SHARD_1 = os.urandom(3 * MB + 11)
SHARD_2 = os.urandom(2 * MB + 5)


def qwen_repo(**kwargs: Any) -> Repo:
    return Repo(
        files={
            "config.json": CONFIG,
            "tokenizer.json": b'{"version": "1.0"}',
            "model-00001-of-00002.safetensors": SHARD_1,
            "model-00002-of-00002.safetensors": SHARD_2,
            "pytorch_model.bin": b"a second copy the engines never read",
            "original/consolidated.pth": b"and a third",
        },
        commit=COMMIT,
        **kwargs,
    )


SEEDED = ("config.json", "tokenizer.json", "model-00001-of-00002.safetensors",
          "model-00002-of-00002.safetensors")  # fmt: skip
IGNORED = ("pytorch_model.bin", "original/consolidated.pth")


def snapshot_job(repo: str = "org/qwen", **kwargs: Any) -> HfSnapshotJob:
    fields: dict[str, Any] = {
        "modelId": "qwen",
        "repo": repo,
        "revision": "main",
        "cacheDir": "huggingface/hub",
        "refs": ("main",),
        "ignoreBesideSafetensors": ("*.bin", "*.pth", "original/*"),
        **kwargs,
    }
    return HfSnapshotJob(**fields)


@dataclass
class Run:
    process: subprocess.Popen[str]
    port: int

    def status(self) -> SeedStatus:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/status", timeout=10) as r:
            return validate(SeedStatus, json.loads(r.read()))

    def wait(self, until: Callable[[SeedStatus], bool] | None = None) -> SeedStatus:
        """Poll /status until `until` holds (default: the run has finished)."""
        check = until or (lambda s: s.state is not SeedState.RUNNING)
        for _ in range(600):
            status = self.status()
            if check(status):
                return status
            time.sleep(0.05)
        raise AssertionError(f"the seeder never got there: {self.status()}")


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with running_hub() as fake:
        yield fake


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Run]]:
    """Start the seeder on `jobs` with the volume at tmp_path/volume; stop it afterwards."""
    runs: list[Run] = []

    def launch(hub: FakeHub, jobs: Sequence[SeedJob], *, token: str | None = None,
               stall: float = 30, plan_text: str | None = None,
               limit_file_bytes: int | None = None) -> Run:  # fmt: skip
        plan = SeedPlan(
            volumePath=str(tmp_path / "volume"),
            jobs=tuple(jobs),
            hubUrl=hub.hub_url,
            ollamaRegistryUrl=hub.hub_url,
            stallSeconds=stall,
            port=0,
            bindAddress="127.0.0.1",
        )
        env = {"PATH": os.environ["PATH"], "FRUTEBOX_SEED_PLAN": plan_text or plan.to_json()}
        if token:
            env["HF_TOKEN"] = token

        def limits() -> None:  # a real OS limit stands in for a full volume
            if limit_file_bytes is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

        process = subprocess.Popen(
            [sys.executable, str(SEEDER)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=limits,
        )
        assert process.stdout is not None
        first = process.stdout.readline()
        assert "status on port" in first, first
        run = Run(process, int(first.rsplit(" ", 1)[1]))
        runs.append(run)
        return run

    yield launch
    for run in runs:
        # It never exits by itself (RunPod would restart it); SIGTERM ends it cleanly.
        assert run.process.poll() is None, "the seeder exited on its own"
        run.process.send_signal(signal.SIGTERM)
        assert run.process.wait(timeout=10) == 0


def hub_cache(tmp_path: Path) -> Path:
    return tmp_path / "volume" / "huggingface" / "hub"


def test_a_snapshot_is_what_huggingface_hub_reads_offline(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    status = start(hub, [snapshot_job()]).wait()

    job = status.job("qwen")
    assert status.state is SeedState.DONE and job is not None
    assert job.state is JobState.DONE and job.commit == COMMIT
    assert job.bytesDone == job.bytesTotal == sum(len(qwen_repo().files[p]) for p in SEEDED)
    assert job.filesDone == job.filesTotal == len(SEEDED)
    cache = hub_cache(tmp_path)
    for revision in ("main", COMMIT):
        folder = Path(snapshot_download("org/qwen", revision=revision, cache_dir=cache,
                                        local_files_only=True))  # fmt: skip
        assert folder == cache / "models--org--qwen" / "snapshots" / COMMIT
        for path in SEEDED:
            cached = try_to_load_from_cache("org/qwen", path, cache_dir=cache, revision=revision)
            assert isinstance(cached, str) and Path(cached).read_bytes() == qwen_repo().files[path]
        for path in IGNORED:
            assert try_to_load_from_cache("org/qwen", path, cache_dir=cache) is None
    # The layout huggingface_hub writes: relative links into blobs named by the hash.
    pointer = cache / "models--org--qwen" / "snapshots" / COMMIT / SEEDED[2]
    assert os.readlink(pointer) == f"../../blobs/{sha256(SHARD_1)}"
    assert (cache / "models--org--qwen" / "refs" / "main").read_text() == COMMIT


GATEWAY_TGZ = os.urandom(MB + 3)
ENGINE_ZST = os.urandom(2 * MB + 7)
GATEWAY_PATH = "frutebox/gateway/caddy-v2.11.4.tar.gz"
ENGINE_PATH = "frutebox/engines/ollama-0.35.1-ollama-linux-amd64.tar.zst"


def sha512(data: bytes) -> str:
    return hashlib.sha512(data).hexdigest()


def releases(hub: FakeHub, *, gateway_pin: str | None = None) -> tuple[PlacedArchive, ...]:
    """The gateway's release (SHA-512) and an engine's (SHA-256), served on loopback."""
    gateway = PlacedArchive(url=hub.add_release("caddy.tar.gz", GATEWAY_TGZ), path=GATEWAY_PATH,
                            sha512=gateway_pin or sha512(GATEWAY_TGZ))  # fmt: skip
    engine = PlacedArchive(url=hub.add_release("ollama.tar.zst", ENGINE_ZST), path=ENGINE_PATH,
                           sha256=sha256(ENGINE_ZST))  # fmt: skip
    return gateway, engine


def test_release_archives_are_placed_checked_first_and_counted(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    archives = releases(hub)
    status = start(hub, [snapshot_job(archives=archives)]).wait()

    job = status.job("qwen")
    assert job is not None and job.state is JobState.DONE, job
    volume = tmp_path / "volume"
    assert (volume / GATEWAY_PATH).read_bytes() == GATEWAY_TGZ
    assert (volume / ENGINE_PATH).read_bytes() == ENGINE_ZST
    for folder in ("frutebox/gateway", "frutebox/engines"):  # no temporary name left behind
        assert len(list((volume / folder).iterdir())) == 1
    weights = sum(len(qwen_repo().files[p]) for p in SEEDED)
    assert job.bytesDone == job.bytesTotal == weights + len(GATEWAY_TGZ) + len(ENGINE_ZST)
    assert job.filesDone == job.filesTotal == len(SEEDED) + 2
    # Fetched before any weight: the first requests are the releases'.
    paths = [s.path for s in hub.requests_to("hub")]
    assert paths[:2] == ["/releases/caddy.tar.gz", "/releases/ollama.tar.zst"]


def test_a_release_already_there_and_matching_is_left_alone_and_a_wrong_one_replaced(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    archives = releases(hub)
    volume = tmp_path / "volume"
    (volume / GATEWAY_PATH).parent.mkdir(parents=True)
    (volume / GATEWAY_PATH).write_bytes(GATEWAY_TGZ)
    (volume / ENGINE_PATH).parent.mkdir(parents=True)
    (volume / ENGINE_PATH).write_bytes(b"a damaged copy")
    job = start(hub, [snapshot_job(archives=archives)]).wait().job("qwen")

    assert job is not None and job.state is JobState.DONE, job
    assert job.bytesSkipped == len(GATEWAY_TGZ)
    assert [s.path for s in hub.requests_to("hub", "/releases/")] == ["/releases/ollama.tar.zst"]
    assert (volume / ENGINE_PATH).read_bytes() == ENGINE_ZST


@pytest.mark.parametrize(
    ("unkind", "reason"),
    [
        pytest.param("pin", "does not match its pinned sha512", id="wrong-pin"),
        pytest.param("corrupt", "does not match its pinned sha512", id="corrupt-download"),
        pytest.param("gone", "could not be fetched: HTTP 404", id="gone"),
    ],
)
def test_a_release_that_does_not_match_its_pin_or_is_gone_fails_the_job_before_the_weights(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path, unkind: str, reason: str
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    gateway, engine = releases(hub, gateway_pin="0" * 128 if unkind == "pin" else None)
    if unkind == "corrupt":
        hub.unkind.corrupt.add(sha256(GATEWAY_TGZ))
    if unkind == "gone":
        del hub.releases["caddy.tar.gz"]
    job = start(hub, [snapshot_job(archives=(gateway, engine))]).wait().job("qwen")

    assert job is not None and job.state is JobState.FAILED
    assert f"the release {gateway.url} {reason}" in (job.reason or "")
    assert "registry/images.yaml" in (job.fix or "")
    volume = tmp_path / "volume"
    assert not (volume / GATEWAY_PATH).exists() and not (volume / ENGINE_PATH).exists()
    gateway_dir = volume / "frutebox" / "gateway"
    assert not gateway_dir.exists() or list(gateway_dir.iterdir()) == []  # nothing half-placed
    assert hub.requests_to("hub", "/api/") == []  # no weight was asked for


def test_a_start_hook_is_written_whole_with_the_weights(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    hook = PlacedText(path="frutebox/hook/abc/sitecustomize.py", text="print('hooked')\n")
    status = start(hub, [snapshot_job(texts=(hook,))]).wait()
    job = status.job("qwen")
    assert job is not None and job.state is JobState.DONE
    written = tmp_path / "volume" / hook.path
    assert written.read_text() == hook.text
    assert [p.name for p in written.parent.iterdir()] == ["sitecustomize.py"]  # no leftovers


def test_a_start_hook_that_cannot_be_written_fails_the_model(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    (tmp_path / "volume" / "frutebox").mkdir(parents=True)
    (tmp_path / "volume" / "frutebox" / "hook").write_text("a file where a folder must go")
    hook = PlacedText(path="frutebox/hook/abc/sitecustomize.py", text="x = 1\n")
    job = start(hub, [snapshot_job(texts=(hook,))]).wait().job("qwen")
    assert job is not None and job.state is JobState.FAILED
    assert job.reason is not None and "sitecustomize.py could not be written" in job.reason
    assert not hub.requests_to("cdn")  # no weight moved for a pod that could not start


def test_a_snapshot_job_makes_the_counter_directories_it_names(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    made = "frutebox/counters/qwen/vllm-v1"
    (tmp_path / "volume" / "frutebox").mkdir(parents=True)
    status = start(hub, [snapshot_job(counterDirs=(made,))]).wait()
    assert status.state is SeedState.DONE
    assert (tmp_path / "volume" / made).is_dir()
    # Kept as it is on a second run: what an engine counted there stays.
    (tmp_path / "volume" / made / "counter_7.db").write_bytes(b"x")
    assert start(hub, [snapshot_job(counterDirs=(made,))]).wait().state is SeedState.DONE
    assert (tmp_path / "volume" / made / "counter_7.db").read_bytes() == b"x"


def test_the_offline_read_fails_without_the_seed(tmp_path: Path) -> None:
    """The check above can fail: an empty cache is not found offline."""
    with pytest.raises(Exception, match="local"):
        snapshot_download("org/qwen", cache_dir=hub_cache(tmp_path), local_files_only=True)


def test_complete_files_are_skipped(hub: FakeHub, start: Callable[..., Run]) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    start(hub, [snapshot_job()]).wait()
    downloads = len(hub.requests_to("cdn"))

    job = start(hub, [snapshot_job()]).wait().job("qwen")

    assert job is not None and job.state is JobState.DONE
    assert job.bytesSkipped == job.bytesTotal
    assert len(hub.requests_to("cdn")) == downloads  # nothing fetched the second time


def test_a_partial_download_resumes_where_it_stopped(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    blobs = hub_cache(tmp_path) / "models--org--qwen" / "blobs"
    blobs.mkdir(parents=True)
    half = len(SHARD_1) // 2
    (blobs / f"{sha256(SHARD_1)}.incomplete").write_bytes(SHARD_1[:half])

    job = start(hub, [snapshot_job()]).wait().job("qwen")

    assert job is not None and job.state is JobState.DONE
    asked = [s.headers.get("Range") for s in hub.requests_to("cdn", f"/blob/{sha256(SHARD_1)}")]
    assert asked == [f"bytes={half}-"]
    assert (blobs / sha256(SHARD_1)).read_bytes() == SHARD_1


def test_a_dropped_connection_resumes_and_a_range_the_source_ignores_restarts(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    hub.unkind.drop_once_after[sha256(SHARD_1)] = MB
    hub.unkind.ignore_range.add(sha256(SHARD_2))
    blobs = hub_cache(tmp_path) / "models--org--qwen" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{sha256(SHARD_2)}.incomplete").write_bytes(b"stale prefix")

    job = start(hub, [snapshot_job()]).wait().job("qwen")

    assert job is not None and job.state is JobState.DONE, job
    asked = [s.headers.get("Range") for s in hub.requests_to("cdn", f"/blob/{sha256(SHARD_1)}")]
    assert asked == [None, f"bytes={MB}-"]
    assert (blobs / sha256(SHARD_1)).read_bytes() == SHARD_1
    assert (blobs / sha256(SHARD_2)).read_bytes() == SHARD_2


def test_a_hash_mismatch_fails_the_model_and_keeps_nothing(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    hub.unkind.corrupt.add(sha256(SHARD_2))

    job = start(hub, [snapshot_job()]).wait().job("qwen")

    assert job is not None and job.state is JobState.FAILED
    assert job.reason is not None and "sha256 mismatch" in job.reason
    blobs = hub_cache(tmp_path) / "models--org--qwen" / "blobs"
    assert not (blobs / sha256(SHARD_2)).exists()
    assert not (blobs / f"{sha256(SHARD_2)}.incomplete").exists()
    assert not (hub_cache(tmp_path) / "models--org--qwen" / "refs" / "main").exists()


@pytest.mark.parametrize(
    ("token", "state"),
    [
        pytest.param(None, JobState.FAILED, id="no-token"),
        pytest.param(TOKEN, JobState.DONE, id="token"),
    ],
)
def test_a_gated_repo_needs_the_token_and_says_how(
    hub: FakeHub, start: Callable[..., Run], token: str | None, state: JobState
) -> None:
    hub.add_repo("org/qwen", qwen_repo(gated=True))

    job = start(hub, [snapshot_job(gated=True)], token=token).wait().job("qwen")

    assert job is not None and job.state is state
    if state is JobState.FAILED:
        assert job.reason == "org/qwen is gated and no Hugging Face token was sent"
        assert job.fix is not None and "frutebox-infra:hfToken" in job.fix


def test_the_token_goes_to_the_hub_only_never_to_the_cdn(
    hub: FakeHub, start: Callable[..., Run]
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    # A repo that moved redirects on the hub's own host: the token follows that redirect.
    hub.add_repo("org/moved", Repo(files={"w.safetensors": SHARD_2}, commit=COMMIT))
    moved = FilesJob(
        modelId="moved",
        files=(FileSpec(repo="org/moved", revision="main", path="w.safetensors",
                        destination="ComfyUI/models/checkpoints/w.safetensors"),),
    )  # fmt: skip
    renamed_file = replace(
        moved.files[0], repo="renamed/moved", destination="ComfyUI/models/vae/w.safetensors"
    )
    renamed = replace(moved, modelId="renamed", files=(renamed_file,))
    hub.add_repo("renamed/moved", Repo(files={"w.safetensors": SHARD_2}, commit=COMMIT))

    status = start(hub, [snapshot_job(), moved, renamed], token=TOKEN).wait()

    assert status.state is SeedState.DONE, status
    assert hub.requests_to("cdn") and all(
        "Authorization" not in s.headers for s in hub.requests_to("cdn")
    )
    assert all(s.headers.get("Authorization") == f"Bearer {TOKEN}" for s in hub.requests_to("hub"))
    assert hub.requests_to("hub", "/org/moved/resolve/")  # reached through the redirect


@pytest.mark.parametrize(
    ("job", "token", "reason"),
    [
        pytest.param(snapshot_job(repo="org/nope"), TOKEN, "org/nope does not exist", id="repo"),
        pytest.param(
            snapshot_job(repo="org/nope"), None,
            "org/nope was not found, or it is private or gated and no token was sent",
            id="repo-anonymous",
        ),
        pytest.param(
            snapshot_job(revision="v9"), None, "revision v9 does not exist in org/qwen",
            id="revision",
        ),
        pytest.param(
            FilesJob(modelId="qwen", files=(FileSpec(
                repo="org/qwen", revision="main", path="vae/missing.safetensors",
                destination="ComfyUI/models/vae/missing.safetensors"),)),
            None, "vae/missing.safetensors does not exist in org/qwen at main", id="file",
        ),
        pytest.param(
            FilesJob(modelId="qwen", files=(FileSpec(
                repo="org/qwen", revision="main", path="absent.json",
                destination="ComfyUI/models/vae/absent.json"),)),
            None, "absent.json does not exist in org/qwen at main", id="file-in-root",
        ),
        pytest.param(
            snapshot_job(quant="Q9_K"), None, "org/qwen has no GGUF model file of quant Q9_K",
            id="quant",
        ),
    ],
)  # fmt: skip
def test_what_is_missing_is_named(
    hub: FakeHub, start: Callable[..., Run], job: SeedJob, token: str | None, reason: str
) -> None:
    hub.add_repo("org/qwen", qwen_repo())

    status = start(hub, [job], token=token).wait().job("qwen")

    assert status is not None and status.state is JobState.FAILED
    assert status.reason == reason
    assert status.fix and "registry/models.yaml" in status.fix


def test_storage_refusing_a_link_is_not_blamed_on_the_repo_or_the_token(
    hub: FakeHub, start: Callable[..., Run]
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    hub.unkind.refuse.add(sha256(SHARD_1))

    job = start(hub, [snapshot_job()], token=TOKEN).wait().job("qwen")

    assert job is not None and job.reason is not None
    assert "its storage host 127.0.0.1:" in job.reason and "answered HTTP 403" in job.reason
    assert "token" not in job.reason


def test_a_refused_token_is_named(hub: FakeHub, start: Callable[..., Run]) -> None:
    hub.add_repo("org/qwen", qwen_repo())

    job = start(hub, [snapshot_job()], token="hf_wrong").wait().job("qwen")

    assert job is not None and job.reason == "Hugging Face refused the token (invalid credentials)"


def test_a_stall_fails_the_model_with_the_reason(hub: FakeHub, start: Callable[..., Run]) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    hub.unkind.stall_after[sha256(SHARD_1)] = MB

    job = start(hub, [snapshot_job()], stall=0.3).wait().job("qwen")

    assert job is not None and job.state is JobState.FAILED
    assert job.reason is not None and "stalled: no byte for 0.3 s, 3 times" in job.reason
    assert job.bytesDone >= 0 and job.fix is not None and "resumes" in job.fix


def test_models_seed_side_by_side_and_fail_alone(hub: FakeHub, start: Callable[..., Run]) -> None:
    """The status names each state: one model still downloading while another is done, then
    one done and one failed."""
    hub.add_repo("org/qwen", qwen_repo())
    hub.add_repo("org/slow", Repo(files={"w.safetensors": SHARD_2}, commit="b" * 40))
    held = hub.unkind.gate.setdefault(sha256(SHARD_2), __import__("threading").Event())
    slow = snapshot_job(repo="org/slow", modelId="slow", ignoreBesideSafetensors=())
    gone = snapshot_job(repo="org/gone", modelId="gone")
    run = start(hub, [snapshot_job(ignoreBesideSafetensors=("*.bin", "*.pth", "original/*",
                                                            "*00002*")), slow, gone],
                token=TOKEN)  # fmt: skip

    during = run.wait(
        lambda s: (
            s.job("qwen").state is JobState.DONE  # type: ignore[union-attr]
            and s.job("gone").state is JobState.FAILED
        )
    )  # type: ignore[union-attr]
    assert during.state is SeedState.RUNNING
    assert during.job("slow").state is JobState.RUNNING  # type: ignore[union-attr]
    held.set()
    after = run.wait()

    assert after.state is SeedState.FAILED
    assert [(j.modelId, j.state) for j in after.jobs] == [
        ("qwen", JobState.DONE),
        ("slow", JobState.DONE),
        ("gone", JobState.FAILED),
    ]


def test_a_gguf_quant_is_the_files_llama_cpp_loads(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    shards = {f"UD-Q4_K_XL/Kimi-UD-Q4_K_XL-0000{i}-of-00003.gguf": os.urandom(MB + i)
              for i in (1, 2, 3)}  # fmt: skip
    other = {
        "UD-Q8_K_XL/Kimi-UD-Q8_K_XL-00001-of-00002.gguf": b"q8 one",
        "UD-Q8_K_XL/Kimi-UD-Q8_K_XL-00002-of-00002.gguf": b"q8 two",
        "mmproj-UD-Q4_K_XL-F16.gguf": b"vision tower",
        "README.md": b"# Kimi",
    }
    hub.add_repo("unsloth/Kimi-GGUF", Repo(files={**shards, **other}, commit=COMMIT))
    job = HfSnapshotJob(modelId="kimi", repo="unsloth/Kimi-GGUF", revision="main",
                        cacheDir="llama.cpp", refs=("main",), quant="UD-Q4_K_XL")  # fmt: skip

    status = start(hub, [job]).wait().job("kimi")

    assert status is not None and status.state is JobState.DONE, status
    cache = tmp_path / "volume" / "llama.cpp"
    folder = Path(snapshot_download("unsloth/Kimi-GGUF", revision=COMMIT, cache_dir=cache,
                                    local_files_only=True))  # fmt: skip
    found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.gguf"))
    assert found == sorted(shards)
    # llama.cpp, offline, loads the snapshot that refs/main names.
    assert (cache / "models--unsloth--Kimi-GGUF" / "refs" / "main").read_text() == COMMIT


def test_an_ollama_tag_lands_in_the_pods_store_as_ollama_keeps_it(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    weights = os.urandom(2 * MB)
    manifest = hub.add_ollama("qwen3:8b", [weights, b'{"template": "..."}'])
    job = OllamaJob(modelId="qwen3-8b", tag="qwen3:8b", store="ollama/models/qwen3-8b")

    status = start(hub, [job], token=TOKEN).wait().job("qwen3-8b")

    assert status is not None and status.state is JobState.DONE, status
    store = tmp_path / "volume" / "ollama" / "models" / "qwen3-8b"
    kept = store / "manifests" / "registry.ollama.ai" / "library" / "qwen3" / "8b"
    assert kept.read_bytes() == manifest
    for layer in json.loads(manifest)["layers"] + [json.loads(manifest)["config"]]:
        blob = store / "blobs" / layer["digest"].replace(":", "-")
        assert blob.stat().st_size == layer["size"]
        assert sha256(blob.read_bytes()) == layer["digest"].removeprefix("sha256:")
    registry = hub.requests_to("hub", "/v2/")
    assert registry and all("Authorization" not in s.headers for s in registry)


def test_an_unknown_ollama_tag_is_named(hub: FakeHub, start: Callable[..., Run]) -> None:
    job = OllamaJob(modelId="x", tag="qwen3:99b", store="ollama/models/x")

    status = start(hub, [job]).wait().job("x")

    assert status is not None and status.reason == "the Ollama library has no qwen3:99b"


def test_flat_files_are_verified_once_and_trusted_after(
    hub: FakeHub, start: Callable[..., Run], tmp_path: Path
) -> None:
    hub.add_repo("org/sdxl", Repo(files={"split/sd_xl.safetensors": SHARD_1, "vae/v.safetensors":
                                         SHARD_2}, commit=COMMIT))  # fmt: skip
    files = FilesJob(modelId="sdxl", files=(
        FileSpec(repo="org/sdxl", revision=COMMIT, path="split/sd_xl.safetensors",
                 destination="ComfyUI/models/checkpoints/sd_xl.safetensors"),
        FileSpec(repo="org/sdxl", revision=COMMIT, path="vae/v.safetensors",
                 destination="ComfyUI/models/vae/v.safetensors", sha256=sha256(SHARD_2)),
    ))  # fmt: skip
    models = tmp_path / "volume" / "ComfyUI" / "models"
    # Left by an earlier GPU pod: one right file (no marker yet), one of the right size but wrong.
    (models / "checkpoints").mkdir(parents=True)
    (models / "checkpoints" / "sd_xl.safetensors").write_bytes(SHARD_1)
    (models / "vae").mkdir()
    (models / "vae" / "v.safetensors").write_bytes(bytes(len(SHARD_2)))

    first = start(hub, [files]).wait().job("sdxl")
    fetched = [s.path.partition("?")[0] for s in hub.requests_to("cdn")]
    second = start(hub, [files]).wait().job("sdxl")

    assert first is not None and first.state is JobState.DONE, first
    assert first.bytesSkipped == len(SHARD_1)  # hashed, found right, kept
    assert fetched == [f"/blob/{sha256(SHARD_2)}"]  # the wrong one was fetched again
    assert (models / "vae" / "v.safetensors").read_bytes() == SHARD_2
    assert second is not None and second.bytesSkipped == second.bytesTotal
    assert len(hub.requests_to("cdn")) == 1


def test_a_file_unlike_the_registry_fails(hub: FakeHub, start: Callable[..., Run]) -> None:
    hub.add_repo("org/sdxl", Repo(files={"v.safetensors": SHARD_2}, commit=COMMIT))
    files = FilesJob(modelId="sdxl", files=(FileSpec(
        repo="org/sdxl", revision="main", path="v.safetensors",
        destination="ComfyUI/models/vae/v.safetensors", size=len(SHARD_2) + 1),))  # fmt: skip

    job = start(hub, [files]).wait().job("sdxl")

    assert job is not None and job.reason is not None
    assert "is not the file the registry describes" in job.reason


def test_a_volume_too_small_fails_before_any_download(
    hub: FakeHub, start: Callable[..., Run]
) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    listed = hub.tree_answer

    def lying_tree(handler: Any, repo: Repo, rest: list[str], query: Any) -> None:
        # The listing says 10 PB; the real hub's sizes are the ones the seeder trusts.
        original = handler.reply_json

        def bigger(body: Any, headers: Any = None) -> None:
            for entry in body:
                if "lfs" in entry:
                    entry["size"] = entry["lfs"]["size"] = 10**16
            original(body, headers)

        handler.reply_json = bigger
        listed(handler, repo, rest, query)

    hub.tree_answer = lying_tree  # type: ignore[method-assign]

    job = start(hub, [snapshot_job()]).wait().job("qwen")

    assert job is not None and job.state is JobState.FAILED
    assert job.reason is not None and "GB free and qwen needs" in job.reason
    assert job.fix is not None and "minVolumeGb" in job.fix
    assert hub.requests_to("cdn") == []


def test_a_full_volume_while_writing_fails_the_model(
    hub: FakeHub, start: Callable[..., Run]
) -> None:
    hub.add_repo("org/qwen", qwen_repo())

    job = start(hub, [snapshot_job()], limit_file_bytes=MB).wait().job("qwen")

    assert job is not None and job.state is JobState.FAILED
    assert job.reason is not None and job.reason.startswith("the volume is full")


def test_a_rate_limit_is_waited_out(hub: FakeHub, start: Callable[..., Run]) -> None:
    hub.add_repo("org/qwen", qwen_repo())
    hub.retry_once.add("/api/models/org/qwen/revision/main")

    job = start(hub, [snapshot_job()]).wait().job("qwen")

    assert job is not None and job.state is JobState.DONE
    assert len(hub.requests_to("hub", "/api/models/org/qwen/revision/")) == 2


def test_an_unreadable_plan_is_served_as_a_failure_not_an_exit(
    hub: FakeHub, start: Callable[..., Run]
) -> None:
    broken = {"volumePath": "/x", "port": 0, "bindAddress": "127.0.0.1", "jobs": [{"kind": "x"}]}
    run = start(hub, [snapshot_job()], plan_text=json.dumps(broken))
    with urllib.request.urlopen(f"http://127.0.0.1:{run.port}/status", timeout=10) as r:
        body = json.loads(r.read())
    assert body["state"] == "failed" and body["jobs"] == []
    assert "the seed plan (FRUTEBOX_SEED_PLAN) is unreadable" in body["error"]
    assert validate(SeedStatus, body).error == body["error"]  # what the step reads
