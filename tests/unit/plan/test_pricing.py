"""The plan's price basis: one kind for every candidate, the budget against purchase prices, overrides, JSON."""

from __future__ import annotations

import json

import pytest

from gpumatch.catalog import load_catalog
from gpumatch.catalog.prices import select_price
from gpumatch.cli.app import main
from gpumatch.models import get_model
from gpumatch.plan import plan
from gpumatch.plan.request import PlanRequest, with_options


def _req(**kw: object) -> PlanRequest:
    base: dict[str, object] = {"task": "serve", "concurrency": 8, "prompt": 512, "gen": 128, "max_gpus": 2}
    return with_options(None, get_model("llama-3.2-3b"), **{**base, **kw})


def _entries(req: PlanRequest) -> list[dict[str, object]]:
    return [e for entries in plan(req).shortlist.values() for e in entries]


def test_on_demand_cost_is_count_times_the_median_even_with_a_budget() -> None:
    """A purchase budget does not switch the cost term to owned: it stays on the chosen (on-demand) basis."""
    catalog = load_catalog()
    for e in _entries(_req(budget_usd=100_000.0)):
        median = select_price(catalog.get(str(e["gpu"])), "on-demand").value
        est = e["estimate"]
        assert isinstance(est, dict)
        if median is None:
            assert e["priced"] is False and est["usd_per_hour"] is None
        else:
            assert est["usd_per_hour"] == pytest.approx(int(str(e["count"])) * median)
            assert e["price"]["basis"] == "on-demand"  # type: ignore[index]


def test_purchase_basis_prices_by_amortized_purchase() -> None:
    """Cards with a catalog purchase price only (B200, H100 SXM, A100 SXM), so the shortlist is priced whatever
    the ranking picks."""
    p = plan(_req(price_basis="purchase", gpus_allow=("B200 180GB", "H100 SXM5 80GB", "A100 SXM4 80GB")))
    assert p.price_basis["basis"] == "purchase" and p.price_basis["text"].startswith("purchase, median")
    priced = [e for entries in p.shortlist.values() for e in entries if e["priced"]]
    assert priced
    for e in priced:
        buy = select_price(load_catalog().get(e["gpu"]), "purchase").value
        assert buy is not None and e["price"]["value"] == buy and e["price"]["unit"] == "usd"
        assert "owned" in e["cost"]


def test_workload_price_overrides_replace_the_catalog_figure() -> None:
    p = plan(_req(usd_per_gpu_hour={"L4": 0.11}, gpus_allow=("L4",)))
    e = p.shortlist["throughput-serving"][0]
    assert e["price"]["override"] is True and e["price"]["value"] == 0.11
    assert e["estimate"]["usd_per_hour"] == pytest.approx(0.11 * e["count"])
    assert p.price_basis["rule"].startswith("your own prices")


def test_purchase_override_lets_the_budget_check_an_unpriced_card() -> None:
    name = "L40S"
    assert select_price(load_catalog().get(name), "purchase").value is None
    kept = plan(_req(budget_usd=5000.0, gpus_allow=(name,), max_gpus=1))
    assert kept.shortlist["throughput-serving"] and name in kept.price_basis["budget_unchecked"]
    over = plan(_req(budget_usd=5000.0, gpus_allow=(name,), max_gpus=1, purchase_usd_per_gpu={name: 9000.0}))
    assert not over.shortlist["throughput-serving"]
    assert any(r["rule"] == "budget" and "$9,000" in r["reason"] for r in over.rejected)


def test_cli_json_carries_the_basis_and_refuses_an_unknown_one(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.2-3b", "--task", "serve", "--batch", "4", "--max-gpus", "1"]
    assert main([*args, "--price-basis", "spot", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["price_basis"]["basis"] == "spot"
    assert all(e["price"]["basis"] == "spot" for entries in d["shortlist"].values() for e in entries)
    assert main([*args, "--price-basis", "free"]) == 2
    err = capsys.readouterr().err
    assert "--price-basis 'free'" in err and "purchase" in err
