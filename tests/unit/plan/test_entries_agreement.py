"""``gpumatch plan`` and ``gpumatch estimate`` give the same numbers for the same configuration (issue 10 item 4).

For each workload (serving, full fine-tune, LoRA, QLoRA, a MoE, the example files), every role's top picks are
re-run through :func:`gpumatch.estimate.estimate` with the entry's model, GPU, count, layout, precision,
batch/concurrency, mitigations and price basis (``estimate_options``), and the plan's memory total, TPOT, TTFT,
prefill, step time, tokens/s and cost must equal the estimate's to 0.5 %. A seeded sample of all candidates (not
only the winners: the fp8-KV mitigation used to be evaluated with 16-bit KV bytes, which no winner showed) goes
through the same check. Capacities and prices are read from the catalog, never written here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpumatch.catalog import load_catalog
from gpumatch.estimate import DEFAULT_CALIBRATION, Request, estimate
from gpumatch.models import get_model
from gpumatch.plan import PlanRequest, from_workload, plan
from gpumatch.plan import metrics as plan_metrics
from gpumatch.plan.entries import estimate_options
from gpumatch.plan.enumeration import enumerate_candidates
from gpumatch.plan.planner import _table
from gpumatch.plan.pricing import plan_prices
from gpumatch.plan.request import with_options
from gpumatch.workload import load_workload

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
RTOL = 0.005
# plan entry key -> how the estimate reports it
INFER = {"tpot_s": "tpot_s", "ttft_p50_s": "ttft_s", "prefill_s": "prefill_s", "tokens_per_s": "tokens_per_s"}
TRAIN = {"step_s": "step_s", "tokens_per_s": "tokens_per_s", "mfu": "mfu"}
COST = {"usd_per_million_tokens": "usd_per_million_tokens", "usd_per_hour": "usd_per_hour"}


def _flags(model: str, **kw: Any) -> PlanRequest:
    return with_options(None, get_model(model), **kw)


WORKLOADS = {
    "chat-70b-serving": lambda: from_workload(load_workload(EXAMPLES / "chat-70b-serving.toml")),
    "finetune-70b-cluster": lambda: from_workload(load_workload(EXAMPLES / "finetune-70b-cluster.toml")),
    "lora-8b-workstation": lambda: from_workload(load_workload(EXAMPLES / "lora-8b-workstation.toml")),
    "inference-7b-budget": lambda: from_workload(load_workload(EXAMPLES / "inference-7b-budget.toml")),
    "lowpower-small-inference": lambda: from_workload(load_workload(EXAMPLES / "lowpower-small-inference.toml")),
    "qlora-70b": lambda: _flags("llama-3.1-70b", task="qlora", global_batch=8, seq=2048, max_gpus=2, gpus_per_node=2),
    "moe-deepseek-v3-fp8": lambda: _flags("deepseek-v3", task="serve", precision="fp8", concurrency=32, prompt=2048,
                                          gen=256, max_gpus=16),
    "moe-mixtral-serving-3-replicas": lambda: _flags("mixtral-8x7b", task="serve", concurrency=32, prompt=1024, gen=256,
                                                     max_gpus=6, gpus_per_node=6),
    "sglang-8b-prefix-cache": lambda: _flags("llama-3.1-8b", task="serve", concurrency=64, prompt=2048, gen=256,
                                             max_gpus=4, engine="sglang", prefix_hit_ratio=0.5),
    "chat-70b-static": lambda: _flags("llama-3.1-70b", task="serve", concurrency=32, prompt=2048, gen=256, max_gpus=8,
                                      engine="static", ttft_p50_s="500ms", tpot_p50_s="40ms"),
}


def _estimate(req: PlanRequest, gpu: str, options: dict[str, Any], static: bool = False) -> Any:
    """``gpumatch estimate`` with a plan entry's options. A serving entry names the engine the plan ranked on
    (vllm unless the workload names another); ``static`` re-runs it on the static-batch model (the pre-ranking)."""
    opts = dict(options)
    count = opts.pop("count")
    if opts.get("task") == "serve":
        assert opts["engine"] == req.serving_engine
        if static:
            opts["engine"] = "static"
            opts.pop("prefix_hit_ratio", None)
    return estimate(req.model, gpu, Request(count=count, **opts), site=req.site)


def _compare(where: str, plan_values: dict[str, float | None], result: Any, keys: dict[str, str]) -> list[str]:
    """Mismatches between the plan's figures and the estimate's (both unknown is agreement)."""
    est = dict(result.metrics, total_bytes=result.memory.total_bytes)
    out = []
    for pk, ek in {"total_bytes": "total_bytes", **keys}.items():
        a, b = plan_values.get(pk), est.get(ek)
        a = None if a is None or math.isnan(a) else a
        b = None if b is None or math.isnan(b) else b
        if (a is None) != (b is None) or (a is not None and b is not None and not math.isclose(a, b, rel_tol=RTOL)):
            out.append(f"{where}: {pk} plan {a} vs estimate {ek} {b}")
    return out


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_top_picks_agree_with_estimate(name: str) -> None:
    req = WORKLOADS[name]()
    p = plan(req, top=3)
    keys = {**(TRAIN if req.training else INFER), **COST}
    problems: list[str] = []
    checked = 0
    for role, entries in p.shortlist.items():
        for e in entries:
            opts = e["estimate_options"]
            assert opts["count"] == e["count"] and opts["tp"] == e["layout"]["tp"] and opts["pp"] == e["layout"]["pp"]
            result = _estimate(req, e["gpu"], opts)
            assert result.fits, f"{role} {e['gpu']}: a plan pick must fit in estimate too"
            problems += _compare(f"{role} #{e['gpu']} {e['layout_text']}", e["estimate"], result, keys)
            checked += 1
    assert checked, f"{name}: the plan has no pick to compare"
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["chat-70b-serving", "lora-8b-workstation", "lowpower-small-inference",
                                  "moe-deepseek-v3-fp8", "moe-mixtral-serving-3-replicas", "finetune-70b-cluster"])
def test_sampled_candidates_agree_with_estimate(name: str) -> None:
    """Any candidate (fitting or not, any mitigation: fp8 KV, offload, QLoRA, replicas that do not divide the
    requests) has the estimate's numbers, not only the winners."""
    req = WORKLOADS[name]()
    specs = load_catalog().gpus
    cs = enumerate_candidates(req, len(specs))
    rng = np.random.default_rng(7)
    sub = cs.take(np.sort(rng.choice(len(cs), size=min(40, len(cs)), replace=False)))
    prices = plan_prices(req, specs)
    perf = plan_metrics.performance(req, _table(specs), sub, prices, req.site, DEFAULT_CALIBRATION)
    keys = {**(TRAIN if req.training else {k: v for k, v in INFER.items() if k != "ttft_p50_s"}),
            **({} if req.training else {"ttft_s": "ttft_s"}), **COST}
    problems: list[str] = []
    for j in range(len(sub)):
        opts = estimate_options(req, sub, j)
        gpu = specs[int(sub.gpu[j])]
        try:
            result = _estimate(req, gpu.name, opts, static=True)  # the static pass every candidate goes through
        except Exception as e:  # a structurally invalid candidate (TP vs heads, precision) the rules reject
            assert "gpumatch" in type(e).__module__, e
            continue
        problems += _compare(f"{gpu.name} {opts}", {k: float(v[j]) for k, v in perf.items()}, result, keys)
    assert not problems, "\n".join(problems[:10])


def test_replicas_not_dividing_the_requests_count_only_the_sequences_in_flight() -> None:
    """32 requests on 3 replicas of 11 slots: tokens/s is 32/33 of three full replicas (the estimator's in_flight)."""
    kw: dict[str, Any] = {"task": "serve", "prompt": 1024, "gen": 256, "tp": 2, "engine": "static"}
    full = estimate("mixtral-8x7b", "H200 SXM", Request(count=6, concurrency=33, **kw))
    part = estimate("mixtral-8x7b", "H200 SXM", Request(count=6, concurrency=32, **kw))
    assert full.layout["seqs_per_replica"] == part.layout["seqs_per_replica"] == 11
    assert part.metrics["tpot_s"] == full.metrics["tpot_s"]
    assert part.metrics["tokens_per_s"] == pytest.approx(full.metrics["tokens_per_s"] * 32 / 33)
    assert part.memory.total_bytes == full.memory.total_bytes
