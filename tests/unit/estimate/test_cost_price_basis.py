"""``gpumatch estimate`` prices a GPU with the planner's rule (one function: catalog.prices.select_price)."""

from __future__ import annotations

import json
import math

import pytest

from gpumatch.catalog import get_gpu
from gpumatch.catalog.prices import select_price
from gpumatch.cli.app import main
from gpumatch.estimate import Request, estimate
from gpumatch.estimate.power import DEFAULT_SITE
from gpumatch.models import get_model
from gpumatch.plan import plan
from gpumatch.plan.request import with_options

OPTS = {"task": "infer", "concurrency": 4, "prompt": 512, "gen": 128}


@pytest.mark.parametrize("basis", ["on-demand", "spot"])
def test_hourly_basis_is_the_median_of_providers(basis: str) -> None:
    gpu = get_gpu("H100 SXM")
    est = estimate("llama-3.1-8b", gpu, Request(price_basis=basis, **OPTS))
    choice = select_price(gpu, basis)
    assert est.price is not None and choice.value is not None
    assert est.price.kind == basis and est.price.usd_per_gpu_hour == choice.value
    assert est.metrics["usd_per_hour"] == pytest.approx(choice.value)
    assert est.price.choice["providers"] == choice.providers > 1


def test_purchase_basis_amortizes_the_purchase_median() -> None:
    gpu = get_gpu("H100 SXM")
    est = estimate("llama-3.1-8b", gpu, Request(price_basis="purchase", **OPTS))
    buy = select_price(gpu, "purchase").value
    assert est.price is not None and buy is not None
    capex = buy / (DEFAULT_SITE.lifetime_years * 8766.0 * DEFAULT_SITE.duty_fraction)
    assert est.price.kind == "purchase" and est.price.usd_per_gpu_hour > capex  # + energy + facility


def test_no_quote_of_the_basis_gives_no_cost_and_says_so() -> None:
    est = estimate("llama-3.1-8b", "L4", Request(price_basis="reserved", **OPTS))
    assert est.price is None and math.isnan(est.metrics["usd_per_hour"])
    assert any("no reserved quote for L4" in w for w in est.warnings)


def test_estimate_and_plan_use_the_same_figure() -> None:
    req = with_options(None, get_model("llama-3.2-3b"), task="serve", concurrency=8, prompt=512, gen=128, max_gpus=1,
                       gpus_allow=("L40S",))
    entry = plan(req).shortlist["throughput-serving"][0]
    est = estimate("llama-3.2-3b", "L40S", Request(price_basis="on-demand", **OPTS))
    assert est.price is not None and entry["price"]["value"] == est.price.usd_per_gpu_hour


def test_cli_flag_and_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "--model", "llama-3.1-8b", "--gpu", "L40S"]
    assert main([*base, "--price-basis", "spot", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["price"]["kind"] == "spot"
    assert main([*base, "--price-basis", "cheap"]) == 2
    err = capsys.readouterr().err
    assert "price basis 'cheap'" in err and "on-demand" in err
