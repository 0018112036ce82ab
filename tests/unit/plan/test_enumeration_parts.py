"""Pieces of the planner: enumeration, scoring terms, the offload model, the flip arithmetic."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from gpumatch.catalog import load_catalog
from gpumatch.estimate.vectorized import gpu_table
from gpumatch.models import get_model
from gpumatch.plan import explain
from gpumatch.plan.enumeration import enumerate_candidates, gpu_counts, layouts, mitigations
from gpumatch.plan.metrics import memory, performance
from gpumatch.plan.pricing import plan_prices
from gpumatch.plan.request import with_options
from gpumatch.plan.roles import relative, score


def test_gpu_counts_inside_a_node_then_whole_nodes() -> None:
    assert gpu_counts(64, 8) == (1, 2, 3, 4, 6, 8, 16, 24, 32, 40, 48, 56, 64)
    assert gpu_counts(2, 2) == (1, 2)
    assert gpu_counts(12, 4) == (1, 2, 3, 4, 8, 12)


def test_layouts_keep_tp_in_a_node_and_zero_low_with_pipelines() -> None:
    req = with_options(None, get_model("llama-3.1-70b"), task="finetune", global_batch=64, seq=2048, max_gpus=32)
    rows = np.array(layouts(req))
    n, tp, pp, dp, zero, micro, accum = rows.T
    assert (tp * pp * dp == n).all() and (tp <= 8).all()
    assert (zero[pp > 1] <= 1).all() and (zero[dp == 1] == 0).all()
    assert (micro * dp * accum >= 64).all()  # the global batch is covered
    assert {1, 2, 4, 8} <= set(micro.tolist())


def test_mitigations_by_task() -> None:
    serve = with_options(None, get_model("llama-3.1-8b"), task="serve", concurrency=4)
    assert {m.precision for m in mitigations(serve)} == {"bf16", "fp8", "int8", "int4"}
    assert {m.kv_precision for m in mitigations(serve)} == {None, "fp8"}
    lora = with_options(None, get_model("llama-3.1-8b"), task="lora", global_batch=4)
    assert any(m.qlora for m in mitigations(lora)) and not any(m.offload for m in mitigations(lora))
    ft = with_options(None, get_model("llama-3.1-8b"), task="finetune", global_batch=4)
    assert any(m.offload for m in mitigations(ft)) and {m.recompute for m in mitigations(ft)} == {
        "none", "selective", "full"}


def test_offload_frees_optimizer_memory_and_costs_time() -> None:
    req = with_options(None, get_model("llama-3.1-8b"), task="finetune", global_batch=8, seq=2048, max_gpus=1,
                       micro_batch=1)
    specs = tuple(g for g in load_catalog().gpus if g.name == "H100 SXM5 80GB")
    table = gpu_table(specs)
    cs = enumerate_candidates(req, 1)
    plain = np.array([m.precision == "bf16" and m.recompute == "none" and not m.offload for m in cs.mitigations])
    off = np.array([m.precision == "bf16" and m.recompute == "none" and m.offload for m in cs.mitigations])
    idx = np.array([int(np.flatnonzero(plain[cs.mit])[0]), int(np.flatnonzero(off[cs.mit])[0])])
    sub = cs.take(idx)
    prices = plan_prices(req, specs)
    mem = memory(req, table, sub, prices)
    perf = performance(req, table, sub, prices, req.site)
    assert mem["total_bytes"][1] < mem["total_bytes"][0] - 8.03e9 * 10  # 12 of 16 bytes/param leave the GPU
    assert perf["step_s"][1] > perf["step_s"][0] and perf["tokens_per_s"][1] < perf["tokens_per_s"][0]


def test_relative_terms_and_score_bounds() -> None:
    x = np.array([100.0, 50.0, 10.0, 1.0, np.nan])
    r = relative(x, True)
    assert r[0] == 1.0 and abs(r[1] - (1 + np.log10(0.5))) < 1e-12 and r[2] == 0.0 and r[4] == 0.0
    low = relative(np.array([1.0, 2.0]), False)
    assert low[0] == 1.0 and low[1] < 1.0
    terms = {"a": np.array([1.0, 0.0]), "b": np.array([0.5, 1.0])}
    s = score({"a": 3.0, "b": 1.0}, terms)
    assert np.allclose(s, [100 * 3.5 / 4, 25.0])
    assert (score({"a": 0.0, "b": 0.0}, terms) == 0).all()


def test_flip_names_the_cheapest_single_change() -> None:
    w = {"cost": 1.0, "throughput": 1.0}
    a = {"gpu": "A", "count": 1, "score": 80.0, "terms": {"cost": 0.8, "throughput": 0.8}}
    b = {"gpu": "B", "count": 2, "score": 70.0, "terms": {"cost": 0.9, "throughput": 0.5},
         "estimate": {"usd_per_million_tokens": 1.0}}
    text = explain.flip(a, b, w)
    # the gap of 10 points needs +0.2 on either term; cost would exceed 1.0, throughput needs 10^0.2 = 1.58x
    assert text.startswith("B ×2 would take this place if its tokens/s were 58% higher")
    lower = explain.flip(a, replace_terms(b, cost=0.5, throughput=0.95), {"cost": 1.0, "throughput": 0.0})
    assert "if its $ per token were 21% lower" in lower  # need 0.1 × 1/1: 1 - 10^-0.1
    c = replace_terms(b, cost=0.95, throughput=0.95)
    assert "cannot overtake" in explain.flip(a, c, w)
    unpriced = replace_terms(b, cost=0.0, throughput=0.95)
    unpriced["estimate"] = {"usd_per_million_tokens": None}
    assert "no price" in explain.flip(a, unpriced, w)


def replace_terms(entry: dict[str, object], **terms: float) -> dict[str, object]:
    out = dict(entry)
    out["terms"] = terms
    return out


def test_pinned_tp() -> None:
    req = replace(with_options(None, get_model("llama-3.1-8b"), task="serve", concurrency=4, max_gpus=8), tp=4)
    assert {row[1] for row in layouts(req)} == {4}


def test_flip_reads_a_tie_as_a_tie() -> None:
    """Not "if its tokens/s were 0% higher (gap 0.0 points)"."""
    terms = {"throughput": 0.9, "cost": 0.5}
    a = {"gpu": "L4", "count": 1, "score": 70.02, "terms": terms}
    b = {"gpu": "T4", "count": 1, "score": 70.0, "terms": terms}
    assert explain.flip(a, b, {"throughput": 1.0, "cost": 1.0}) == "tied with T4 ×1 (scores 70.0 and 70.0)"
    b = {**b, "score": 69.0}
    assert "(gap 1.0 points)" in explain.flip(a, b, {"throughput": 1.0, "cost": 1.0})


def test_counts_read_singular_and_plural() -> None:
    from gpumatch.report.plan import header, plural, rejected_sections

    assert plural(1, "GPU model") == "1 GPU model" and plural(2, "GPU model") == "2 GPU models"
    assert plural(1, "GPU") == "1 GPU"
    row = {"gpu": "A10", "count": 1, "rule": "budget", "rule_title": "over budget", "configurations": 1,
           "precision": "any", "example": "x", "reason": "r", "miss_fraction": None}
    assert rejected_sections([row])[0][0] == "Failed: over budget — 1 configuration, 1 GPU model"
    req = {"name": "n", "model": "m", "dev": False, "task": "serve", "precision": "bf16", "concurrency": 1, "prompt": 1,
           "gen": 1, "max_gpus": 1, "gpus_per_node": 1}
    d = {"request": req, "candidates_evaluated": 1, "candidates_estimated": 1, "feasible": 1, "elapsed_s": 0.0,
         "basis": "assumed"}
    assert "1 candidate (≤ 1 GPU, 1 per node)" in header(d)


def test_gpu_flag_exclusion_is_attributed_to_the_flag_and_collapsed(capsys: Any) -> None:
    from gpumatch.cli.app import main

    args = ["plan", "--model", "llama-3.1-8b", "--task", "lora", "--batch", "16", "--seq", "2048", "--gpu",
            "RTX 4090", "--max-gpus", "2", "--gpus-per-node", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "workload's gpus.allow" not in out
    lines = [x for x in out.splitlines() if "not selected" in x]
    assert len(lines) == 1 and lines[0].startswith("Not considered: ")
    assert lines[0].endswith("GPU models not selected (--gpu GeForce RTX 4090)")


def test_fp8_training_flag_is_vendor_neutral() -> None:
    from pathlib import Path

    from gpumatch.plan import plan
    from gpumatch.workload import load_workload

    p = plan(load_workload(Path(__file__).resolve().parents[3] / "examples" / "finetune-70b-cluster.toml"), top=3)
    assert any(e["gpu"].startswith("Instinct") for es in p.shortlist.values() for e in es)
    flags = [f for es in p.shortlist.values() for e in es for f in e["flags"] if "fp8 training" in f]
    assert flags and not any("Transformer Engine" in f for f in flags)


def test_unpriced_cost_term_is_the_median_of_the_priced_ones() -> None:
    from gpumatch.plan.roles import impute_cost

    terms = {"cost": np.array([1.0, 0.4, 0.0, 0.7]), "energy": np.array([0.5, 0.5, 0.9, 0.5])}
    priced = np.array([True, True, False, True])
    out = impute_cost(terms, priced)
    assert out["cost"][2] == 0.7 and list(out["cost"][[0, 1, 3]]) == [1.0, 0.4, 0.7]
    assert out["energy"] is terms["energy"]
    assert impute_cost(terms, np.zeros(4, dtype=bool)) is terms  # none priced: score() drops the weight instead
    w = {"cost": 1.0, "energy": 1.0}
    assert score(w, terms, np.zeros(4, dtype=bool))[2] == 100.0 * 0.9
