"""The registry's Secure prices next to the live catalog's: drift, what differs, what --write
would take; each bound on both sides."""

from __future__ import annotations

import pytest

from frutebox_infra.views.live_warnings import LiveCatalog, LiveGpu
from frutebox_infra.views.price_compare import PriceComparison, PriceRow, compare_prices
from tests.factories import real_registry


@pytest.mark.parametrize(
    ("registry_usd", "live_usd", "drift", "differs"),
    [
        pytest.param(0.20, 0.20, 0.0, False, id="same"),
        pytest.param(0.20, 0.25, pytest.approx(0.25), True, id="dearer"),
        pytest.param(0.20, 0.15, pytest.approx(-0.25), True, id="cheaper"),
        pytest.param(0.20, None, None, False, id="not-offered-live"),
        pytest.param(0.20, 0.0, None, False, id="live-zero"),
        pytest.param(None, 0.30, None, True, id="no-registry-price"),
    ],
)
def test_drift_and_differs(
    registry_usd: float | None, live_usd: float | None, drift: object, differs: bool
) -> None:
    row = PriceRow("g", "G", registry_usd, live_usd)
    assert row.drift == drift
    assert row.differs is differs


def test_every_registry_gpu_is_compared_in_registry_order() -> None:
    registry = real_registry()
    first, second = registry.gpus[0], registry.gpus[1]
    live = LiveCatalog(
        gpus={
            first.id: LiveGpu(id=first.id, secure_usd_per_hour=9.99),
            second.id: LiveGpu(
                id=second.id, secure_usd_per_hour=second.price_usd_per_hour.secure or 0.0
            ),
        }
    )
    comparison = compare_prices(registry, live)
    assert [r.gpu_id for r in comparison.rows] == [g.id for g in registry.gpus]
    assert comparison.rows[0] == PriceRow(
        first.id, first.name, first.price_usd_per_hour.secure, 9.99
    )
    assert comparison.rows[2].live_usd is None
    assert comparison.changed == {first.id: 9.99}


def test_nothing_changed_when_every_live_price_is_the_registrys() -> None:
    rows = (PriceRow("a", "A", 0.2, 0.2), PriceRow("b", "B", 0.3, None))
    assert PriceComparison(rows).changed == {}
