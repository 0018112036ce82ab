"""The one price rule (gpumatch.catalog.prices.select_price): median of the newest quote per provider of one basis,
within RECENCY_DAYS of the card's newest quote; the spread and the quotes behind it."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from gpumatch.catalog import GpuSpec, Price, load_catalog
from gpumatch.catalog.prices import BASES, RECENCY_DAYS, check_basis, quote_period, select_price
from gpumatch.errors import InputError


def quote(kind: str, amount: float, day: str, provider: str) -> Price:
    hourly = kind in ("on-demand", "reserved", "spot", "serverless")
    return Price(kind=kind, usd=None if hourly else amount, usd_per_gpu_hour=amount if hourly else None,
                 date=dt.date.fromisoformat(day), source_url=f"https://example.com/{provider}", says="x",
                 provider=provider, term_months=12 if kind == "reserved" else None)


def card(*quotes: Price) -> GpuSpec:
    return replace(load_catalog().get("L4"), prices=tuple(quotes))


def test_median_of_the_newest_quote_per_provider() -> None:
    g = card(quote("on-demand", 9.0, "2026-01-01", "A"), quote("on-demand", 1.0, "2026-06-01", "A"),
             quote("on-demand", 2.0, "2026-05-01", "B"), quote("on-demand", 4.0, "2026-04-01", "C"),
             quote("spot", 0.1, "2026-06-01", "D"), quote("list", 5000, "2026-06-01", "E"))
    c = select_price(g, "on-demand")
    assert c.value == 2.0  # median of A's newest 1.0, B 2.0, C 4.0; A's old 9.0, spot and list ignored
    assert (c.providers, c.low, c.high) == (3, 1.0, 4.0)
    assert (c.first_date, c.last_date) == (dt.date(2026, 4, 1), dt.date(2026, 6, 1))
    assert "median of 3 providers" in c.text() and "$1.00-4.00/GPU-h" in c.text()


def test_even_number_of_providers_and_same_day_quotes() -> None:
    g = card(quote("on-demand", 1.0, "2026-06-01", "A"), quote("on-demand", 3.0, "2026-06-01", "A"),
             quote("on-demand", 6.0, "2026-06-01", "B"))
    c = select_price(g, "on-demand")
    assert c.providers == 2
    assert c.value == pytest.approx((2.0 + 6.0) / 2)  # A's two quotes of one day count as their median, 2.0


def test_a_provider_older_than_the_window_is_dropped() -> None:
    newest = dt.date(2026, 6, 1)
    old = (newest - dt.timedelta(days=RECENCY_DAYS + 1)).isoformat()
    edge = (newest - dt.timedelta(days=RECENCY_DAYS)).isoformat()
    g = card(quote("street", 30000, newest.isoformat(), "reseller"), quote("list", 1000, old, "vendor"),
             quote("street", 20000, edge, "shop"))
    c = select_price(g, "purchase")
    assert c.providers == 2 and c.value == 25000.0


def test_purchase_reads_list_and_street_and_serverless_belongs_to_no_basis() -> None:
    g = card(quote("list", 1000, "2026-01-01", "vendor"), quote("street", 3000, "2026-01-01", "shop"),
             quote("serverless", 0.5, "2026-01-01", "S"))
    assert select_price(g, "purchase").value == 2000.0
    assert {q.kind for q in select_price(g, "purchase").quotes} == {"list", "street"}
    for basis in ("on-demand", "reserved", "spot"):
        c = select_price(g, basis)
        assert c.value is None and not c.priced and f"no {basis} quote" in c.text()


def test_reserved_and_spot_read_only_their_kind() -> None:
    g = card(quote("reserved", 1.5, "2026-01-01", "R"), quote("spot", 0.7, "2026-01-01", "S"),
             quote("on-demand", 3.0, "2026-01-01", "O"))
    assert [select_price(g, b).value for b in ("on-demand", "reserved", "spot")] == [3.0, 1.5, 0.7]


def test_override_replaces_the_quotes() -> None:
    g = card(quote("on-demand", 3.0, "2026-01-01", "O"))
    c = select_price(g, "on-demand", 0.9)
    assert c.value == 0.9 and c.override and c.providers == 0 and "workload's own price" in c.text()


def test_unknown_basis_is_an_input_error_naming_the_choices() -> None:
    with pytest.raises(InputError) as info:
        check_basis("cheapest")
    assert all(b in info.value.hint for b in BASES)
    with pytest.raises(InputError):
        select_price(card(), "cheapest")


def test_quote_period_spans_the_quotes_used() -> None:
    a = select_price(card(quote("on-demand", 1.0, "2025-06-01", "A")), "on-demand")
    b = select_price(card(quote("on-demand", 1.0, "2026-12-01", "B")), "on-demand")
    assert quote_period([a, b, select_price(card(), "on-demand")]) == (dt.date(2025, 6, 1), dt.date(2026, 12, 1))
    assert quote_period([select_price(card(), "on-demand")]) is None
