"""Run the estimator over a :class:`CandidateSet` and derive the planner's per-candidate metrics.

Two passes keep a full-catalog plan fast: :func:`memory` (the memory items only) on every candidate that passed
the structural rules, then :func:`performance` (time, power, cost, scaling) on those that fit.

The figures are the estimator's (:func:`gpumatch.estimate.evaluate` and :func:`gpumatch.estimate.scaling`, the
functions ``gpumatch estimate`` uses), so a plan entry and ``gpumatch estimate`` with the entry's
``estimate_options`` agree on memory, times, tokens/s and cost. What the planner sets up on top:

- inference replicas are the estimator's ``dp`` (replicas do not communicate; see
  :func:`gpumatch.estimate.engine.replica_case`), each serving ``seqs_per_replica = ceil(concurrency / replicas)``
  sequences (:func:`gpumatch.estimate.request.seqs_per_replica`), with ``in_flight = concurrency``: throughput
  counts only the sequences really in flight;
- CPU offload of the optimizer state is the estimator's ``offload`` (ZeRO-Offload, Ren et al. 2021: the state
  leaves the GPU, the host updates it; :mod:`gpumatch.estimate.training`);
- one price basis for every candidate, so costs compare (:func:`gpumatch.plan.pricing.plan_prices`): the
  request's ``price_basis`` (on-demand by default; reserved; spot) prices each GPU-hour at the median of the
  newest quote per provider (:func:`gpumatch.catalog.prices.select_price`, as ``gpumatch estimate``); the purchase basis
  costs a GPU-hour as the purchase price amortized over the lifetime and utilization, plus energy and facility
  (:mod:`gpumatch.estimate.cost`). A purchase budget does not change the basis: it is checked against purchase
  prices (:mod:`gpumatch.plan.rules`) while the cost term follows the basis. The workload's own prices
  (``money.usd_per_gpu_hour``, ``money.purchase_usd_per_gpu``) replace the catalog's figure of that card.
  A card without a price on the basis has an unknown cost (NaN): :mod:`gpumatch.plan.roles` then ranks it on
  the other terms.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.estimate import DEFAULT_CALIBRATION, Calibration, evaluate, memory_items, model_nums, scaling
from gpumatch.estimate.case import Case
from gpumatch.estimate.precision import activation_precision
from gpumatch.estimate.vectorized import Choice, GpuTable, candidate_case
from gpumatch.plan.enumeration import CandidateSet
from gpumatch.plan.pricing import Prices
from gpumatch.plan.request import PlanRequest
from gpumatch.vocab import ADAPTER_TASKS

FloatArray = npt.NDArray[np.float64]


def _task(req: PlanRequest, qlora: bool) -> str:
    return "qlora" if qlora else req.task


def build_case(req: PlanRequest, table: GpuTable, cs: CandidateSet, prices: Prices, qlora: bool) -> Case:
    """The estimator's Case for candidates that share one task (LoRA and its QLoRA variant are two calls)."""
    mits = cs.mitigations
    prec = Choice(tuple(m.precision for m in mits), cs.mit)
    # the KV format of each mitigation, else the request's, else the estimator's default for the weights (one
    # unset name used to drop every candidate's KV format, so the fp8 KV mitigation ran with 16-bit KV bytes)
    kv_names = tuple(m.kv_precision or req.kv_precision or activation_precision(m.precision) for m in mits)
    kv: Any = None if req.training else Choice(kv_names, cs.mit)
    rc = Choice(tuple(m.recompute for m in mits), cs.mit)
    f = np.float64
    numbers: dict[str, Any] = {
        "tp": cs.tp.astype(f), "pp": cs.pp.astype(f), "zero": cs.zero.astype(f),
        "seqs_per_replica": cs.seqs_per_replica.astype(f),
        "gpus_per_node": float(req.gpus_per_node),
    }
    if req.training:
        numbers.update(dp=cs.dp.astype(f), micro_batches=cs.grad_accum.astype(f), seq=float(req.seq),
                       offload=np.array([float(m.offload) for m in mits])[cs.mit])
        if req.task in ADAPTER_TASKS:
            numbers["lora_rank"] = float(req.lora_rank)
    else:
        numbers.update(dp=cs.dp.astype(f), micro_batches=1.0, prompt=float(req.prompt), gen=float(req.gen),
                       in_flight=float(req.concurrency))
    case = candidate_case(req.model, table, _task(req, qlora), gpu_index=cs.gpu, precision=prec, kv_precision=kv,
                          recompute=rc, optimizer=req.optimizer, master_weights=req.master_weights,
                          engine=req.serving_engine if req.task == "serve" else None, **numbers)
    return replace(case, usd_per_gpu_hour=prices.hourly[cs.gpu], purchase_usd=prices.purchase[cs.gpu])


def memory(req: PlanRequest, table: GpuTable, cs: CandidateSet, prices: Prices,
           cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, FloatArray]:
    """Per-GPU ``total_bytes`` and ``capacity_bytes`` of every candidate (memory pass)."""
    total = np.empty(len(cs))
    cap = np.empty(len(cs))
    m = model_nums(req.model)
    for qlora, idx in _task_groups(cs):
        sub = cs.take(idx)
        items = memory_items(_task(req, qlora), m, build_case(req, table, sub, prices, qlora), cal)
        total[idx] = np.broadcast_to(items["total_bytes"], idx.shape)
        cap[idx] = np.broadcast_to(items["capacity_bytes"], idx.shape)
    return {"total_bytes": total, "capacity_bytes": cap}


def _task_groups(cs: CandidateSet) -> list[tuple[bool, npt.NDArray[np.intp]]]:
    q = np.array([m.qlora for m in cs.mitigations])[cs.mit]
    groups = [(False, np.flatnonzero(~q)), (True, np.flatnonzero(q))]
    return [(flag, idx) for flag, idx in groups if idx.size]


KEYS = ("total_bytes", "capacity_bytes", "weights_bytes", "kv_cache_bytes", "activations_bytes",
        "optimizer_bytes", "prefill_s", "ttft_s", "tpot_s", "step_s", "mfu", "power_w", "energy_j_per_token_facility",
        "usd_per_hour", "bound_index", "scaling_efficiency", "tokens_per_s", "usd_per_million_tokens")


def performance(req: PlanRequest, table: GpuTable, cs: CandidateSet, prices: Prices, site: Any,
                cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, FloatArray]:
    """Time, throughput (all replicas), power, energy, cost, bound and scaling efficiency per candidate.

    All from :func:`gpumatch.estimate.evaluate` and :func:`gpumatch.estimate.scaling` (the efficiency is capped
    at 1 there). ``tokens_per_s``: tokens trained per second (training) or generated tokens per second over all
    replicas, prefill time included (inference); ``usd_per_hour`` of all GPUs of the candidate and
    ``usd_per_million_tokens`` on the price basis of the module docstring.
    """
    n = len(cs)
    out: dict[str, FloatArray] = {k: np.full(n, np.nan) for k in KEYS}
    m = model_nums(req.model)
    for qlora, idx in _task_groups(cs):
        sub = cs.take(idx)
        task = _task(req, qlora)
        case = build_case(req, table, sub, prices, qlora)
        res = evaluate(task, m, case, cal, site)
        res.update(scaling(task, m, case, res, cal))
        set_price(req, res)
        for k in out:
            if k in res:
                out[k][idx] = np.broadcast_to(np.asarray(res[k], dtype=float), idx.shape)
    return out


def set_price(req: PlanRequest, res: dict[str, Any]) -> None:
    """The price basis of the module docstring: owned on the purchase basis, else the hourly (cloud) figure."""
    key = "owned" if req.price_basis == "purchase" else "cloud"
    res["usd_per_hour"] = res[f"usd_per_hour_{key}"]
    res["usd_per_million_tokens"] = res[f"usd_per_million_tokens_{key}"]

