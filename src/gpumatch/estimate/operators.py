"""A workload's operators as points for a roofline plot: FLOP, bytes and attainable rate per layer and phase.

The same quantities :func:`gpumatch.estimate.roofline._forward_layer` charges each operator class of one layer,
per GPU (tensor-parallel shard): the layer's GEMMs (weights + activations in and out), the attention core
(K/V read + Q/O), over the phases a task has (inference: prefill over ``batch × prompt`` tokens, decode of
``batch`` tokens at the mean context; training: one forward over ``batch × seq`` tokens, whose backward has the
same intensity). The elementwise work has no FLOP and is left out of a roofline, and so is the time an MoE layer's
grouped expert GEMMs lose by not overlapping their weight stream with their compute
(:func:`gpumatch.estimate.roofline._expert_overlap_lost`): it is time, not another operator's FLOP or bytes.

Arithmetic intensity ``I = FLOP / bytes`` (Williams, Waterman & Patterson 2009, "Roofline", CACM 52(4)); the
attainable rate is ``min(peak · eta_c(FLOP per call), I · bandwidth · eta_m(bytes per call))`` with the
Calibration's efficiency curves.
"""

from __future__ import annotations

from typing import Any

from gpumatch.estimate import flops
from gpumatch.estimate._num import vmin
from gpumatch.estimate.api import model_arch, resolve_gpu
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.case import model_nums
from gpumatch.estimate.memory import layer_weight_bytes
from gpumatch.estimate.options import build_case
from gpumatch.estimate.request import Request
from gpumatch.estimate.roofline import GEMMS_PER_LAYER
from gpumatch.models.arch import ModelArch
from gpumatch.vocab import TRAINING_TASKS


def operator_points(model: ModelArch | str, gpu: str, request: Request | None = None, *,
                    calibration: Calibration | None = None) -> dict[str, Any]:
    """The roofline of ``gpu`` (``peak_flops_per_s`` of the precision used, ``bandwidth_bytes_per_s``) and one
    point per operator and phase: ``name``, ``phase``, ``flops``, ``bytes``, ``intensity`` (FLOP/B) and
    ``attainable_flops_per_s``. ``request`` as :func:`gpumatch.estimate.estimate` takes it."""
    cal = calibration or DEFAULT_CALIBRATION
    arch, spec = model_arch(model), resolve_gpu(gpu)
    req = request or Request()
    c, _ = build_case(arch, spec, req)
    m = model_nums(arch)
    peak, bw = float(c.peak_flops_per_s), float(spec.memory_bandwidth_bytes_per_s)
    if req.task in TRAINING_TASKS:
        phases = [("train step", float(c.seqs_per_replica * c.seq), float(flops.prefill_context(c.seq)))]
    else:
        phases = [("prefill", float(c.seqs_per_replica * c.prompt), float(flops.prefill_context(c.prompt))),
                  ("decode", float(c.seqs_per_replica), float(flops.decode_context(c.prompt, c.gen)))]
    points = []
    for phase, tokens, ctx in phases:
        w_bytes = float(layer_weight_bytes(m, c, m.layer_matmul_params_active)) / float(c.tp)
        act_io = tokens * float(c.act_bytes) * (m.qkv_width + 2.0 * m.hidden + 3.0 * m.mlp_inner_width) * 2.0 / c.tp
        kv_shard = float(vmin(c.tp, m.kv_shard_heads))
        batch = float(c.seqs_per_replica)
        kv_read = batch * float(flops.effective_context(m, ctx)) * m.kv_elems_per_token_layer * c.kv_bytes / kv_shard
        if phase != "decode":
            kv_read = 0.0  # prefill and training attend the K/V they just produced (roofline.prefill)
        qo = tokens * float(c.act_bytes) * 2.0 * m.heads * m.head_dim / c.tp
        ops = [("GEMMs", float(flops.layer_gemm_flops(m, tokens)) / float(c.tp), w_bytes + act_io, GEMMS_PER_LAYER,
                False),
               ("attention", float(flops.attention_flops(m, tokens, ctx)) / float(c.tp), float(kv_read + qo), 1.0,
                True)]
        for name, f, b, calls, attention in ops:
            eta_c = float(cal.attention_efficiency(f / calls) if attention else cal.gemm_efficiency(f / calls))
            eta_m = float(cal.memory_efficiency(b / calls))
            points.append({"name": name, "phase": phase, "flops": f, "bytes": b, "intensity": f / b,
                           "attainable_flops_per_s": min(peak * eta_c, f / b * bw * eta_m)})
    return {"gpu": spec.name, "peak_flops_per_s": peak, "bandwidth_bytes_per_s": bw,
            "ridge_flops_per_byte": peak / bw, "points": points}
