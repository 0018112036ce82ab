"""One shortlist entry of a plan: its layout, figures, score terms, flags, price, intervals and the
:func:`gpumatch.estimate.estimate` options that reproduce it (``gpumatch estimate`` with them gives the same
numbers; tests/unit/plan/test_entries_agreement.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.catalog.prices import PriceChoice, unpriced_mark
from gpumatch.estimate import BOUNDS, Calibration
from gpumatch.estimate.intervals import estimate_intervals, where_of
from gpumatch.plan import explain, rules
from gpumatch.plan.enumeration import CandidateSet
from gpumatch.plan.request import PlanRequest
from gpumatch.vocab import ADAPTER_TASKS

FloatArray = npt.NDArray[np.float64]


def layout_of(req: PlanRequest, cs: CandidateSet, i: int) -> dict[str, Any]:
    """Candidate ``i``'s layout as the plan shows it: TP and PP, then DP, ZeRO, micro-batch and gradient
    accumulation (training) or replicas and sequences per replica (inference)."""
    layout: dict[str, Any] = {"tp": int(cs.tp[i]), "pp": int(cs.pp[i])}
    if req.training:
        layout.update(dp=int(cs.dp[i]), zero=int(cs.zero[i]), micro_batch=int(cs.seqs_per_replica[i]),
                      grad_accum=int(cs.grad_accum[i]))
    else:
        layout.update(replicas=int(cs.dp[i]), sequences_per_replica=int(cs.seqs_per_replica[i]))
    return layout


def entry(req: PlanRequest, facts: rules.GpuFacts, cs: CandidateSet, i: int, pm: dict[str, FloatArray], j: int,
           s: FloatArray, terms: dict[str, FloatArray]) -> dict[str, Any]:
    """One shortlist entry (candidate ``i`` of ``cs``; its metrics at ``j`` of ``pm``)."""
    g = facts.specs[int(cs.gpu[i])]
    mit = cs.mitigations[int(cs.mit[i])]
    layout = layout_of(req, cs, i)
    est: dict[str, Any] = {k: _f(v[j]) for k, v in pm.items() if k != "bound_index"}
    choice = facts.prices.choices[int(cs.gpu[i])]
    priced = est.get("usd_per_million_tokens") is not None
    est["bound"] = BOUNDS[int(pm["bound_index"][j])]
    one = cs.take(np.array([i]))
    one_est = {k: np.array([v[j]]) for k, v in pm.items()}
    entry: dict[str, Any] = {
        "gpu": g.name, "count": int(cs.count[i]), "layout": layout,
        "layout_text": explain.layout_text(layout, req.training),
        "mitigations": list(mit.labels(req)), "score": round(float(s[j]), 2),
        "terms": {t: round(float(v[j]), 4) for t, v in terms.items()},
        "estimate": est, "bound": est["bound"],
        "headroom_fraction": 1.0 - float(pm["total_bytes"][j] / pm["capacity_bytes"][j]),
        "flags": rules.flags(req, facts, one, 0, one_est),
        "cost": explain.cost_text(est, req) if priced else choice.text(),
        "estimate_options": estimate_options(req, cs, i),
        **price_fields(choice, priced),
    }
    return entry


PLAN_INTERVAL_FIGURES = ("ttft_s", "prefill_s", "tpot_s", "step_s", "total_bytes", "tokens_per_s",
                         "usd_per_million_tokens")
"""The figures of a shortlisted entry that carry an interval in the plan's JSON."""


def add_intervals(req: PlanRequest, entries: list[dict[str, Any]], cal: Calibration) -> None:
    """Give each entry ``intervals`` {figure: [low, high]} and ``interval_basis`` for its key figures, by the rule
    of :mod:`gpumatch.estimate.intervals` (the same as ``gpumatch estimate`` with the entry's options)."""
    for e in entries:
        opts, est = e["estimate_options"], e["estimate"]
        figures = {k: float(est[k]) for k in PLAN_INTERVAL_FIGURES if est.get(k) is not None}
        where = where_of(e["gpu"], str(opts["task"]), str(opts["precision"]), req.model.params_total,
                         opts.get("seq"), opts.get("prompt"), opts.get("gen"), int(opts["count"]))
        spans, why = estimate_intervals(figures, where, req.training, cal.extrapolated_error_fraction,
                                        calibrated=cal.residuals)
        e["intervals"] = {k: list(v) for k, v in spans.items() if k in figures}
        e["interval_basis"] = {k: why[k] for k in spans if k in figures}


def price_fields(choice: PriceChoice, priced: bool) -> dict[str, Any]:
    """The entry's price: ``priced`` (cost compared), ``price`` (the figure, spread and quotes of its card on the
    plan's basis), ``price_text`` (one line) and ``unpriced`` (the mark "no on-demand quote" when its cost is
    unknown and it was ranked without the cost term; empty when priced)."""
    return {"priced": priced, "price": choice.to_dict(), "price_text": choice.text(),
            "unpriced": "" if priced else unpriced_mark(choice.basis)}


def estimate_options(req: PlanRequest, cs: CandidateSet, i: int) -> dict[str, Any]:
    """The :func:`gpumatch.estimate.estimate` keywords (with ``count``) that evaluate candidate ``i`` alone.

    They are the fields of a :class:`gpumatch.estimate.Request`: ``gpumatch estimate`` with them gives the same
    memory, times, tokens/s and cost as the plan entry, both going through the same engine functions and the
    request's split rules (the agreement is tested). Inference: ``dp`` replicas share the plan's
    ``concurrency``; training: the candidate's ``micro_batch`` of the plan's ``global_batch``, whose
    micro-batches per step follow (:func:`gpumatch.estimate.request.grad_accum`).
    """
    mit = cs.mitigations[int(cs.mit[i])]
    task = "qlora" if mit.qlora else req.task
    opts: dict[str, Any] = {
        "task": task, "count": int(cs.count[i]), "tp": int(cs.tp[i]), "pp": int(cs.pp[i]), "dp": int(cs.dp[i]),
        "precision": "nf4" if task == "qlora" else mit.precision,
        "gpus_per_node": req.gpus_per_node, "price_basis": req.price_basis,
    }
    if req.training:
        opts.update(global_batch=req.global_batch, micro_batch=int(cs.seqs_per_replica[i]), seq=req.seq,
                    zero=int(cs.zero[i]), recompute=mit.recompute,
                    optimizer=req.optimizer, master_weights=req.master_weights, offload_optimizer=mit.offload)
        if task in ADAPTER_TASKS:
            opts["lora_rank"] = req.lora_rank
    else:
        opts.update(concurrency=req.concurrency, prompt=req.prompt, gen=req.gen)
        if task == "serve":
            opts["engine"] = req.serving_engine  # the model the plan ranked on (served.py)
            if req.serving_engine != "static":
                opts["num_prompts"] = 0  # the long-run steady state, not a benchmark's first burst
            if req.prefix_hit_ratio and req.serving_engine != "static":
                opts["prefix_hit_ratio"] = req.prefix_hit_ratio
        kv = mit.kv_precision or req.kv_precision
        if kv:
            opts["kv_precision"] = kv
    return opts


def _f(v: Any) -> float | None:
    x = float(v)
    return x if np.isfinite(x) else None
