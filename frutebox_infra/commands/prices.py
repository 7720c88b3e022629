"""`frutebox prices [--write]`: registry/gpus.yaml's Secure prices vs RunPod's live catalog.

With `--write` the differing prices and their source dates are rewritten in place (comments
and layout kept), so a pull request carries the change and `frutebox diff` its cost.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from frutebox_infra.catalog.files import load_registry
from frutebox_infra.plumbing.errors import EXIT_OK, FruteboxError, UsageError
from frutebox_infra.plumbing.paths import REGISTRY_DIR, REPO_ROOT
from frutebox_infra.report import Format
from frutebox_infra.report.render import render
from frutebox_infra.stack.endpoints import API_KEY_ENV, resolve_endpoint
from frutebox_infra.stack.stack_file import load_settings, stack_file
from frutebox_infra.views.price_compare import compare_prices

_ENTRY = re.compile(r"^\s*-\s+id:\s*(?P<id>.+?)\s*$")
_SECURE = re.compile(r"(\bsecure:\s*)([0-9.]+|null)")
_SOURCE = re.compile(r"(\bsource:\s*)\"[^\"]*\"")


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


def run_prices(
    *,
    write: bool,
    fmt: Format = Format.TABLE,
    registry_dir: Path = REGISTRY_DIR,
    stack: str | None = None,
    project_dir: Path = REPO_ROOT,
) -> int:
    from frutebox_infra.commands.live_look import fetch_catalog
    from frutebox_infra.runpod.errors import RunPodError

    if stack is None:
        endpoint = resolve_endpoint(os.environ)
        if not endpoint.has_key:
            raise UsageError(
                f"prices reads RunPod's catalog: export {API_KEY_ENV} (read-only is enough),"
                " or name a stack whose secret holds one (--stack)."
            )
    else:
        from frutebox_infra.commands.status import stack_endpoint

        settings = load_settings(stack_file(stack, project_dir / "stacks"))
        endpoint = stack_endpoint(stack, project_dir, os.environ, settings.runpod_api_url)
    registry = load_registry(registry_dir)
    try:
        live = fetch_catalog(endpoint, 30.0, command="`frutebox prices`")
    except RunPodError as exc:
        raise FruteboxError(f"RunPod's catalog could not be read: {exc}") from exc
    comparison = compare_prices(registry, live)
    print(render(comparison, fmt))
    changed = comparison.changed
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
