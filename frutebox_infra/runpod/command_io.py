"""Command inputs: the request on stdin, the previous result, the environment, the clients."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, TextIO, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from frutebox_infra.runpod.client import (
    DEFAULT_API_URL,
    DEFAULT_PROXY_URL_TEMPLATE,
    ProxyClient,
    RetryPolicy,
    RunPodClient,
)
from frutebox_infra.runpod.errors import ConfigurationError
from frutebox_infra.runpod.lifecycle import Provisioner, Timeouts

_M = TypeVar("_M", bound=BaseModel)


class _Strict(BaseModel):
    """Requests come from our own Pulumi program: an unknown key is a bug worth stopping on."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class HealthSpec(_Strict):
    port: int = Field(ge=1, le=65535)
    path: str = Field(default="/", pattern=r"^/")
    expectedFiles: list[str] = Field(default_factory=list)
    """`kind/name` files the server must list under /models/<kind> (ComfyUI) to be healthy."""


class TimeoutSpec(_Strict):
    """Either bound may be left out: `Timeouts` holds the defaults, in one place."""

    runningSeconds: float | None = Field(default=None, gt=0)
    healthySeconds: float | None = Field(default=None, gt=0)


class PodRequest(_Strict):
    """stdin of `pod create|update`: candidates are full CreatePodRequest bodies, cheapest first."""

    name: str = Field(min_length=1)
    candidates: list[dict[str, Any]] = Field(min_length=1)
    health: HealthSpec
    ollamaPull: str | None = None
    hfTokenEnv: list[str] = Field(default_factory=list)
    timeouts: TimeoutSpec = Field(default_factory=TimeoutSpec)
    meta: Any = None


VolumeGb = Annotated[int, Field(ge=10, le=4096)]
"""The sizes POST /v2/network-volumes accepts."""


class VolumeRequest(_Strict):
    """stdin of `volume create|update`; size in GB."""

    name: str = Field(min_length=1)
    size: VolumeGb
    dataCenter: str = Field(min_length=1)


class GrowRequest(_Strict):
    """stdin of `volume grow`: the volume's size follows the plan upwards, never down."""

    volumeId: str = Field(min_length=1)
    size: VolumeGb


class PreviousPod(BaseModel):
    model_config = ConfigDict(extra="ignore")
    podId: str
    candidateIndex: int | None = None
    candidatesTried: list[dict[str, Any]] = Field(default_factory=list)


class PreviousVolume(BaseModel):
    model_config = ConfigDict(extra="ignore")
    volumeId: str


# HF_TOKEN is read when FRUTEBOX_HF_TOKEN is unset, so its value is masked as well.
SECRET_VARIABLES = ("RUNPOD_API_KEY", "FRUTEBOX_HF_TOKEN", "HF_TOKEN")


def redactor(env: Mapping[str, str]) -> Callable[[str], str]:
    """Masks the secret variables' values in any text we print, whatever printed them."""
    # Short values would mangle unrelated text; real keys and tokens are long.
    secrets = [v for name in SECRET_VARIABLES if len(v := env.get(name, "").strip()) >= 6]

    def redact(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "***")
        return text

    return redact


MAX_LOG_LINE = 16 * 1024
"""Longest line the step writes to stderr. Upstream's command provider reads the log with a
64 KiB line limit and hangs the command on a longer line, so none is ever written."""


def cap_lines(text: str) -> str:
    """Each line of `text` cut to MAX_LOG_LINE characters, saying how much was cut."""
    lines = []
    for line in text.split("\n"):
        if len(line) > MAX_LOG_LINE:
            line = f"{line[:MAX_LOG_LINE]}… ({len(line) - MAX_LOG_LINE} more characters cut)"
        lines.append(line)
    return "\n".join(lines)


def _env_float(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ConfigurationError(
            f"{name}={raw!r} is not a number of seconds >= 0; fix or unset it."
        )
    return value


@dataclass(frozen=True)
class Settings:
    """Everything the command reads from its environment."""

    api_key: str
    api_url: str
    proxy_template: str
    hf_token: str
    running_timeout_s: float | None
    healthy_timeout_s: float | None
    poll_interval_s: float
    pull_timeout_s: float
    retry: RetryPolicy

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        backoff = _env_float(env, "FRUTEBOX_RETRY_BACKOFF_S", 2.0) or 0.0
        attempts = int(_env_float(env, "FRUTEBOX_RETRY_ATTEMPTS", RetryPolicy.max_attempts) or 0)
        return cls(
            api_key=env.get("RUNPOD_API_KEY", "").strip(),
            api_url=env.get("RUNPOD_API_URL", "").strip() or DEFAULT_API_URL,
            proxy_template=env.get("RUNPOD_PROXY_URL_TEMPLATE", "").strip()
            or DEFAULT_PROXY_URL_TEMPLATE,
            # The program passes the stack's token as FRUTEBOX_HF_TOKEN; HF_TOKEN (the name
            # Hugging Face tools use) serves when the command runs without it.
            hf_token=env.get("FRUTEBOX_HF_TOKEN", "").strip() or env.get("HF_TOKEN", "").strip(),
            running_timeout_s=_env_float(env, "FRUTEBOX_RUNNING_TIMEOUT_S", None),
            healthy_timeout_s=_env_float(env, "FRUTEBOX_HEALTH_TIMEOUT_S", None),
            poll_interval_s=_env_float(env, "FRUTEBOX_POLL_INTERVAL_S", Timeouts.poll_interval_s)
            or 0.0,
            pull_timeout_s=_env_float(env, "FRUTEBOX_PULL_TIMEOUT_S", Timeouts.pull_s)
            or Timeouts.pull_s,
            retry=RetryPolicy(max_attempts=max(1, attempts), backoff_s=backoff),
        )


class Session:
    """One command run: settings, streams, and the clients built on first use."""

    def __init__(
        self,
        settings: Settings,
        err: TextIO,
        transport: httpx.BaseTransport | None,
        redact: Callable[[str], str],
    ) -> None:
        self.settings = settings
        self.redact = redact
        self._err = err
        self._transport = transport

    def log(self, message: str) -> None:
        print(cap_lines(self.redact(message)), file=self._err, flush=True)

    def delete_recorded(
        self, kind: str, resource_id: str | None, delete: Callable[[str], bool], done: str
    ) -> dict[str, Any]:
        """Delete what the previous output recorded; gone already (or never) is fine."""
        if resource_id is None:
            self.log(f"no {kind} recorded; nothing to delete")
        elif delete(resource_id):
            self.log(f"{kind} {resource_id} {done}")
        else:
            self.log(f"{kind} {resource_id} was already gone")
        return {}

    @cached_property
    def prov(self) -> Provisioner:
        api = RunPodClient(
            api_key=self.settings.api_key,
            base_url=self.settings.api_url,
            retry=self.settings.retry,
            transport=self._transport,
        )
        proxy = ProxyClient(template=self.settings.proxy_template, transport=self._transport)
        return Provisioner(api, proxy, log=self.log)

    def timeouts(self, request: PodRequest) -> Timeouts:
        """The environment wins over the request; what neither sets keeps Timeouts' default."""
        s = self.settings
        bounds = {
            "running_s": s.running_timeout_s or request.timeouts.runningSeconds,
            "healthy_s": s.healthy_timeout_s or request.timeouts.healthySeconds,
        }
        return Timeouts(
            **{k: v for k, v in bounds.items() if v is not None},
            poll_interval_s=s.poll_interval_s,
            pull_s=s.pull_timeout_s,
        )

    def close(self) -> None:
        if "prov" in self.__dict__:
            self.prov.api.close()
            self.prov.proxy.close()


def _validate(model: type[_M], data: Any, where: str) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # Listed without input values: a request could carry something sensitive.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigurationError(f"{where} is not a valid {model.__name__}: {problems}.") from exc


def read_request(model: type[_M], stdin: TextIO) -> _M:
    try:
        data = json.loads(stdin.read())
    except ValueError as exc:
        raise ConfigurationError(
            f"stdin is not JSON ({exc}); pipe the {model.__name__} JSON in."
        ) from exc
    return _validate(model, data, "the request on stdin")


def read_previous(model: type[_M], env: Mapping[str, str]) -> _M | None:
    """The previous result (PULUMI_COMMAND_STDOUT); None when nothing was recorded."""
    raw = env.get("PULUMI_COMMAND_STDOUT", "").strip()
    if not raw:
        return None
    for text in (raw, raw.splitlines()[-1]):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        return None if data == {} else _validate(model, data, "PULUMI_COMMAND_STDOUT")
    raise ConfigurationError(
        "PULUMI_COMMAND_STDOUT is not the JSON result this command prints, so the resource it"
        " describes cannot be found; check the stack state (pulumi stack export)."
    )
