"""`frutebox prices [--write]`: registry/gpus.yaml's Secure prices vs RunPod's live catalog.

With `--write` the differing prices and their source dates are rewritten in place (comments
and layout kept), so a pull request carries the change and `frutebox diff` its cost.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from frutebox_infra.endpoints import API_KEY_ENV, resolve_endpoint
from frutebox_infra.errors import EXIT_OK, FruteboxError, UsageError
from frutebox_infra.live_warnings import PRICE_TOLERANCE, LiveCatalog, price_drift
from frutebox_infra.paths import REGISTRY_DIR, REPO_ROOT
from frutebox_infra.registry import Registry
from frutebox_infra.registry_files import load_registry
from frutebox_infra.report.text import table
from frutebox_infra.stack_file import load_settings, stack_file

_ENTRY = re.compile(r"^\s*-\s+id:\s*(?P<id>.+?)\s*$")
_SECURE = re.compile(r"(\bsecure:\s*)([0-9.]+|null)")
_SOURCE = re.compile(r"(\bsource:\s*)\"[^\"]*\"")


@dataclass(frozen=True)
class PriceRow:
    gpu_id: str
    name: str
    registry_usd: float | None
    live_usd: float | None

    @property
    def drift(self) -> float | None:
        if self.registry_usd is None or not self.live_usd:
            return None
        return price_drift(self.registry_usd, self.live_usd)

    @property
    def differs(self) -> bool:
        return (
            self.live_usd is not None and self.live_usd > 0 and self.live_usd != self.registry_usd
        )


def compare(registry: Registry, live: LiveCatalog) -> list[PriceRow]:
    rows = []
    for gpu in registry.gpus:
        offer = live.gpus.get(gpu.id)
        rows.append(
            PriceRow(
                gpu.id,
                gpu.name,
                gpu.price_usd_per_hour.secure,
                offer.secure_usd_per_hour if offer else None,
            )
        )
    return rows


def rewrite_prices(text: str, prices: Mapping[str, float], source: str) -> str:
    """gpus.yaml with each named GPU's Secure price and price source replaced; the rest kept."""
    out, current = [], None
    for line in text.splitlines(keepends=True):
        if match := _ENTRY.match(line):
            current = match["id"].strip("\"'")
        elif current in prices and not line.lstrip().startswith("#"):
            line = _SECURE.sub(rf"\g<1>{prices[str(current)]:g}", line)
            line = _SOURCE.sub(lambda m: f'{m[1]}"{source}"', line)
        out.append(line)
    return "".join(out)


def prices_table(rows: list[PriceRow]) -> str:
    def money(value: float | None) -> str:
        return "-" if value is None else f"${value:.2f}"

    cells = [
        [
            r.name,
            money(r.registry_usd),
            money(r.live_usd),
            "-" if r.drift is None else f"{r.drift:+.1%}",
            "over 5%" if r.drift is not None and abs(r.drift) > PRICE_TOLERANCE else "",
        ]
        for r in rows
    ]
    return table(("GPU", "REGISTRY $/H", "LIVE SECURE $/H", "DIFF", ""), cells)


def run_prices(
    *,
    write: bool,
    registry_dir: Path = REGISTRY_DIR,
    stack: str | None = None,
    project_dir: Path = REPO_ROOT,
) -> int:
    from frutebox_infra.live import fetch_catalog
    from frutebox_infra.runpod.errors import RunPodError

    if stack is None:
        endpoint = resolve_endpoint(os.environ)
        if not endpoint.has_key:
            raise UsageError(
                f"prices reads RunPod's catalog: export {API_KEY_ENV} (read-only is enough),"
                " or name a stack whose secret holds one (--stack)."
            )
    else:
        from frutebox_infra.status_read import stack_endpoint

        settings = load_settings(stack_file(stack, project_dir / "stacks"))
        endpoint = stack_endpoint(stack, project_dir, os.environ, settings.runpod_api_url)
    registry = load_registry(registry_dir)
    try:
        live = fetch_catalog(endpoint, 30.0)
    except RunPodError as exc:
        raise FruteboxError(f"RunPod's catalog could not be read: {exc}") from exc
    rows = compare(registry, live)
    print(prices_table(rows))
    changed = {r.gpu_id: float(r.live_usd) for r in rows if r.differs and r.live_usd}
    if not write:
        if changed:
            print(
                f"\n{len(changed)} price(s) differ; `frutebox prices --write` updates them.",
                file=sys.stderr,
            )
        return EXIT_OK
    path = registry_dir / "gpus.yaml"
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    before = path.read_text("utf-8")
    path.write_text(rewrite_prices(before, changed, f"RunPod catalog, Secure, {date}"))
    try:
        load_registry(registry_dir)  # the rewritten file must still be a valid registry
    except FruteboxError:
        path.write_text(before)
        raise
    print(f"\nwrote {len(changed)} price(s) to {path}", file=sys.stderr)
    return EXIT_OK
