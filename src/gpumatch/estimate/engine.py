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
from gpumatch.estimate._num import Num, is_array, is_one, vmax, vmin, where
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.power import DEFAULT_SITE, Site
from gpumatch.vocab import ESTIMATOR_TASKS, TRAINING_TASKS

#: The estimator's names for vocabulary subsets (defined in gpumatch.vocab): TASKS is the 6 tasks it models
#: (``vocab.ESTIMATOR_TASKS``: every task but ``dev``, which is estimated as ``infer``), not ``vocab.TASKS``.
TRAIN_TASKS = TRAINING_TASKS
INFER_TASKS = tuple(t for t in ESTIMATOR_TASKS if t not in TRAINING_TASKS)
TASKS = ESTIMATOR_TASKS


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


def replica_case(c: Case) -> Case:
    """One inference replica of ``c``: the same TP × PP group with ``dp = 1``.

    Inference replicas (``dp``) do not communicate: each serves its own ``batch`` sequences on its own
    ``tp × pp`` GPUs, so its memory, times and power are those of ``dp = 1`` (no data-parallel communicator,
    pipeline stages on adjacent GPUs); throughput, power draw and cost add up over the replicas.
    """
    return c if is_one(c.dp) else replace(c, dp=1.0)


def in_flight_sequences(c: Case) -> Num:
    """Sequences in flight over all replicas: ``seqs_per_replica × dp``, or fewer when ``c.in_flight`` says the
    requests do not fill every replica (``ceil(requests / replicas)`` per replica leaves the last ones part-empty)."""
    return vmin(c.in_flight, c.seqs_per_replica * c.dp)


def memory_items(task: str, m: ModelNums, c: Case, cal: Calibration) -> dict[str, Num]:
    """Itemized bytes per GPU (see memory.py), the peak total, the capacity and the margin.

    ``total_bytes`` is the peak, which can be less than the sum of the items: in single-GPU PyTorch training
    without gradient accumulation the gradients and the activations do not peak together
    (``memory.peak_dynamic_bytes``: the peak holds the larger of the two). ``not_at_peak_bytes`` is that
    difference (items' sum − total; 0 elsewhere). Under PyTorch AMP the activations include autocast's 16-bit
    weight casts (``autocast_copies_bytes``, :func:`memory.autocast_copy_bytes`); the gradients include a tied
    embedding's second gradient (``tied_embedding_grad_bytes``, :func:`memory.tied_embedding_grad_bytes`), which
    is not at a peak where the activations are. Inference activations (logits included) are one layer's
    transient buffers, counted once. Inference is per replica (:func:`replica_case`).
    """
    training_ = task in TRAIN_TASKS
    if not training_:
        c = replica_case(c)
    w, g, o = memory.model_state_bytes(m, c, training_)
    casts: Num = 0.0
    if training_:
        acts, logits = memory.training_activation_bytes(m, c, cal)
        casts = memory.autocast_copy_bytes(m, c)  # alive with the activations (memory.py, PyTorch AMP)
        acts = acts + casts
        kv: Num = 0.0
    else:
        whole = c.seqs_per_replica * c.prompt
        chunk = where(c.prefill_chunk > 0, vmin(c.prefill_chunk, whole), whole)
        chunk = vmax(chunk, c.seqs_per_replica)  # a decode step holds one token of every sequence
        acts, logits = memory.inference_activation_bytes(m, c, chunk), 0.0
        kv = memory.kv_cache_bytes(m, c, c.prompt + c.gen)
    tied = memory.tied_embedding_grad_bytes(m, c) if training_ else 0.0
    peak_dynamic = memory.peak_dynamic_bytes(c, g, acts + logits, tied) if training_ else acts
    ctx, nccl, frag, gather = memory.overhead_bytes(m, c, o + peak_dynamic, cal)
    overhead = ctx + nccl + frag + gather
    total = w + o + peak_dynamic + kv + overhead
    return {
        "weights_bytes": w,
        "gradients_bytes": g + tied,
        "optimizer_bytes": o,
        "activations_bytes": acts + logits,
        "logits_bytes": logits,
        "autocast_copies_bytes": casts,
        "tied_embedding_grad_bytes": tied,
        "kv_cache_bytes": kv,
        "overhead_bytes": overhead,
        "cuda_context_bytes": ctx,
        "comm_buffer_bytes": nccl,
        "fragmentation_bytes": frag,
        "gather_buffer_bytes": gather,
        "offloaded_bytes": memory.offloaded_bytes(m, c) if training_ else 0.0,
        "not_at_peak_bytes": (g + tied + acts + logits - peak_dynamic) if training_ else 0.0,
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
    """Memory, time, power and cost of ``c`` (floats or arrays). Keys: see module and docs/estimators.md.

    Throughput, over all GPUs of the configuration: training ``tokens_per_s`` = tokens trained per second (every
    DP rank's ``batch × seq × micro_batches`` per step). Inference ``tokens_per_s`` (= ``output_tokens_per_s``)
    = generated tokens per second over all replicas, each request's prefill time included (``gen`` tokens per
    ``prefill + gen × TPOT``); ``decode_tokens_per_s`` = generated tokens per second of the decode steps alone
    (no prefill); ``prefill_tokens_per_s`` = prompt tokens per second during the prefill;
    ``tokens_per_s_per_replica`` = ``tokens_per_s / dp``. ``ttft_s`` = one request's prefill on an idle replica
    (no queueing); ``prefill_s`` = the prefill of a replica's whole batch (requests arriving together).
    """
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}", f"use one of {', '.join(TASKS)}")
    out = memory_items(task, m, c, cal)
    out["fits"] = out["total_bytes"] <= c.capacity_bytes
    count = c.tp * c.pp * c.dp
    if task in TRAIN_TASKS:
        t = training.train_step(m, c, cal)
        step = t["time_s"]
        tokens_per_s = c.seqs_per_replica * c.seq * c.micro_batches * c.dp / step
        mfu = flops.model_flops_per_token_train(m, c) * tokens_per_s / (count * c.peak_flops_per_s)
        gpu_w = power.gpu_power_w(c, t, cal)
        out.update(step_s=step, tokens_per_s=tokens_per_s, mfu=mfu, bubble_s=t["bubble_s"],
                   optimizer_s=t["optimizer_s"], compute_s=t["compute_s"], memory_s=t["memory_s"],
                   comm_s=t["comm_s"], host_s=t["host_s"])
        energy_j = gpu_w * count * step
        useful_tokens = c.seqs_per_replica * c.seq * c.micro_batches * c.dp
        useful_s = step
    else:
        r = replica_case(c)
        t_pre = roofline.prefill(m, r, cal)
        t = roofline.decode_step(m, r, flops.decode_context(c.prompt, c.gen), cal)
        tpot = t["time_s"]
        e2e = t_pre["time_s"] + c.gen * tpot
        gpu_w = power.gpu_power_w(r, t, cal)
        pre_w = power.gpu_power_w(r, t_pre, cal)
        seqs = in_flight_sequences(c)
        ttft = roofline.prefill(m, r, cal, batch=1.0)["time_s"]  # one request alone, no queueing
        generated = seqs * c.gen / e2e
        out.update(prefill_s=t_pre["time_s"], ttft_s=ttft, tpot_s=tpot, decode_tokens_per_s=seqs / tpot,
                   prefill_tokens_per_s=seqs * c.prompt / t_pre["time_s"], e2e_s=e2e,
                   output_tokens_per_s=generated, tokens_per_s=generated,
                   tokens_per_s_per_replica=generated / c.dp, prefill_bound_index=bound_index(t_pre),
                   requests_per_s=seqs / e2e, itl_s=tpot,
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
    ``effective_gpus`` = efficiency × n: "n GPUs deliver the throughput of k".

    ``X_1`` runs the same per-GPU work on one GPU: a DP rank's micro-batches (training) or one full replica's
    sequences (inference). The efficiency is capped at 1: the one-GPU baseline runs the whole optimizer update,
    while ZeRO-1..3 shards it over the DP ranks, so a 64-GPU ZeRO-3 step can be cheaper per GPU than the baseline
    (70B on MI325X: 0.53 s of Adam on one GPU, 0.008 s per rank on 64; step 17.05 s vs 16.52 s, "103 %"). That
    is less work per GPU, not better than linear scaling, so it reads 100 %.
    """
    base = evaluate(task, m, replace(single_gpu_baseline(c), in_flight=float("inf")), cal)
    if task in TRAIN_TASKS:
        per_gpu_batch = c.seqs_per_replica  # a DP rank's micro-batch: the single GPU runs the same micro-batches
        x1 = per_gpu_batch * c.seq * c.micro_batches / base["step_s"]
    else:
        x1 = base["useful_tokens_per_s"]
    n = out["count"]
    eff = vmin(out["useful_tokens_per_s"] / (n * x1), 1.0)
    return {"scaling_efficiency": eff, "effective_gpus": eff * n}
