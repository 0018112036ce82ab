"""Run the estimator over a :class:`CandidateSet` and derive the planner's per-candidate metrics.

Two passes keep a full-catalog plan fast: :func:`memory` (the memory items only) on every candidate that passed
the structural rules, then :func:`performance` (time, power, cost, scaling) on those that fit.

What the planner adds on top of :func:`gpumatch.estimate.evaluate` (the estimator does not model these):

- inference replicas: the estimator sees one replica (``dp = 1``: replicas do not communicate) serving
  ``micro = ceil(batch / replicas)`` sequences; throughput and $/h are multiplied by the replicas (throughput
  capped at the ``batch`` sequences really in flight), per-token cost follows;
- CPU offload of the optimizer state (ZeRO-Offload, Ren et al. 2021, "ZeRO-Offload: Democratizing
  Billion-Scale Model Training", sections 4-5): the optimizer state (fp32 master copy and moments) leaves the
  GPU; each step moves the gradient shard to the host and the updated 16-bit weights back over PCIe, and the
  host runs Adam over the node's shards, touching about 28 bytes per parameter (fp32 weight, grad, two
  moments read; weight and moments written) at an assumed ``HOST_MEMORY_BYTES_PER_S`` per node. Added to the
  step without overlap (conservative; the paper overlaps part of it);
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
from gpumatch.estimate.candidates import Choice, GpuTable, candidate_case
from gpumatch.estimate.inputs import Case
from gpumatch.plan.candidates import CandidateSet
from gpumatch.plan.inputs import PlanRequest
from gpumatch.plan.pricing import Prices

FloatArray = npt.NDArray[np.float64]
HOST_MEMORY_BYTES_PER_S = 100e9
"""Host DRAM bandwidth available to CPU-Adam per node (assumed: 8-12 DDR5 channels, half usable)."""
ADAM_HOST_BYTES_PER_PARAM = 28.0


def _task(req: PlanRequest, qlora: bool) -> str:
    return "qlora" if qlora else req.task


def build_case(req: PlanRequest, table: GpuTable, cs: CandidateSet, prices: Prices, qlora: bool) -> Case:
    """The estimator's Case for candidates that share one task (LoRA and its QLoRA variant are two calls)."""
    mits = cs.mitigations
    prec = Choice(tuple(m.precision for m in mits), cs.mit)
    kv_names = tuple(m.kv_precision or (req.kv_precision or "") for m in mits)
    kv: Any = Choice(kv_names, cs.mit) if all(kv_names) else None
    rc = Choice(tuple(m.recompute for m in mits), cs.mit)
    f = np.float64
    numbers: dict[str, Any] = {
        "tp": cs.tp.astype(f), "pp": cs.pp.astype(f), "zero": cs.zero.astype(f), "batch": cs.micro.astype(f),
        "gpus_per_node": float(req.gpus_per_node),
    }
    if req.training:
        numbers.update(dp=cs.dp.astype(f), micro_batches=cs.accum.astype(f), seq=float(req.seq))
        if req.task in ("lora", "qlora"):
            numbers["lora_rank"] = float(req.lora_rank)
    else:
        numbers.update(dp=1.0, micro_batches=1.0, prompt=float(req.prompt), gen=float(req.gen))
    case = candidate_case(req.model, table, _task(req, qlora), gpu_index=cs.gpu, precision=prec, kv_precision=kv,
                          recompute=rc, optimizer=req.optimizer, master_weights=req.master_weights, **numbers)
    case = replace(case, usd_per_gpu_hour=prices.hourly[cs.gpu], purchase_usd=prices.purchase[cs.gpu])
    offload = np.array([m.offload for m in mits])[cs.mit]
    if offload.any():
        case = replace(case, opt_bytes=np.where(offload, 0.0, np.broadcast_to(case.opt_bytes, offload.shape)))
    return case


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
        "optimizer_bytes", "prefill_s", "tpot_s", "step_s", "mfu", "power_w", "energy_j_per_token_facility",
        "usd_per_hour", "bound_index", "scaling_efficiency")


def performance(req: PlanRequest, table: GpuTable, cs: CandidateSet, prices: Prices, site: Any,
                cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, FloatArray]:
    """Time, throughput (all replicas), power, energy, cost, bound and scaling efficiency per candidate.

    ``scaling_efficiency`` (training) is :func:`gpumatch.estimate.scaling` capped at 1: its one-GPU baseline runs
    the whole optimizer update, while ZeRO-1..3 shards it over the DP ranks, so a 64-GPU ZeRO-3 step can be
    cheaper per GPU than the baseline (70B on MI325X: 0.53 s of Adam on one GPU, 0.008 s per rank on 64; step
    17.05 s vs 16.52 s, "103 %"). That is less work per GPU, not better than linear scaling, so it reads 100 %.

    ``tokens_per_s``: processed tokens per second (training) or generated tokens per second over all replicas
    (inference); ``usd_per_hour`` of all GPUs of the candidate and ``usd_per_million_tokens`` on the price basis
    of the module docstring.
    """
    n = len(cs)
    out: dict[str, FloatArray] = {k: np.full(n, np.nan) for k in (*KEYS, "tokens_per_s", "usd_per_million_tokens")}
    m = model_nums(req.model)
    for qlora, idx in _task_groups(cs):
        sub = cs.take(idx)
        task = _task(req, qlora)
        case = build_case(req, table, sub, prices, qlora)
        res = evaluate(task, m, case, cal, site)
        if req.training:
            res.update(scaling(task, m, case, res, cal))
            res["scaling_efficiency"] = np.minimum(np.asarray(res["scaling_efficiency"], dtype=float), 1.0)
        else:
            res["scaling_efficiency"] = _inference_scaling(res)
        _derive(req, sub, case, res)
        for k in out:
            if k in res:
                out[k][idx] = np.broadcast_to(np.asarray(res[k], dtype=float), idx.shape)
    return out


def _derive(req: PlanRequest, cs: CandidateSet, case: Case, res: dict[str, Any]) -> None:
    """Replicas, offload time and the price choice (module docstring)."""
    replicas = 1.0 if req.training else cs.dp.astype(float)
    tok = np.asarray(res["useful_tokens_per_s"], dtype=float) * replicas
    if not req.training:  # ceil(batch / replicas) per replica can exceed the sequences actually in flight
        tok = tok * np.minimum(1.0, req.batch / (cs.micro * replicas))
    factor = np.ones(len(cs))
    if req.training:
        offload = np.array([mm.offload for mm in cs.mitigations])[cs.mit]
        if offload.any():
            extra = _offload_s(req, cs, case, res)
            step = np.asarray(res["step_s"], dtype=float)
            factor = np.where(offload, step / (step + extra), 1.0)
            res["step_s"] = step + np.where(offload, extra, 0.0)
            res["mfu"] = np.asarray(res["mfu"]) * factor
    tok = tok * factor
    cloud_h = np.asarray(res["usd_per_hour_cloud"], dtype=float) * replicas
    own_h = np.asarray(res["usd_per_hour_owned"], dtype=float) * replicas
    usd_h = own_h if req.price_basis == "purchase" else cloud_h
    res["tokens_per_s"] = tok
    res["usd_per_hour"] = usd_h
    res["usd_per_million_tokens"] = usd_h / (tok * 3600.0) * 1e6
    res["energy_j_per_token_facility"] = np.asarray(res["energy_j_per_token_facility"]) / factor


def _offload_s(req: PlanRequest, cs: CandidateSet, case: Case, res: dict[str, Any]) -> FloatArray:
    """Seconds per step the optimizer offload adds (PCIe both ways + host Adam over the node's shards)."""
    dp = cs.dp.astype(float)
    full = np.asarray(res["weights_bytes"], dtype=float) / np.asarray(case.weight_bytes, dtype=float)
    full = full * np.where(cs.zero >= 3, dp, 1.0)
    shard = full / np.where(cs.zero >= 1, dp, 1.0)
    pcie = shard * (np.asarray(case.grad_bytes, dtype=float) + 2.0) / np.asarray(case.pcie_bytes_per_s, dtype=float)
    node_gpus = np.minimum(cs.count, req.gpus_per_node).astype(float)
    host = shard * node_gpus * ADAM_HOST_BYTES_PER_PARAM / HOST_MEMORY_BYTES_PER_S
    out: FloatArray = pcie + host
    return out


def _inference_scaling(res: dict[str, Any]) -> FloatArray:
    """Inference: the fraction of a decode step not spent in TP/PP communication (1 on one GPU). Replicas do not
    communicate, so this is the interconnect's tax on the model-parallel group."""
    parts = [np.asarray(res[k], dtype=float) for k in ("compute_s", "memory_s", "comm_s", "host_s")]
    total = parts[0] + parts[1] + parts[2] + parts[3]
    out: FloatArray = 1.0 - parts[2] / np.maximum(total, 1e-12)
    return out
