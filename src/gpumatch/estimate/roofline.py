"""Time: per-operator roofline with size-dependent efficiencies (estimator-formulas.md section D).

Each operator class of a layer (the GEMMs, the attention core, the elementwise work) takes
``max(FLOPs / (peak · eta_c(FLOPs per call)), bytes / (bandwidth · eta_m(bytes per call)))``; kernels add a
fixed launch/tail cost, tensor-parallel collectives are added as exposed time, and each step adds a host
overhead (Williams, Waterman & Patterson 2009, "Roofline"; efficiencies from :class:`Calibration`).
Each function returns a dict of seconds: ``time_s`` plus its split into ``compute_s`` (compute-bound
operators), ``memory_s`` (memory-bound operators), ``comm_s`` and ``host_s``, from which the dominant
bound is read.
"""

from __future__ import annotations

from dataclasses import replace

from gpumatch.estimate import comm, flops
from gpumatch.estimate._num import Num, is_one, vmax, vmin, where
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.kernels import engine_kernels_per_layer
from gpumatch.estimate.memory import layer_weight_bytes, layers_per_stage

GEMMS_PER_LAYER = 4.0
"""QKV (fused), output projection, gate+up (fused), down (as vLLM and the bench model run them)."""
EXPERT_GEMMS = 2.0
"""Of those, the ones an MoE layer runs grouped over its routed experts (gate+up, down)."""

BOUNDS = ("compute", "memory", "interconnect", "host")


def op(flops_: Num, bytes_: Num, calls: Num, c: Case, cal: Calibration, attention: bool = False,
       backward: bool = False, prefill: bool = False) -> tuple[Num, Num]:
    """(time as compute-bound, time as memory-bound) of ``calls`` equal kernels; the larger one applies.

    ``flops / (peak · eta(flops/calls))`` with ``eta(x) = eta_max · x / (x + x_half)`` simplifies to
    ``(flops + calls · x_half) / (peak · eta_max)``: the half-efficiency size acts as a fixed cost per call.
    GEMMs on an 8-bit or 4-bit path get ``eta_max × low_precision_gemm_efficiency_ratio`` (measured fp8/bf16);
    prefill attention (``prefill``) runs at ``c.attention_peak_flops_per_s`` (the activations' path, not the
    weights'), with ``engine_attention_efficiency_max`` in vLLM, SGLang and TensorRT-LLM (``c.engine_attention``)
    and ``attention_efficiency_max`` (PyTorch SDPA, measured) otherwise; decode attention keeps the weights' peak
    and ``attention_efficiency_max``, whose fixed cost per call (``attention_half_flops``) the decode fit measured;
    attention backward kernels ``eta_max × attention_backward_efficiency_ratio``.
    """
    peak = c.peak_flops_per_s
    if attention:
        c_max, c_half = cal.attention_efficiency_max, cal.attention_half_flops
        if prefill:  # the engines' own prefill kernels (FlashAttention-3, FlashInfer, FMHA) vs PyTorch's SDPA
            c_max = where(c.engine_attention > 0, cal.engine_attention_efficiency_max, c_max)
            peak = where(c.attention_peak_flops_per_s > 0, c.attention_peak_flops_per_s, peak)
        if backward:
            c_max = c_max * cal.attention_backward_efficiency_ratio
    else:
        low = c.low_precision_gemm * (1.0 - cal.low_precision_gemm_efficiency_ratio)
        c_max, c_half = cal.gemm_efficiency_max * (1.0 - low), cal.gemm_half_flops
    tc = (flops_ + calls * c_half * (flops_ > 0)) / (peak * c_max)
    tm = (bytes_ + calls * cal.memory_half_bytes) / (c.bandwidth_bytes_per_s * cal.memory_efficiency_max)
    return tc, tm


def _acc(parts: list[tuple[Num, Num]]) -> tuple[Num, Num]:
    """Sum operator times, splitting each into the compute-bound or the memory-bound share."""
    comp: Num = 0.0
    mem: Num = 0.0
    for tc, tm in parts:
        is_c = tc >= tm
        comp = comp + where(is_c, tc, 0.0)
        mem = mem + where(is_c, 0.0, tm)
    return comp, mem


def _result(comp: Num, mem: Num, comm_: Num, host: Num) -> dict[str, Num]:
    return {"time_s": comp + mem + comm_ + host, "compute_s": comp, "memory_s": mem, "comm_s": comm_, "host_s": host}


def _forward_layer(m: ModelNums, c: Case, tokens: Num, context: Num, cal: Calibration) -> list[tuple[Num, Num]]:
    """Operators of one layer's forward over ``tokens`` tokens attending ``context`` keys each (per GPU)."""
    w_params = m.layer_matmul_params_active + _expert_weights_beyond_top_k(m, tokens, cal)
    w_bytes = layer_weight_bytes(m, c, w_params) / c.tp
    act_io = tokens * c.act_bytes * (m.qkv_width + 2.0 * m.hidden + 3.0 * m.mlp_inner_width) * 2.0 / c.tp
    gemm = op(flops.layer_gemm_flops(m, tokens) / c.tp, w_bytes + act_io, GEMMS_PER_LAYER, c, cal)
    kv_shard = vmin(c.tp, m.kv_shard_heads)
    kv_read = (c.seqs_per_replica * flops.effective_context(m, context) * m.kv_elems_per_token_layer * c.kv_bytes
               / kv_shard)
    qo = tokens * c.act_bytes * 2.0 * m.heads * m.head_dim / c.tp
    tc, tm = op(flops.attention_flops(m, tokens, context) / c.tp, kv_read + qo, 1.0, c, cal, attention=True)
    # without split-KV, one thread block per (sequence, KV head) streams the cache: too few blocks starve HBM; a
    # step decodes at least one sequence (a time-averaged batch under 1 is that one sequence, part of the time)
    blocks = vmax(c.seqs_per_replica, 1.0) * m.kv_shard_heads / kv_shard
    starved = vmax(1.0, cal.decode_attention_full_bw_blocks * (1.0 - c.split_kv) / blocks)
    attn = (tc, tm * starved)
    elem = op(0.0, elementwise_bytes(m, c, tokens, cal), 1.0, c, cal)
    return [gemm, attn, elem, _expert_overlap_lost(m, c, tokens, cal)]


def _expert_weights_beyond_top_k(m: ModelNums, tokens: Num, cal: Calibration) -> Num:
    """Expert weights per layer (averaged) that ``tokens`` tokens' grouped GEMMs are worth beyond the top-k: the other
    experts they touch (:func:`flops.moe_extra_weight_params`) and the grouped GEMM's penalty at a few tokens per
    expert (:func:`flops.grouped_expert_penalty_params`); 0 for a dense model."""
    return (flops.moe_extra_weight_params(m, tokens)
            + flops.grouped_expert_penalty_params(m, tokens, cal.grouped_expert_half_tokens))


def _expert_overlap_lost(m: ModelNums, c: Case, tokens: Num, cal: Calibration) -> tuple[Num, Num]:
    """What the routed experts' grouped GEMMs (gate/up, down) of one layer over ``tokens`` tokens take beyond the
    layer's GEMM operator, per GPU: the shorter of their compute time and the time to stream the weights of every
    expert the tokens touch (the routed ``k`` and :func:`_expert_weights_beyond_top_k`).

    A grouped GEMM gives each expert ``u = tokens · k / touched`` rows, too few for the expert's weights to be
    reused across many row tiles while the next ones load, so loading and multiplying add up instead of overlapping
    as in a dense GEMM (where the longer of the two is the time). The layer's GEMM operator charges the longer; this
    adds the shorter: the weights in a prefill, the (tiny) FLOPs in a decode step. Measured with
    ``torch._grouped_mm`` (bf16) on an H100 SXM (2026-12-07, ``benchmarks/gpu/probe_moe_prefill.py``,
    tests/data/measurements/2026-12-07-h100-moe-prefill-probe.json): over 32 cases -- the expert slices of eight
    MoE models and TP layouts at 512-16,384 tokens, 16-4,096 rows per expert -- the grouped time is the dense GEMM's
    time at the same shapes plus the touched weights at 0.88 × 3.35 TB/s within 6 % on average (largest 21 %,
    Qwen3-235B-A22B at TP 8), where the longer of the two alone is 1.05 to 2.2 times short. Nothing for a dense
    model. The FLOPs carry no fixed cost per call here: a few tokens per expert cost their bytes."""
    if flops.routed_expert_params(m) <= 0.0:
        return 0.0, 0.0
    flops_, bytes_ = _routed_work(m, c, tokens, cal)
    compute, _ = op(flops_, 0.0, 0.0, c, cal)
    _, stream = op(0.0, bytes_, EXPERT_GEMMS, c, cal)
    shorter_is_compute = compute < stream
    return where(shorter_is_compute, compute, 0.0), where(shorter_is_compute, 0.0, stream)


def routed_experts_s(m: ModelNums, c: Case, tokens: Num, cal: Calibration) -> Num:
    """Seconds one MoE layer's routed experts take per GPU in a forward over ``tokens`` tokens, as the layer's
    operators charge them (:func:`_forward_layer`): the longer of their FLOPs at the GEMM efficiency and the
    stream of the weights of every expert the tokens touch (each with the fixed cost of :data:`EXPERT_GEMMS`
    calls), plus the overlap they lose (:func:`_expert_overlap_lost`, the shorter of the two). This is what a
    fused-MoE kernel microbenchmark times (vLLM's ``benchmarks/kernels/benchmark_moe.py``: both grouped GEMMs, the
    activation between them and the top-k sum, for ``tokens`` tokens); the published ones are held against it in
    ``tests/reference/test_moe_kernel_times.py``. 0 for a dense model."""
    if flops.routed_expert_params(m) <= 0.0:
        return 0.0
    compute, stream = op(*_routed_work(m, c, tokens, cal), EXPERT_GEMMS, c, cal)
    lost_compute, lost_stream = _expert_overlap_lost(m, c, tokens, cal)
    return vmax(compute, stream) + lost_compute + lost_stream


def _routed_work(m: ModelNums, c: Case, tokens: Num, cal: Calibration) -> tuple[Num, Num]:
    """(FLOPs, weight bytes) per GPU of one MoE layer's routed experts over ``tokens`` tokens: the routed ``k``
    experts' GEMMs, and the weights of every expert the tokens touch (:func:`_expert_weights_beyond_top_k`)."""
    routed = flops.routed_expert_params(m)
    weights = routed + _expert_weights_beyond_top_k(m, tokens, cal)
    return 2.0 * tokens * routed / c.tp, weights * c.weight_bytes / c.tp


def head_weight_bytes(m: ModelNums, c: Case) -> Num:
    """Bytes of the LM head (``V·h``, tied or not, before TP) at ``c.edge_weight_bytes``: 16-bit in a quantized
    checkpoint (:func:`gpumatch.estimate.precision.edge_precision`)."""
    return m.vocab * m.hidden * c.edge_weight_bytes


def elementwise_bytes(m: ModelNums, c: Case, tokens: Num, cal: Calibration) -> Num:
    """Forward bytes of one layer's non-GEMM ops (norms, RoPE, residuals, activation) per GPU.

    Work on the hidden width is split over TP ranks only under sequence parallelism; MLP-width work always.
    ``c.fused`` selects the fused-kernel byte counts (serving engines) over the eager PyTorch ones.
    """
    eager = 1.0 - c.fused
    c_h = c.fused * cal.fused_elementwise_bytes_per_token_hidden + eager * cal.elementwise_bytes_per_token_hidden
    c_f = c.fused * cal.fused_elementwise_bytes_per_token_ffn + eager * cal.elementwise_bytes_per_token_ffn
    per_token = c_h * m.hidden / where(c.seq_parallel > 0, c.tp, 1.0) + c_f * m.mlp_inner_width / c.tp
    return tokens * per_token * c.act_bytes / 2.0


def host_time(
    gpu_s: Num, layers: Num, passes: Num, fixed_s: float, c: Case, cal: Calibration, graphs: Num = None,
    engine_kernels: Num = None,
) -> Num:
    """Host-side time of a step: kernel gaps, a fixed per-step cost, and -- in eager mode -- whatever part of
    the CPU's kernel dispatch (``eager_kernels_per_layer`` launches of ``eager_launch_s`` per layer and pass)
    the GPU work does not hide (dispatch runs ahead asynchronously, so the step takes the longer of the two).
    ``graphs`` overrides ``c.graphs`` (prefill is dispatched eagerly: 0). Serving engines (``c.fused``) launch
    ``engine_kernels`` per layer (:func:`gpumatch.estimate.kernels.engine_kernels_per_layer`; by default
    ``kernels_per_layer``) instead of eager PyTorch's ``eager_kernels_per_layer``; every kernel costs
    ``kernel_overhead_s`` of GPU time beyond its bytes, a plain PyTorch step ``kernels_per_layer`` of them.
    """
    fused_kernels = cal.kernels_per_layer if engine_kernels is None else engine_kernels
    per_layer = c.fused * fused_kernels + (1.0 - c.fused) * cal.kernels_per_layer
    gaps = layers * passes * per_layer * cal.kernel_overhead_s
    eager = 1.0 - (c.graphs if graphs is None else graphs)
    kernels = c.fused * fused_kernels + (1.0 - c.fused) * cal.eager_kernels_per_layer
    cpu = eager * layers * passes * kernels * cal.eager_launch_s
    return gaps + fixed_s + vmax(cpu - gpu_s - gaps, 0.0)


def _tp_allreduces(m: ModelNums, c: Case, tokens: Num, count: Num, cal: Calibration) -> Num:
    """``count`` all-reduces of the hidden states of ``tokens`` tokens over the TP group."""
    if is_one(c.tp):
        return 0.0
    bw, hop = comm.link(c, c.tp, cal)
    return count * comm.all_reduce_s(tokens * m.hidden * c.act_bytes, c.tp, bw, hop, cal)


def _pp_hops(m: ModelNums, c: Case, tokens: Num, cal: Calibration) -> Num:
    """One activation send across every pipeline boundary."""
    if is_one(c.pp):
        return 0.0
    bw, hop = comm.link(c, c.tp * c.dp * c.pp, cal)
    return where(c.pp > 1, (c.pp - 1.0) * comm.p2p_s(tokens * m.hidden * c.act_bytes, bw, hop, cal), 0.0)


def pipeline_micro_batches(c: Case, seqs: Num) -> Num:
    """Micro-batches a pipeline keeps in flight: ``min(p, max(seqs, 1))`` for a serving engine (``c.fused``),
    1 for a plain PyTorch run, whose stages run one after another (no overlap).

    vLLM runs ``pipeline_parallel_size`` virtual engines (V0) / up to ``pp`` concurrent batches (V1 batch queue)
    and TensorRT-LLM's in-flight batching splits the running batch into ``pp`` micro-batches, so every stage
    works on one of them while the others are in the other stages (GPipe, Huang et al. 2019, section 2.2); a
    sequence cannot be split, so there are never more micro-batches than sequences. Hugging Face
    ``device_map`` (``infer``) is naive model parallelism: one stage works at a time.
    """
    if is_one(c.pp):
        return 1.0
    return where(c.fused > 0, vmin(c.pp, vmax(seqs, 1.0)), 1.0)


def _stages(
    m: ModelNums, c: Case, parts: list[tuple[Num, Num]], head: tuple[Num, Num], tp_ar: Num, hops: Num,
    fixed_s: float, cal: Calibration, graphs: Num = None,
) -> tuple[dict[str, Num], dict[str, Num]]:
    """(latency of one micro-batch through every stage, time of the slowest stage for it) from one layer's
    operators ``parts``, the LM head (on the last stage), one layer's TP collectives ``tp_ar`` and the stage
    hops. Stages hold ``ceil(L/p)`` layers each (the worst stage), so the path crosses ``p · ceil(L/p)``."""
    lps = layers_per_stage(m, c.pp)
    layers = lps * c.pp
    comp, mem = _acc(parts)
    h_comp, h_mem = _acc([head])
    comm_ = layers * tp_ar + hops
    l_comp, l_mem = layers * comp + h_comp, layers * mem + h_mem
    kernels = engine_kernels_per_layer(m, c)
    host = host_time(l_comp + l_mem + comm_, layers, 1.0, fixed_s, c, cal, graphs=graphs, engine_kernels=kernels)
    s_comp, s_mem, s_comm = lps * comp + h_comp, lps * mem + h_mem, lps * tp_ar
    s_host = host_time(s_comp + s_mem + s_comm, lps, 1.0, fixed_s, c, cal, graphs=graphs, engine_kernels=kernels)
    return _result(l_comp, l_mem, comm_, host), _result(s_comp, s_mem, s_comm, s_host)


def _combine(lat: dict[str, Num], stage: dict[str, Num], weight: Num, steady: bool) -> dict[str, Num]:
    """Pipeline time from one micro-batch's latency and the slowest stage's time per micro-batch.

    ``steady`` (decode, micro-batches cycling): a sequence's next token waits for its micro-batch to come back,
    ``max(latency, weight · stage)`` with ``weight`` micro-batches sharing the slowest stage. Otherwise (one
    prefill of ``weight`` micro-batches, fill and drain): ``latency + (weight - 1) · stage``. One micro-batch
    (``pp = 1``, or no overlap) gives the latency unchanged.
    """
    keys = ("compute_s", "memory_s", "comm_s", "host_s")
    if is_one(weight):
        return lat
    if steady:
        cyc = weight * stage["time_s"]
        use = cyc > lat["time_s"]
        out = {k: where(use, weight * stage[k], lat[k]) for k in keys}
    else:
        out = {k: lat[k] + (weight - 1.0) * stage[k] for k in keys}
    return _result(out["compute_s"], out["memory_s"], out["comm_s"], out["host_s"])


def decode_step(m: ModelNums, c: Case, context: Num, cal: Calibration) -> dict[str, Num]:
    """One decode step: ``batch`` sequences, one new token each, attending ``context`` cached tokens.

    ``time_s`` is the time between two tokens of a sequence (TPOT). A token crosses every stage
    (``pp · ceil(L/pp)`` layers and ``pp − 1`` hops). A serving engine splits the batch into
    :func:`pipeline_micro_batches` ``k`` micro-batches of ``batch / k`` sequences that cycle through the stages
    together, so TPOT = ``max(latency of a micro-batch of batch/k, k × the slowest stage's time for it)`` and the
    throughput ``batch / TPOT``; a plain PyTorch run (``k = 1``) keeps the whole batch on one stage at a time.
    """
    k = pipeline_micro_batches(c, c.seqs_per_replica)
    mc = c if is_one(k) else replace(c, seqs_per_replica=c.seqs_per_replica / k)
    tokens = mc.seqs_per_replica
    parts = _forward_layer(m, mc, tokens, context, cal)
    head = op(flops.head_flops(m, tokens) / c.tp, head_weight_bytes(m, c) / c.tp, 1.0, c, cal)
    lat, stage = _stages(m, mc, parts, head, _tp_allreduces(m, c, tokens, 2.0, cal), _pp_hops(m, c, tokens, cal),
                         cal.decode_step_overhead_s, cal)
    return _combine(lat, stage, k, steady=True)


def prefill_attention_s(m: ModelNums, c: Case, cal: Calibration) -> Num:
    """Seconds of the prefill attention kernels of one prompt of ``c.prompt`` tokens (causal, every layer on the
    path: ``pp · ceil(L/pp)``), as :func:`prefill` counts them. The rest of a prefill -- the projections, the MLP,
    the norms, the collectives -- reads the weights once for every token of a pass, whichever prompt it belongs
    to, while attention is each prompt's own (its queries against its own keys): a serving pass that packs
    several prompts pays the linear work once for all their tokens and the attention once per prompt
    (:mod:`gpumatch.estimate.replay`, :mod:`gpumatch.estimate.serving`)."""
    tokens = c.prompt
    ctx = flops.prefill_context(c.prompt)
    tc, tm = op(flops.attention_flops(m, tokens, ctx) / c.tp, tokens * c.act_bytes * m.qkv_width * 2.0 / c.tp,
                1.0, c, cal, attention=True, prefill=True)
    return layers_per_stage(m, c.pp) * c.pp * vmax(tc, tm)


def prefill_linear_s(m: ModelNums, c: Case, cal: Calibration) -> Num:
    """Seconds of a prefill forward of ``c.prompt`` tokens without its attention kernels: the work a pass does
    once for all the tokens it holds (:func:`prefill_attention_s`). ``prefill_linear_s(B + T) -
    prefill_linear_s(B)`` is what ``T`` prompt tokens add to a pass of ``B`` decode rows: nothing while the pass
    stays bound by its weight reads, their FLOPs once it is compute-bound."""
    return prefill(m, c, cal, batch=1.0)["time_s"] - prefill_attention_s(m, c, cal)


def prefill(m: ModelNums, c: Case, cal: Calibration, batch: Num = None) -> dict[str, Num]:
    """A causal forward over ``batch × prompt`` tokens (``batch``: ``c.seqs_per_replica`` by default); logits of the
    last position only. Prefill kernels are dispatched one by one (no CUDA graph), as plain PyTorch and most engines
    run variable-length prefills. With pipeline stages a serving engine splits the prompts into
    :func:`pipeline_micro_batches` ``k`` micro-batches that follow each other through the stages (fill and drain:
    the latency of one plus ``k − 1`` times the slowest stage)."""
    if batch is None:
        batch = c.seqs_per_replica
    k = pipeline_micro_batches(c, batch)
    batch = batch / k if not is_one(k) else batch
    tokens = batch * c.prompt
    ctx = flops.prefill_context(c.prompt)
    parts = _forward_layer(m, c, tokens, ctx, cal)
    # the KV "read" of a prefill is the K/V just produced: already in the GEMM outputs
    parts[1] = op(flops.attention_flops(m, tokens, ctx) / c.tp,
                  tokens * c.act_bytes * m.qkv_width * 2.0 / c.tp, 1.0, c, cal, attention=True, prefill=True)
    head = op(flops.head_flops(m, batch) / c.tp, head_weight_bytes(m, c) / c.tp, 1.0, c, cal)
    lat, stage = _stages(m, c, parts, head, _tp_allreduces(m, c, tokens, 2.0, cal), _pp_hops(m, c, tokens, cal),
                         cal.prefill_overhead_s, cal, graphs=0.0)
    return _combine(lat, stage, k, steady=False)
