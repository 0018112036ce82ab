"""Training step time: micro-batches through a 1F1B pipeline, TP collectives, DP gradient sync, optimizer.

Sources:
- Step = ``(m + p − 1)`` micro-batch times on the slowest stage (1F1B: the bubble is ``(p − 1)/m`` of the
  ideal time; Narayanan et al. 2021, section 2.2.1).
- Megatron tensor parallelism: 2 all-reduces of the hidden states per layer in forward and 2 in backward
  (Shoeybi et al. 2019, section 3; with sequence parallelism the same volume as reduce-scatter +
  all-gather, Korthikanti et al. 2022 section 4.2.2); full recompute repeats the forward ones.
- Data parallel: gradient all-reduce of the trainable parameters (ZeRO-1/2: reduce-scatter + all-gather,
  same volume; ZeRO-3/FSDP: parameters all-gathered in forward and in backward and gradients
  reduce-scattered, 1.5× the volume; Rajbhandari et al. 2020 section 7), overlapped with the backward pass
  by ``Calibration.dp_overlap_fraction`` -- except the ZeRO-1/2 parameter all-gather after the optimizer
  step, which is exposed.
- Optimizer: memory-bound; it moves ``optimizer_traffic_factor × (state + gradient + weight)`` bytes per
  trainable parameter on the GPU's shard (the stored weight: fp32 under PyTorch AMP).
- ZeRO-Offload (Ren et al. 2021): the CPU updates the optimizer shard at ``cpu_optimizer_params_per_s`` and
  gradients / weights cross PCIe once per step (not overlapped here: a conservative bound).
- PyTorch AMP: autocast's weight casts, once per forward and again in a full recompute (``autocast_cast_s``).
- QLoRA dequantizes the 4-bit base weights before each use: read 4-bit, write and read 16-bit.
- LM head and loss: the head GEMMs are compute-bound; the cross-entropy around them runs as separate
  memory-bound kernels moving ``Calibration.loss_bytes_per_logit`` per logit (counted from a kernel profile).
"""

from __future__ import annotations

from gpumatch.estimate import comm, flops
from gpumatch.estimate._num import Num, vmax, where
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.memory import (
    FP32_BYTES,
    adapter_params_per_gpu,
    autocast_copy_bytes,
    layers_per_stage,
    stored_weight_bytes,
    weight_params_per_gpu,
)
from gpumatch.estimate.roofline import (
    GEMMS_PER_LAYER,
    _acc,
    _result,
    elementwise_bytes,
    head_weight_bytes,
    host_time,
    op,
)


def micro_batch_time(m: ModelNums, c: Case, cal: Calibration) -> tuple[Num, Num, Num, Num]:
    """(compute-bound s, memory-bound s, TP comm s, host s) of one micro-batch on the slowest stage."""
    tokens = c.seqs_per_replica * c.seq
    gemm_mult, _ = flops.training_multipliers(c)
    attn_fwd, attn_bwd = flops.attention_training_split(c)
    lora = (1.0 - c.full_train) * 6.0 * tokens * m.lora_params_per_rank_layer * c.lora_rank
    g_flops = (flops.layer_gemm_flops(m, tokens) * gemm_mult + lora) / c.tp
    w_bytes = m.layer_matmul_params_active * c.weight_bytes / c.tp
    dequant = where(c.weight_bytes < 1.0, w_bytes + 2.0 * 2.0 * m.layer_matmul_params_active / c.tp, 0.0)
    act_io = tokens * c.act_bytes * (m.qkv_width + 2.0 * m.hidden + 3.0 * m.mlp_inner_width) * 2.0 / c.tp
    g_bytes = (w_bytes + act_io) * gemm_mult + dequant * (2.0 + c.rc_full)
    gemm = op(g_flops, g_bytes, GEMMS_PER_LAYER * gemm_mult, c, cal)
    ctx = flops.prefill_context(c.seq)
    a_flops = flops.attention_flops(m, tokens, ctx) / c.tp
    a_bytes = tokens * c.act_bytes * (m.qkv_width + m.heads * m.head_dim) * 2.0 / c.tp
    attn_f = op(a_flops * attn_fwd, a_bytes * attn_fwd, attn_fwd, c, cal, attention=True)
    attn_b = op(a_flops * attn_bwd, a_bytes * attn_bwd, attn_bwd, c, cal, attention=True, backward=True)
    elem = op(0.0, elementwise_bytes(m, c, tokens, cal) * (3.0 + c.rc_full), 1.0, c, cal)
    comp, mem = _acc([gemm, attn_f, attn_b, elem])
    head_mult = 2.0 + c.full_train
    # the LM-head GEMMs (compute-bound: logits written once, read by both backward GEMMs) and the loss kernels
    # around them (memory-bound, separate kernels: fp32 cast, log-softmax forward and backward, NLL backward)
    logits = tokens * m.vocab / c.tp
    head = op(flops.head_flops(m, tokens) * head_mult / c.tp,
              head_weight_bytes(m, c) / c.tp + logits * c.act_bytes * head_mult, head_mult, c, cal)
    loss = op(0.0, logits * cal.loss_bytes_per_logit, 5.0, c, cal)
    h_comp, h_mem = _acc([head, loss])
    layers = layers_per_stage(m, c.pp)
    bw, hop = comm.link(c, c.tp, cal)
    ar = comm.all_reduce_s(tokens * m.hidden * c.act_bytes, c.tp, bw, hop, cal)
    tp_comm = layers * ar * (4.0 + 2.0 * c.rc_full) * (1.0 - cal.tp_overlap_fraction)
    comp, mem = layers * comp + h_comp, layers * mem + h_mem + autocast_cast_s(m, c, cal)
    host = host_time(comp + mem + tp_comm, layers, 3.0 + c.rc_full, 0.0, c, cal)
    return comp, mem, tp_comm, host


def autocast_cast_s(m: ModelNums, c: Case, cal: Calibration) -> Num:
    """Memory-bound seconds of PyTorch AMP's weight casts in one micro-batch (0 without ``c.autocast``).

    Autocast casts each fp32 matmul weight to 16 bit at its first use in a forward (read 4 bytes, write
    ``weight_bytes``; the cache makes it once per autocast region) and again in a full recompute, which re-enters
    autocast (aten/src/ATen/autocast_mode.cpp ``cached_cast``; ``torch.utils.checkpoint`` restores the autocast
    state). The weights: :func:`gpumatch.estimate.memory.autocast_copy_bytes`.
    """
    elems = autocast_copy_bytes(m, c) / c.weight_bytes
    _, t = op(0.0, elems * (FP32_BYTES + c.weight_bytes) * (1.0 + c.rc_full), 1.0, c, cal)
    return c.autocast * t


def trainable_params_per_gpu(m: ModelNums, c: Case) -> Num:
    """Trainable parameters per GPU before ZeRO sharding (per stage, per TP rank)."""
    full = weight_params_per_gpu(m, c) * where(c.zero >= 3, c.dp, 1.0)
    return where(c.full_train > 0, full, adapter_params_per_gpu(m, c))


def train_step(m: ModelNums, c: Case, cal: Calibration) -> dict[str, Num]:
    """One optimizer step of ``micro_batches`` micro-batches of ``batch × seq`` tokens per DP rank."""
    comp, mem, tp_comm, host = micro_batch_time(m, c, cal)
    t_mb = comp + mem + tp_comm + host
    slots = c.micro_batches + c.pp - 1.0
    bubble_share = slots / c.micro_batches
    # pipeline sends: forward activations and backward gradients per micro-batch per boundary
    bw_pp, hop_pp = comm.link(c, c.tp * c.dp * c.pp, cal)
    tokens = c.seqs_per_replica * c.seq
    pp_comm = where(c.pp > 1, 2.0 * slots * comm.p2p_s(tokens * m.hidden * c.act_bytes / c.tp, bw_pp, hop_pp, cal), 0.0)
    # data-parallel gradient sync (and ZeRO-3 parameter gathers), partly hidden by the last backward
    trainable = trainable_params_per_gpu(m, c)
    grad_b = where(c.full_train > 0, c.grad_bytes, c.adapter_bytes)
    bw_dp, hop_dp = comm.link(c, c.tp * c.dp, cal)
    sync = comm.all_reduce_s(trainable * grad_b, c.dp, bw_dp, hop_dp, cal)
    gathers = where(c.zero >= 3, 2.0 * c.micro_batches * comm.all_gather_s(
        weight_params_per_gpu(m, c) * c.dp * c.weight_bytes, c.dp, bw_dp, hop_dp, cal), 0.0)
    hidden = cal.dp_overlap_fraction * (t_mb * 2.0 / 3.0 + where(c.zero >= 3, c.micro_batches * t_mb, 0.0))
    # ZeRO-1/2 reduce-scatter gradients during backward but all-gather the updated parameters after the
    # optimizer step, where nothing hides it; ZeRO-3 gathers lazily in the next forward (``gathers``)
    after_step = where((c.zero >= 1) * (c.zero < 3), 0.5 * sync, 0.0)
    overlappable = sync * where(c.zero >= 1, 0.5, 1.0) + gathers
    dp_comm = vmax(overlappable - hidden, 0.0) + after_step
    # optimizer on this GPU's shard of the trainable parameters
    shard = trainable / where(c.zero >= 1, c.dp, 1.0)
    w_b = where(c.full_train > 0, stored_weight_bytes(c), c.adapter_bytes)  # fp32 parameters under AMP
    opt_b = where(c.full_train > 0, c.opt_bytes, c.adapter_opt_bytes)
    opt_bytes = shard * (opt_b + grad_b + w_b) * cal.optimizer_traffic_factor
    _, t_gpu_opt = op(0.0, opt_bytes, 1.0, c, cal)
    # ZeRO-Offload: gradients go down and updated 16-bit weights come back over PCIe; the CPU updates the shard
    pcie = c.pcie_bytes_per_s * cal.pcie_efficiency
    t_cpu_opt = shard / cal.cpu_optimizer_params_per_s + shard * (grad_b + w_b) / pcie
    t_opt = where(c.offload > 0, t_cpu_opt, t_gpu_opt)
    return _result(
        comp * slots,
        mem * slots + t_opt,
        tp_comm * slots + pp_comm + dp_comm,
        host * slots + cal.train_step_overhead_s,
    ) | {"bubble_s": (c.pp - 1.0) * t_mb, "micro_batch_s": t_mb, "optimizer_s": t_opt, "bubble_share": bubble_share}
