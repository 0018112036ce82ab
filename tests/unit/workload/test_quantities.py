"""Unit strings in workload files -> SI numbers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpumatch.workload.quantities import seconds, token_count, usd, usd_per_hour, usd_per_kwh, watts


@pytest.mark.parametrize(
    ("fn", "text", "value"),
    [
        (seconds, "200ms", 0.2), (seconds, "2 s", 2.0), (seconds, "90min", 5400.0), (seconds, "72h", 259200.0),
        (seconds, "3d", 259200.0), (seconds, 1.5, 1.5), (seconds, "45", 45.0),
        (usd, "$250k", 250_000.0), (usd, "250,000 USD", 250_000.0), (usd, "$1.2M", 1.2e6), (usd, 99, 99.0),
        (usd_per_hour, "$2.5/h", 2.5), (usd_per_hour, 3, 3.0),
        (usd_per_kwh, "$0.12/kWh", 0.12), (usd_per_kwh, "120 USD/MWh", 0.12), (usd_per_kwh, 0.3, 0.3),
        (watts, "700W", 700.0), (watts, "1.2kW", 1200.0), (watts, 350, 350.0),
        (token_count, "2B", 2e9), (token_count, "500M", 5e8), (token_count, "15T", 1.5e13), (token_count, 1e6, 1e6),
    ],
)  # fmt: skip
def test_parses(fn: object, text: object, value: float) -> None:
    assert fn(text) == pytest.approx(value)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("fn", "bad"),
    [(seconds, "3 fortnights"), (seconds, True), (usd, "a lot"), (usd_per_kwh, "$0.12"), (watts, "hot"),
     (token_count, "2 bazillion"), (seconds, float("nan")), (usd, None)],
)  # fmt: skip
def test_rejects(fn: object, bad: object) -> None:
    with pytest.raises(ValueError):
        fn(bad)  # type: ignore[operator]


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_ms_and_seconds_agree(x: float) -> None:
    assert seconds(f"{x}ms") == pytest.approx(seconds(f"{x}s") / 1000)
