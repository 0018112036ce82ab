"""The one evaluation every estimate goes through, scalar or vectorized.

:func:`evaluate` takes a task, a model's :class:`ModelNums` and a :class:`Case` whose fields are floats
(one configuration) or numpy arrays (many, broadcasting) and returns a dict of the same kind: memory
items, time, throughput, power, energy and cost. The scalar API (:func:`gpumatch.estimate.estimate`)
wraps it into result dataclasses; the planner calls it directly on arrays of candidates.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpumatch.errors import InputError
from gpumatch.estimate import cost, flops, memory, power, roofline, training
from gpumatch.estimate._num import Num, is_array, vmax, vmin, where
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.inputs import Case, ModelNums
from gpumatch.estimate.power import DEFAULT_SITE, Site

TRAIN_TASKS = ("train", "finetune", "lora", "qlora")
INFER_TASKS = ("infer", "serve")
TASKS = INFER_TASKS + TRAIN_TASKS


def bound_index(t: dict[str, Num]) -> Num:
    """Index into ``roofline.BOUNDS`` of the largest time share (compute, memory, interconnect, host)."""
    parts = (t["compute_s"], t["memory_s"], t["comm_s"], t["host_s"])
    if is_array(*parts):
        return np.argmax(np.stack(np.broadcast_arrays(*parts)), axis=0)
    best = 0
    for i in (1, 2, 3):
        if parts[i] > parts[best]:
            best = i
    return best


def memory_items(task: str, m: ModelNums, c: Case, cal: Calibration) -> dict[str, Num]:
    """Itemized bytes per GPU (see memory.py), the peak total, the capacity and the margin.

    ``total_bytes`` is the peak: in single-GPU PyTorch training without accumulation the gradients and the
    activations do not peak together (``memory.peak_dynamic_bytes``), so it can be less than the items' sum.
    """
    training_ = task in TRAIN_TASKS
    w, g, o = memory.model_state_bytes(m, c, training_)
    if training_:
        acts, logits = memory.training_activation_bytes(m, c, cal)
        kv: Num = 0.0
    else:
        whole = c.batch * c.prompt
        chunk = where(c.prefill_chunk > 0, vmin(c.prefill_chunk, whole), whole)
        chunk = vmax(chunk, c.batch)  # a decode step holds one token of every sequence
        acts, logits = memory.inference_activation_bytes(m, c, chunk), 0.0
        kv = memory.kv_cache_bytes(m, c, c.prompt + c.gen)
    peak_dynamic = memory.peak_dynamic_bytes(c, g, acts + logits) if training_ else acts
    ctx, nccl, frag, gather = memory.overhead_bytes(m, c, o + peak_dynamic, cal)
    overhead = ctx + nccl + frag + gather
    total = w + o + peak_dynamic + kv + overhead
    return {
        "weights_bytes": w,
        "gradients_bytes": g,
        "optimizer_bytes": o,
        "activations_bytes": acts + logits,
        "logits_bytes": logits,
        "kv_cache_bytes": kv,
        "overhead_bytes": overhead,
        "cuda_context_bytes": ctx,
        "comm_buffer_bytes": nccl,
        "fragmentation_bytes": frag,
        "gather_buffer_bytes": gather,
        "offloaded_bytes": memory.offloaded_bytes(m, c) if training_ else 0.0,
        "total_bytes": total,
        "capacity_bytes": c.capacity_bytes,
        "margin_bytes": c.capacity_bytes - total,
    }


def evaluate(
    task: str,
    m: ModelNums,
    c: Case,
    cal: Calibration = DEFAULT_CALIBRATION,
    site: Site = DEFAULT_SITE,
) -> dict[str, Num]:
    """Memory, time, power and cost of ``c`` (floats or arrays). Keys: see module and docs/estimators.md."""
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}", f"use one of {', '.join(TASKS)}")
    out = memory_items(task, m, c, cal)
    out["fits"] = out["total_bytes"] <= c.capacity_bytes
    count = c.tp * c.pp * c.dp
    if task in TRAIN_TASKS:
        t = training.train_step(m, c, cal)
        step = t["time_s"]
        tokens_per_s = c.batch * c.seq * c.micro_batches * c.dp / step
        mfu = flops.model_flops_per_token_train(m, c) * tokens_per_s / (count * c.peak_flops_per_s)
        gpu_w = power.gpu_power_w(c, t, cal)
        out.update(step_s=step, tokens_per_s=tokens_per_s, mfu=mfu, bubble_s=t["bubble_s"],
                   optimizer_s=t["optimizer_s"], compute_s=t["compute_s"], memory_s=t["memory_s"],
                   comm_s=t["comm_s"], host_s=t["host_s"])
        energy_j = gpu_w * count * step
        useful_tokens = c.batch * c.seq * c.micro_batches * c.dp
        useful_s = step
    else:
        t_pre = roofline.prefill(m, c, cal)
        t = roofline.decode_step(m, c, flops.decode_context(c.prompt, c.gen), cal)
        tpot = t["time_s"]
        e2e = t_pre["time_s"] + c.gen * tpot
        gpu_w = power.gpu_power_w(c, t, cal)
        pre_w = power.gpu_power_w(c, t_pre, cal)
        seqs = c.batch * c.dp  # data-parallel replicas each serve ``batch`` sequences
        ttft = roofline.prefill(m, c, cal, batch=1.0)["time_s"]  # one request alone, no queueing
        out.update(prefill_s=t_pre["time_s"], ttft_s=ttft, tpot_s=tpot, decode_tokens_per_s=seqs / tpot,
                   prefill_tokens_per_s=seqs * c.prompt / t_pre["time_s"], e2e_s=e2e,
                   output_tokens_per_s=seqs * c.gen / e2e, prefill_bound_index=bound_index(t_pre),
                   compute_s=t["compute_s"], memory_s=t["memory_s"], comm_s=t["comm_s"], host_s=t["host_s"])
        energy_j = (pre_w * t_pre["time_s"] + gpu_w * c.gen * tpot) * count
        useful_tokens = seqs * c.gen
        useful_s = e2e
    out["bound_index"] = bound_index(t)
    out["power_w"] = gpu_w
    out["energy_j_per_token"] = energy_j / useful_tokens
    tok_s = useful_tokens / useful_s
    facility_w = power.facility_power_w(gpu_w, count, site)
    out["facility_power_w"] = facility_w
    out["energy_j_per_token_facility"] = out["energy_j_per_token"] * site.pue + (
        site.host_power_w_per_gpu * count * site.pue / tok_s)
    cloud_h = cost.cloud_usd_per_hour(c.usd_per_gpu_hour, count)
    own_h = cost.owned_usd_per_hour(c.purchase_usd, facility_w, count, site)
    out["usd_per_hour_cloud"] = cloud_h
    out["usd_per_hour_owned"] = own_h
    out["usd_per_million_tokens_cloud"] = cost.usd_per_million_tokens(cloud_h, tok_s)
    out["usd_per_million_tokens_owned"] = cost.usd_per_million_tokens(own_h, tok_s)
    out["useful_tokens_per_s"] = tok_s
    out["count"] = count
    return out


def single_gpu_baseline(c: Case) -> Case:
    """The same per-GPU work on one GPU (no TP/PP/DP, no ZeRO): the denominator of scaling efficiency."""
    return replace(c, tp=1.0, pp=1.0, dp=1.0, zero=0.0)


def scaling(task: str, m: ModelNums, c: Case, out: dict[str, Num], cal: Calibration) -> dict[str, Num]:
    """Scaling efficiency ``X_n / (n · X_1)`` (X = useful tokens/s; the 1-GPU run may not fit) and
    ``effective_gpus`` = efficiency × n: "n GPUs deliver the throughput of k"."""
    base = evaluate(task, m, single_gpu_baseline(c), cal)
    if task in TRAIN_TASKS:
        per_gpu_batch = c.batch  # a DP rank's micro-batch: the single GPU runs the same micro-batches
        x1 = per_gpu_batch * c.seq * c.micro_batches / base["step_s"]
    else:
        x1 = base["useful_tokens_per_s"]
    n = out["count"]
    eff = out["useful_tokens_per_s"] / (n * x1)
    return {"scaling_efficiency": eff, "effective_gpus": eff * n}
