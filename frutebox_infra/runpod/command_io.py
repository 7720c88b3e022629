"""Command I/O: the request on stdin, the previous result, the environment, the clients, and
what the command prints (the result on stdout, one paragraph on stderr when it fails)."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cached_property
from typing import Any, TextIO, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, ValidationError

from frutebox_infra.deploy.contract import (
    GrowRequest,
    PodRequest,
    SeedRequest,
    VolumeRequest,
)
from frutebox_infra.plumbing.validation import validate
from frutebox_infra.runpod.access import DEPLOY, KeyUse, Need
from frutebox_infra.runpod.client import RunPodClient
from frutebox_infra.runpod.errors import ConfigurationError, RunPodError
from frutebox_infra.runpod.lifecycle import Provisioner, Timeouts
from frutebox_infra.runpod.proxy import ProxyClient
from frutebox_infra.runpod.retrying import RetryPolicy
from frutebox_infra.stack.endpoints import SECRET_ENV, Endpoint, step_endpoint
from frutebox_infra.stack.serving_key import STEP_SERVING_KEY_ENV

__all__ = [
    "GrowRequest",
    "PodRequest",
    "PreviousPod",
    "PreviousSeed",
    "PreviousVolume",
    "SeedRequest",
    "Session",
    "Settings",
    "VolumeRequest",
    "failure_text",
    "read_previous",
    "read_request",
    "redactor",
    "scaled_waits",
    "write_failure",
    "write_result",
]

_M = TypeVar("_M")


class _Result(BaseModel):
    """A result printed earlier and read back (PULUMI_COMMAND_STDOUT): newer keys are fine."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


class PreviousPod(_Result):
    podId: str
    ollamaModels: list[str] = Field(default_factory=list)
    """The Ollama tags the pod served last time: a member no longer listed is deleted."""
    candidateIndex: int | None = None
    candidatesTried: list[dict[str, Any]] = Field(default_factory=list)
    applied: dict[str, Any] | None = None
    """What the pod was last set to (image, args, env without secrets, ports, disk) and the
    env names the step fills with secrets (`secretEnv`): an update whose new container does
    not serve is rolled back to it."""


class PreviousSeed(_Result):
    """What a seed printed: the volume it filled and how each model ended; kept whole, since
    an update that finds nothing to do prints it again."""

    model_config = ConfigDict(extra="allow")

    volumeId: str
    state: str
    models: list[dict[str, Any]] = Field(default_factory=list)


class PreviousVolume(_Result):
    volumeId: str
    owner: str | None = None
    name: str | None = None
    """The volume's name (`<base>-<owner token>`): a destroy removes any other volume of ours."""


# HF_TOKEN is read when FRUTEBOX_HF_TOKEN is unset, so its value is masked as well.
SECRET_VARIABLES = (*SECRET_ENV, "FRUTEBOX_HF_TOKEN", "HF_TOKEN", STEP_SERVING_KEY_ENV)


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


class Settings(BaseModel):
    """Everything the command reads from its environment, validated: a bad value stops the
    command naming the variable, never silently becomes a default."""

    # The environment is handed in (`from_env`), so tests never read the real one: a plain
    # model, with its defaults validated too.
    model_config = ConfigDict(
        frozen=True, extra="ignore", populate_by_name=True, validate_default=True
    )

    # The program passes the stack's token as FRUTEBOX_HF_TOKEN; HF_TOKEN (the name Hugging
    # Face tools use) serves when the command runs without it.
    frutebox_hf_token: str = Field(default="", alias="FRUTEBOX_HF_TOKEN", repr=False)
    plain_hf_token: str = Field(default="", alias="HF_TOKEN", repr=False)
    # The stack's serving key, for the pods whose gateway asks for it (servingKeyEnv).
    serving_key: str = Field(default="", alias="FRUTEBOX_STACK_SERVING_KEY", repr=False)
    running_timeout_s: PositiveFloat | None = Field(
        default=None, alias="FRUTEBOX_RUNNING_TIMEOUT_S"
    )
    healthy_timeout_s: PositiveFloat | None = Field(default=None, alias="FRUTEBOX_HEALTH_TIMEOUT_S")
    seed_timeout_s: PositiveFloat | None = Field(default=None, alias="FRUTEBOX_SEED_TIMEOUT_S")
    poll_interval_s: NonNegativeFloat = Field(
        default=Timeouts.poll_interval_s, alias="FRUTEBOX_POLL_INTERVAL_S"
    )
    api_check_s: NonNegativeFloat = Field(
        default=Timeouts.api_check_s, alias="FRUTEBOX_API_CHECK_S"
    )
    restart_check_s: NonNegativeFloat = Field(
        default=Timeouts.restart_check_s, alias="FRUTEBOX_RESTART_CHECK_S"
    )
    restart_limit: int = Field(default=Timeouts.restart_limit, ge=1, le=100,
                               alias="FRUTEBOX_RESTART_LIMIT")  # fmt: skip
    crash_window_s: PositiveFloat = Field(
        default=Timeouts.crash_window_s, alias="FRUTEBOX_CRASH_WINDOW_S"
    )
    steady_s: PositiveFloat = Field(default=Timeouts.steady_s, alias="FRUTEBOX_STEADY_S")
    duplicate_check_s: NonNegativeFloat = Field(
        default=Timeouts.duplicate_check_s, alias="FRUTEBOX_DUPLICATE_CHECK_S"
    )
    pull_timeout_s: PositiveFloat = Field(default=Timeouts.pull_s, alias="FRUTEBOX_PULL_TIMEOUT_S")
    retry_backoff_s: NonNegativeFloat = Field(
        default=RetryPolicy.backoff_s, alias="FRUTEBOX_RETRY_BACKOFF_S"
    )
    retry_attempts: int = Field(default=RetryPolicy.max_attempts, ge=1, le=100,
                                alias="FRUTEBOX_RETRY_ATTEMPTS")  # fmt: skip

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read the variables above from `env`; an empty value counts as unset."""
        names = {f.alias for f in cls.model_fields.values() if f.alias}
        given = {k: v.strip() for k, v in env.items() if k in names and v.strip()}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}={given.get(str(e['loc'][0]), '')!r}:"
                f" {e['msg']}"
                for e in exc.errors()
            )
            raise ConfigurationError(
                f"The environment of the deploy step is invalid ({problems}); fix or unset"
                " the variable."
            ) from None

    @property
    def hf_token(self) -> str:
        return self.frutebox_hf_token or self.plain_hf_token

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.retry_attempts, backoff_s=self.retry_backoff_s)


class Session:
    """One command run: settings, streams, and the clients built on first use."""

    def __init__(
        self,
        settings: Settings,
        err: TextIO,
        transport: httpx.BaseTransport | None,
        redact: Callable[[str], str],
        endpoint: Endpoint | None = None,
    ) -> None:
        self.settings = settings
        self.endpoint = endpoint or step_endpoint({})
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
    def _clients(self) -> tuple[RunPodClient, ProxyClient]:
        """Both clients, built together on first use whatever the resource: an unusable key,
        URL or proxy template stops the first command, before anything is created."""
        api = RunPodClient(
            api_key=self.endpoint.api_key or "",
            base_url=self.endpoint.api_url,
            retry=self.settings.retry,
            transport=self._transport,
            key_use=KeyUse(self.endpoint.key_source, DEPLOY, Need.WRITE),
        )
        proxy = ProxyClient(template=self.endpoint.proxy_template, transport=self._transport)
        return api, proxy

    @property
    def api(self) -> RunPodClient:
        return self._clients[0]

    @property
    def proxy(self) -> ProxyClient:
        return self._clients[1]

    def keyed_for(self, request: PodRequest) -> None:
        """Send the stack's serving key to the pod's ports when its gateway asks for it; a pod
        without a gateway never gets it."""
        if request.servingKeyEnv:
            self.proxy.send_key(self.settings.serving_key)

    @cached_property
    def prov(self) -> Provisioner:
        return Provisioner(self.api, self.proxy, log=self.log)

    def timeouts(self, request: PodRequest | None = None) -> Timeouts:
        """The environment wins over the request; what neither sets keeps Timeouts' default."""
        s = self.settings
        asked = request.timeouts if request is not None else None
        running = s.running_timeout_s or (asked.runningSeconds if asked else None)
        healthy = s.healthy_timeout_s or (asked.healthySeconds if asked else None)
        timeouts = Timeouts(
            poll_interval_s=s.poll_interval_s,
            api_check_s=s.api_check_s,
            restart_check_s=s.restart_check_s,
            restart_limit=s.restart_limit,
            crash_window_s=s.crash_window_s,
            steady_s=s.steady_s,
            duplicate_check_s=s.duplicate_check_s,
            pull_s=s.pull_timeout_s,
        )
        return replace(
            timeouts,
            running_s=timeouts.running_s if running is None else running,
            healthy_s=timeouts.healthy_s if healthy is None else healthy,
        )

    def close(self) -> None:
        if "_clients" in self.__dict__:
            self.api.close()
            self.proxy.close()


def _validate(model: type[_M], data: Any, where: str) -> _M:
    try:
        # Results are this step's own pydantic models; requests the contract's dataclasses.
        if isinstance(model, type) and issubclass(model, BaseModel):
            return model.model_validate(data)
        return validate(model, data)
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


def write_result(out: TextIO, result: Mapping[str, Any], redact: Callable[[str], str]) -> None:
    """The result JSON on one line of stdout, which Pulumi records as the resource's output."""
    out.write(redact(json.dumps(result)) + "\n")
    out.flush()


def failure_text(exc: Exception, *, debug: bool) -> str:
    """One paragraph for a failure (the traceback before it when debugging): a RunPodError
    says what to do; anything else is a bug and says so."""
    if isinstance(exc, RunPodError):
        message = str(exc)
    else:
        message = (
            f"internal error ({type(exc).__name__}: {exc}); rerun with FRUTEBOX_DEBUG=1"
            " for a traceback and report it."
        )
    trace = "".join(traceback.format_exception(exc)) if debug else ""
    return trace + "error: " + " ".join(message.split())


def write_failure(err: TextIO, text: str, redact: Callable[[str], str]) -> None:
    err.write(cap_lines(redact(text)) + "\n")
    err.flush()


def scaled_waits(time_scale: float) -> dict[str, str]:
    """The deploy step's environment for a clock `time_scale` times faster than RunPod's (the
    emulator's realistic account, scaled): its default pauses between API reads and retries
    shrunk alike, so the step keeps the same pace relative to the account's quotas and lags."""
    timeouts, retry = Timeouts(), RetryPolicy()
    pauses = {
        "poll_interval_s": timeouts.poll_interval_s,
        "api_check_s": timeouts.api_check_s,
        "restart_check_s": timeouts.restart_check_s,
        "duplicate_check_s": timeouts.duplicate_check_s,
        "steady_s": timeouts.steady_s,
        "retry_backoff_s": retry.backoff_s,
    }
    fields = Settings.model_fields
    return {str(fields[name].alias): str(s / time_scale) for name, s in pauses.items()}
