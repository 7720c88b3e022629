"""What the shell learns from the process environment, handed to the planner so it stays pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from frutebox_infra.plumbing.errors import ConfigError
from frutebox_infra.plumbing.times import parse_time
from frutebox_infra.recipes.base import ServeOptions
from frutebox_infra.recipes.speculative import eagle3_env_name


@dataclass(frozen=True, kw_only=True)
class Environment:
    """The Hugging Face token's presence, the speculative-decoding switch and EAGLE3 heads."""

    hf_token: bool = False
    spec_decode: bool = True
    eagle3_heads: Mapping[str, str] = field(default_factory=dict)
    now: datetime | None = None
    """The time the run plans at (armed windows): FRUTEBOX_NOW, else the clock read once."""

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], clock: Callable[[], datetime] | None = None
    ) -> Environment:
        """`clock` is read once, when FRUTEBOX_NOW does not give the time."""
        return cls(
            now=_given_now(env.get("FRUTEBOX_NOW")) or (clock() if clock else None),
            hf_token=bool(env.get("HF_TOKEN") or env.get("FRUTEBOX_HF_TOKEN")),
            spec_decode=env.get("FRUTEBOX_SPEC_DECODE", "true").strip().lower() != "false",
            eagle3_heads={
                k: v.strip()
                for k, v in env.items()
                if k.startswith("FRUTEBOX_EAGLE3_HEAD_") and v.strip()
            },
        )

    def serve_options(
        self,
        model_id: str,
        *,
        context_tokens: int | None = None,
        concurrency: int | None = None,
        min_sequences: int = 1,
        min_sequences_pinned: bool = False,
        hf_token: bool = False,
        spec_decode: bool = True,
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
        metrics: bool = False,
    ) -> ServeOptions:
        """A model's serving targets; secrets and switches from the stack or the environment."""
        return ServeOptions(
            context_tokens=context_tokens,
            concurrency=concurrency,
            min_sequences=min_sequences,
            min_sequences_pinned=min_sequences_pinned,
            hf_token_configured=hf_token or self.hf_token,
            spec_decode_enabled=spec_decode and self.spec_decode,
            eagle3_head=self.eagle3_heads.get(eagle3_env_name(model_id))
            if self.eagle3_heads
            else None,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            metrics=metrics,
        )


def _given_now(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return parse_time(text)
    except ValueError:
        raise ConfigError(
            f"FRUTEBOX_NOW={text!r} is not a time. Fix: an RFC 3339 time such as"
            " 2026-12-07T08:00:00+01:00, or unset it to plan at the clock's time"
        ) from None


def system_clock() -> datetime:
    return datetime.now(UTC)


NO_ENVIRONMENT = Environment()
"""Nothing learned from the process: no token, speculative decoding on, no EAGLE3 heads."""
