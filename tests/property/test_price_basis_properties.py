"""A shortlist must not change because of a price basis (issue 10 item 2).

- Adding a quote of another kind (spot, reserved, list, street, serverless) to any card leaves an on-demand plan
  exactly as it was: every role's GPUs, counts and scores.
- Adding a purchase quote, or a purchase budget the cards pass, leaves the on-demand cost term alone: the budget
  rule checks purchase prices, the cost term stays on-demand.
- Removing a card's on-demand quotes does not push it down: its cost term is the pool's median (roles.impute_cost),
  so it keeps its role, and its score is the role's formula over its own terms.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumatch.catalog import GpuSpec, Price, load_catalog
from gpumatch.models import get_model
from gpumatch.plan import plan
from gpumatch.plan.request import PlanRequest, with_options
from gpumatch.plan.roles import ROLE_BY_NAME, mitigation_risk

SPECS = load_catalog().gpus


def _req(**kw: Any) -> PlanRequest:
    base: dict[str, Any] = {"task": "serve", "concurrency": 8, "prompt": 512, "gen": 128, "max_gpus": 1}
    return with_options(None, get_model("llama-3.2-3b"), **{**base, **kw})


def _shortlist(req: PlanRequest, specs: tuple[GpuSpec, ...]) -> dict[str, list[tuple[str, int, float]]]:
    p = plan(req, gpus=specs)
    return {role: [(e["gpu"], e["count"], e["score"]) for e in entries] for role, entries in p.shortlist.items()}


def _with_quote(specs: tuple[GpuSpec, ...], i: int, kind: str, amount: float) -> tuple[GpuSpec, ...]:
    hourly = kind in ("spot", "reserved", "serverless")
    q = Price(kind=kind, usd=None if hourly else amount, usd_per_gpu_hour=amount if hourly else None,
              date=dt.date(2026, 12, 1), source_url="https://example.com/q", says="test quote",
              provider="TestCloud", term_months=12 if kind == "reserved" else None)
    return tuple(replace(g, prices=(*g.prices, q)) if k == i else g for k, g in enumerate(specs))


BASELINE = _shortlist(_req(), SPECS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(i=st.integers(0, len(SPECS) - 1), kind=st.sampled_from(("spot", "reserved", "serverless", "list", "street")),
       scale=st.floats(0.01, 1.0))
def test_a_quote_of_another_kind_does_not_change_an_on_demand_plan(i: int, kind: str, scale: float) -> None:
    amount = 500.0 + scale * 50000.0 if kind in ("list", "street") else 0.05 + scale * 20.0
    assert _shortlist(_req(), _with_quote(SPECS, i, kind, amount)) == BASELINE


def test_a_budget_every_card_passes_leaves_the_on_demand_ranking_alone() -> None:
    assert _shortlist(_req(budget_usd=1e9), SPECS) == BASELINE


def _expected_score(entry: dict[str, Any], req: PlanRequest) -> float:
    """The low-power role's score of ``entry`` from its own terms: 100 x sum(w t) / sum(w)."""
    weights = ROLE_BY_NAME["low-power-inference"].weights
    return 100.0 * sum(w * entry["terms"][t] for t, w in weights.items()) / sum(weights.values())


def test_an_unpriced_card_is_scored_on_the_other_terms_not_pushed_down() -> None:
    req = _req()
    target = BASELINE["low-power-inference"][0][0]
    specs = tuple(replace(g, prices=tuple(q for q in g.prices if q.kind != "on-demand")) if g.name == target else g
                  for g in SPECS)
    p = plan(req, gpus=specs)
    entries = {e["gpu"]: e for e in p.shortlist["low-power-inference"]}
    assert target in entries, "the card lost the role only because it has no on-demand quote"
    e = entries[target]
    assert e["priced"] is False and e["unpriced"] == "no on-demand quote"
    assert e["estimate"]["usd_per_million_tokens"] is None
    others = [x["terms"]["cost"] for x in p.shortlist["low-power-inference"] if x["priced"]]
    assert 0.0 < e["terms"]["cost"] <= max(others)  # imputed: not 0 (pushed down), not above every priced pick
    if not e["mitigations"]:
        assert e["score"] == pytest.approx(_expected_score(e, req), abs=0.01)
    else:  # the numerics-changing mitigation's risk multiplies the renormalised score
        mit = e["mitigations"][0].split()[0]
        risk = mitigation_risk(req, mit, None, False)
        assert e["score"] == pytest.approx(_expected_score(e, req) * (1 - risk), abs=0.01)
    assert target in p.price_basis["unpriced"]
