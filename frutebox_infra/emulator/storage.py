"""Pods and the weights on their volume: what a new GPU pod finds there and how long its engine
then takes to serve (start, download what is missing, read what it loads), what a seeding CPU
pod fetches and answers, and Ollama's model store across pods.

A seeded model loads at the volume's read speed; an unseeded one downloads first at the
account's download speed, or, launched offline without its files, never serves: its engine
exits for want of them at every start, a crash loop (containers.py) as the real one's. The
account calls these hooks; it stays the one home of pods.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from frutebox_infra.catalog.schema import Runtime
from frutebox_infra.emulator import layout, seeder_pod, volume_files
from frutebox_infra.emulator.gateway import hook_archive, hook_failure
from frutebox_infra.emulator.hub import Hub, full_tag
from frutebox_infra.emulator.launch_reads import (
    Reads,
    launch_pulls,
    reads_of,
    release_checked,
)
from frutebox_infra.emulator.realism import Realism
from frutebox_infra.emulator.records import PodRecord, VolumeRecord
from frutebox_infra.recipes.ollama import PULLS_ENV


class Storage:
    """The weights side of the account: the emulated hub and each volume's files."""

    def __init__(self, hub: Hub | None = None) -> None:
        self._initial = hub or Hub()
        self.hub = copy.deepcopy(self._initial)

    def reset(self) -> None:
        """The hub as it was built, before any out-of-band change."""
        self.hub = copy.deepcopy(self._initial)

    def on_create(
        self,
        pod: PodRecord,
        volume: VolumeRecord | None,
        realism: Realism,
        others: Iterable[PodRecord],
        now: float,
    ) -> None:
        """Decide what the new pod's container does with the weights once it runs."""
        if volume is not None:
            for other in others:
                volume_files.settle(other, volume, now)
        speeds = realism.transfers
        mb_per_s = speeds.download_mb_per_s
        rate = mb_per_s * 1e6 * realism.time_scale if mb_per_s else None
        if pod.gpu is None:
            if seeder_pod.is_seeder(pod):
                pod.load_s = realism.real_s(speeds.cpu_start_s)
                seeder_pod.start(pod, volume, self.hub, after_s=pod.load_s, bytes_per_s=rate)
            return
        pod.hooked, hook_crash = hook_failure(pod.body, volume)
        if hook_crash is not None:
            self._broken(pod, hook_crash, realism.real_s(speeds.gpu_start_s))
            return
        release_crash = self.gateway_release(pod, volume)
        if release_crash is not None:
            self._broken(pod, release_crash, realism.real_s(speeds.gpu_start_s))
            return
        reads = reads_of(pod.body, self.hub, volume) if volume is not None else None
        if reads is None or volume is None:
            return
        started = realism.real_s(speeds.gpu_start_s)
        if reads.store is not None:
            # Ollama lists what its store holds (seeded, or pulled by an earlier pod); a launch
            # that installs Ollama's release and pulls what the store lacks does so first.
            found = layout.ollama_tags(volume_files.listed(volume, reads.store), reads.store)
            pod.pulled = sorted({*pod.pulled, *found})
            fetched = self._launch_fetches(pod, volume, reads.store, found)
            if fetched is None:
                pod.load_s = started
                return
            pod.load_s = realism.real_s(speeds.gpu_start_s + speeds.download_s(fetched))
            return
        if reads.failure is not None:
            self._broken(pod, reads.failure, started)
            return
        absent = volume_files.missing(volume, reads.pieces)
        if absent and reads.offline:
            self._broken(pod, _offline_line(reads, len(absent)), started)
            return
        need = sum(p.size - volume_files.have(volume, p.path) for p in absent)
        if absent:
            volume_files.start_transfer(
                pod, volume, absent, after_s=started, bytes_per_s=rate, refs=reads.refs
            )
            pod.log(
                f"downloading {need / 1e9:.1f} GB of weights ({len(absent)} files) onto the volume"
            )
        else:
            pod.log("weights found on the volume; loading")
        total = sum(p.size for p in reads.pieces)
        read_s = speeds.read_s(total, volume.type) if reads.loads_at_start else 0.0
        pod.load_s = realism.real_s(speeds.gpu_start_s + speeds.download_s(need) + read_s)

    def on_stop(self, pod: PodRecord, volume: VolumeRecord | None, now: float) -> None:
        """The pod stopped or went: what it fetched by now stays, nothing more arrives."""
        if pod.seeding is not None:
            seeder_pod.status(pod, volume, now)  # writes the refs of the jobs it finished
        volume_files.end(pod, volume, now)

    def answer(
        self,
        pod: PodRecord,
        volume: VolumeRecord | None,
        port: int,
        method: str,
        path: str,
        now: float,
    ) -> tuple[int, Any] | None:
        """A seeding pod's status port; None: the pod's own server answers (ports.py)."""
        if pod.seeding is None:
            return None
        if f"{port}/http" not in (pod.body.get("ports") or []):
            return 404, {"error": f"pod {pod.id} does not expose {port}/http"}
        if not pod.serving_process or pod.crash_looping or pod.loading(now):
            return 502, {"error": "the pod's server is not answering"}
        if method == "GET" and path.split("?", 1)[0] == "/status":
            return 200, seeder_pod.status(pod, volume, now)
        return 404, {"error": "not found"}

    def after_proxy(
        self,
        pod: PodRecord,
        volume: VolumeRecord | None,
        method: str,
        path: str,
        body: Any,
        status: int,
    ) -> None:
        """Ollama's pull writes the tag into the pod's store on the volume; a delete removes
        its manifest, so the next pod on that store lists what this one left."""
        store = layout.below_mount(str((pod.body.get("env") or {}).get("OLLAMA_MODELS", "")))
        model = body.get("model") if isinstance(body, dict) else None
        if volume is None or store is None or not isinstance(model, str) or status != 200:
            return
        manifest = layout.ollama_manifest(store, model)
        if (method, path) == ("DELETE", "/api/delete"):
            volume_files.remove(volume, manifest)
            return
        if (method, path) != ("POST", "/api/pull") or full_tag(model) not in {
            full_tag(t) for t in pod.pulled
        }:
            return
        tag = self.hub.tags.get(full_tag(model))
        for digest, size in tag.blobs if tag else ():
            path_ = layout.ollama_blob(store, digest)
            volume_files.write(volume, path_, size, size)
        volume_files.write(volume, manifest, seeder_pod.MANIFEST_BYTES, seeder_pod.MANIFEST_BYTES)

    def on_restart(self, pod: PodRecord, volume: VolumeRecord | None) -> None:
        """A GPU pod's container started anew with new settings (a PATCH): its launch checks
        the gateway's release again, an Ollama launch that pulls and prunes its own store does
        so again, and its server lists the store."""
        pod.crash = pod.crash or self.gateway_release(pod, volume)
        env = pod.body.get("env") or {}
        if volume is None or not isinstance(env, dict) or PULLS_ENV not in env:
            return
        reads = reads_of(pod.body, self.hub, volume)
        if reads is None or reads.store is None:
            return
        found = layout.ollama_tags(volume_files.listed(volume, reads.store), reads.store)
        pod.pulled = list(found)
        self._launch_fetches(pod, volume, reads.store, found)

    def _launch_fetches(
        self, pod: PodRecord, volume: VolumeRecord, store: str, found: list[str]
    ) -> int | None:
        """What an Ollama launch script fetches before its server answers: the release
        archive when the volume lacks it, then every tag of its pulls the store lacks (each
        written to the volume). The bytes fetched; None when the launch exits at start (the
        release or a tag cannot be fetched), which is then the pod's crash."""
        fetched = 0
        archive = release_checked(pod.body, "engine")
        if archive is not None:
            fetched, crash = self._kept_release(volume, *archive, who="engine", kind="SHA-256")
            if crash is not None:
                pod.crash = pod.crash or crash
                return None
        env = pod.body.get("env") or {}
        pulls = launch_pulls(env if isinstance(env, dict) else {})
        have = {full_tag(t) for t in found}
        wanted = {full_tag(t) for t in pulls}
        for tag in found if PULLS_ENV in env else ():
            if full_tag(tag) not in wanted:  # the launch removes what the pod no longer serves
                volume_files.remove(volume, layout.ollama_manifest(store, tag))
                pod.pulled = [t for t in pod.pulled if full_tag(t) != full_tag(tag)]
        for tag in pulls:
            if full_tag(tag) in have:
                continue
            known = self.hub.tags.get(full_tag(tag))
            if known is None:
                pod.crash = pod.crash or f"Error: pull model manifest: file does not exist ({tag})"
                return None
            for digest, size_ in known.blobs:
                volume_files.write(volume, layout.ollama_blob(store, digest), size_, size_)
                fetched += size_
            manifest = layout.ollama_manifest(store, tag)
            volume_files.write(
                volume, manifest, seeder_pod.MANIFEST_BYTES, seeder_pod.MANIFEST_BYTES
            )
            pod.pulled = sorted({*pod.pulled, tag if ":" in tag else f"{tag}:latest"})
        return fetched

    def gateway_release(self, pod: PodRecord, volume: VolumeRecord | None) -> str | None:
        """What a launch (or the start hook it runs) that starts the gateway does with its
        release before anything else (recipes/gateway.py `gateway_start`, `start_hook`): the
        line it prints before it exits, or None when the release is on the volume (or fetched
        there, by a launch that fetches)."""
        found = release_checked(pod.body, "gateway") or hook_archive(pod.body, volume)
        if found is None or volume is None:
            return None
        return self._kept_release(volume, *found, who="gateway", kind="SHA-512")[1]

    def _kept_release(
        self, volume: VolumeRecord, kept: str, url: str, fetch: bool, *, who: str, kind: str
    ) -> tuple[int, str | None]:
        """A release archive a launch checks on the volume (`kept`, below the mount): there,
        nothing to do; missing, a launch that only checks it (a seeded pod's, whose seeding pod
        placed it) exits, and one that fetches it (an unseeded pod's) fetches it from `url`,
        exiting when that is gone or does not match its pin. (Bytes fetched, the line it
        prints before it exits or None.)"""
        size = volume.files.get(kept, [0, 0])
        if size[0] and volume_files.complete(volume, kept, size[0]):
            return 0, None
        if not fetch:
            return 0, f"{who}: {layout.on_mount(kept)} is missing or fails its {kind} check"
        release = self.hub.releases.get(url)
        if release is None:
            return 0, f"{who}: {url} could not be fetched: HTTP Error 404: Not Found"
        if url in self.hub.tampered:
            return 0, f"{who}: {url} does not match its pinned {kind}"
        volume_files.write(volume, kept, release, release)
        return release, None

    @staticmethod
    def _broken(pod: PodRecord, why: str, started: float) -> None:
        """The engine exits at start, printing `why`, and RunPod restarts it again and again."""
        pod.crash = pod.crash or why
        pod.load_s = started


def _offline_line(reads: Reads, absent: int) -> str:
    switch = "LLAMA_ARG_OFFLINE=1" if reads.runtime is Runtime.LLAMACPP else "HF_HUB_OFFLINE=1"
    return (
        f"offline mode ({switch}) and {absent} of {len(reads.pieces)} weight files are not in"
        " the cache; cannot download them"
    )
