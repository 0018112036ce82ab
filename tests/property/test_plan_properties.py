"""Planner invariants over random requests: infeasible candidates are never ranked, every rejection has a reason,
scores are finite, and every enumerated candidate is either feasible or in exactly one rejected group."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumatch.models import get_model
from gpumatch.plan import plan
from gpumatch.plan.request import with_options
from gpumatch.plan.rules import DEFAULT_MEMORY_MARGIN, RULES

MODELS = ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b", "llama-3.1-70b")


@st.composite
def requests(draw: Any) -> Any:
    task = draw(st.sampled_from(("serve", "infer", "dev", "train", "finetune", "lora", "qlora")))
    training = task in ("train", "finetune", "lora", "qlora")
    gpn = draw(st.sampled_from((1, 2, 4, 8)))
    opts: dict[str, Any] = {
        "task": task,
        "global_batch" if training else "concurrency": draw(st.integers(1, 64)),
        "gpus_per_node": gpn,
        "max_gpus": 1 if task == "dev" else draw(st.integers(1, 4)) * gpn,
        "psu_w": draw(st.none() | st.floats(500, 5000)),
        "w_per_node": draw(st.none() | st.floats(200, 12000)),
        "budget_usd": draw(st.none() | st.floats(1000, 200000)),
    }
    if training:
        opts["seq"] = draw(st.sampled_from((512, 2048, 4096)))
        opts["tokens_per_s"] = draw(st.none() | st.floats(100, 1e5))
    else:
        opts["prompt"] = draw(st.sampled_from((128, 1024, 4096)))
        opts["gen"] = draw(st.sampled_from((16, 256)))
        opts["tpot_p50_s"] = draw(st.none() | st.floats(0.005, 0.2))
        opts["ttft_p99_s"] = draw(st.none() | st.floats(0.05, 5.0))
    return with_options(None, get_model(draw(st.sampled_from(MODELS))), **opts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_plan_invariants(req: Any) -> None:
    p = plan(req, top=2)
    ranked = [e for entries in p.shortlist.values() for e in entries]
    for e in ranked:
        est = e["estimate"]
        assert est["total_bytes"] <= est["capacity_bytes"] * (1 - DEFAULT_MEMORY_MARGIN) + 1.0
        assert math.isfinite(e["score"]) and 0.0 <= e["score"] <= 100.0
        if req.tpot_p50_s:
            assert est["tpot_s"] <= req.tpot_p50_s
        if req.ttft_p99_s and req.serving_engine == "static":
            assert est["prefill_s"] <= req.ttft_p99_s  # the static model's p99: the whole batch's prefill
        elif req.ttft_p99_s:
            assert est["ttft_p50_s"] <= req.ttft_p99_s  # an engine's mean TTFT (no percentiles)
        if req.required_tokens_per_s:
            assert est["tokens_per_s"] >= req.required_tokens_per_s
        assert e["why"] and e["experiments"]
    codes = {name for name, _ in RULES[1:]}
    for r in p.rejected:
        assert r["reason"] and r["rule"] in codes and r["configurations"] >= 1
    # serving at an engine: what passed the static checks but was not evaluated at the engine is neither
    assert sum(r["configurations"] for r in p.rejected) + p.feasible + p.not_evaluated == p.candidates_evaluated
