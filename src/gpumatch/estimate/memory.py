"""Per-GPU memory, itemized, for training (full, LoRA, QLoRA) and inference (single run, serving).

Sources (restated in ../shared/notes/estimator-formulas.md section B):
- Model states: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", section 3.1 and Figure 1: 2 bytes of fp16 parameters, 2 of fp16 gradients and K = 12 bytes of
  optimizer state (fp32 master, momentum, variance) per parameter; stage 1 shards the optimizer state,
  stage 2 also the gradients, stage 3 also the parameters, over the data-parallel degree N_d.
- Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  section 4 and Table 2: per layer ``s·b·h·(34 + 5·a·s/h)`` bytes for a GPT block (16-bit activations,
  1-byte dropout masks); tensor parallelism divides 24 of the 34 (and the score term), sequence
  parallelism the remaining 10; selective recompute drops ``5·a·s²·b``; full recompute keeps ``2·s·b·h``.
  Generalized here term by term to GQA (K and V are ``a_kv·d`` wide), gated MLPs (four ``s·b·f`` tensors
  saved: gate output, its activation, up output, product), no dropout, and flash attention (scores
  replaced by the fp32 log-sum-exp ``4·a·s·b``). Pipeline: the first 1F1B stage holds
  ``min(m, p)`` micro-batches of its ``L/p`` layers (Korthikanti section 4.2.3).
- PyTorch AMP (``Case.autocast``; recipes in :mod:`gpumatch.estimate.options`): the parameters are stored in
  fp32 and are the master copy; autocast caches a 16-bit cast of each matmul weight from its first use in the
  forward to the end of the autocast region and autograd keeps it for backward
  (aten/src/ATen/autocast_mode.cpp ``cached_cast``), so the casts live with the activations and die as the
  gradients appear.
- ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing Billion-Scale Model Training"): the optimizer
  state (fp32 master and moments) moves to host memory and is updated there by the CPU.
- KV cache: ``2·a_kv·d·β`` per token per layer, divided by TP up to the number of KV heads, times
  concurrent sequences times their tokens rounded up to the cache block (vLLM PagedAttention, Kwon et al.
  2023, block size 16).
"""

from __future__ import annotations

from gpumatch.estimate._num import Num, ceil_div, vmax, vmin, where
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums


def layers_per_stage(m: ModelNums, pp: Num) -> Num:
    """Layers on the most loaded pipeline stage (``ceil(L/p)``)."""
    return ceil_div(m.layers, pp)


def weight_params_per_gpu(m: ModelNums, c: Case) -> Num:
    """Parameters held per GPU: the worst pipeline stage (layers + embedding or LM head), ÷ TP, ÷ DP at ZeRO-3.

    With ``pp = 1`` the GPU holds the embedding and the (untied) head; with ``pp > 1`` the first stage holds
    the embedding and the last the head, so the worst stage holds one ``V·h`` matrix.
    """
    edge = where(c.pp > 1, m.embed_params, m.embed_params + m.head_params)
    per_stage = layers_per_stage(m, c.pp) * m.layer_params + edge + m.hidden
    sharded = per_stage / c.tp
    return where(c.zero >= 3, sharded / c.dp, sharded)


def layer_weight_bytes(m: ModelNums, c: Case, w_params: Num) -> Num:
    """Bytes of ``w_params`` weights of one layer (whole model, before TP), its attention projections
    (``m.layer_attention_params``) at ``c.moe_attention_weight_bytes`` in an MoE model (16-bit beside FP4
    experts: :mod:`gpumatch.estimate.precision`), everything else at ``c.weight_bytes``."""
    if m.experts <= 1:
        return w_params * c.weight_bytes
    return w_params * c.weight_bytes + m.layer_attention_params * (c.moe_attention_weight_bytes - c.weight_bytes)


def weight_bytes_per_gpu(m: ModelNums, c: Case) -> Num:
    """Bytes of the weights held per GPU, as :func:`weight_params_per_gpu` counts them: each layer by
    :func:`layer_weight_bytes`, the embedding and the LM head at ``c.edge_weight_bytes`` (16-bit in a quantized
    checkpoint: :mod:`gpumatch.estimate.precision`)."""
    edge = where(c.pp > 1, m.embed_params, m.embed_params + m.head_params)
    per_stage = (layers_per_stage(m, c.pp) * layer_weight_bytes(m, c, m.layer_params) + edge * c.edge_weight_bytes
                 + m.hidden * c.weight_bytes)
    sharded = per_stage / c.tp
    return where(c.zero >= 3, sharded / c.dp, sharded)


def adapter_params_per_gpu(m: ModelNums, c: Case) -> Num:
    """LoRA adapter parameters (rank ``r`` on every linear layer of a block) per GPU."""
    return layers_per_stage(m, c.pp) * m.lora_params_per_rank_layer * c.lora_rank / c.tp


FP32_BYTES = 4.0
"""Bytes of an fp32 element: the stored parameters under PyTorch AMP."""


def stored_weight_bytes(c: Case) -> Num:
    """Bytes per stored parameter: fp32 under PyTorch AMP (``c.autocast``), else ``c.weight_bytes``."""
    return where(c.autocast > 0, FP32_BYTES, c.weight_bytes)


def autocast_copy_bytes(m: ModelNums, c: Case) -> Num:
    """Bytes per GPU of autocast's 16-bit weight casts under PyTorch AMP (0 otherwise; module docstring).

    Every matmul weight of the worst pipeline stage is cast once per forward: its layers (all of a layer's
    weights; norm weights, a few thousand per layer, are counted with them) and one ``V·h`` matrix (the LM head,
    tied or not; the embedding lookup gathers fp32 rows and is not cast). ÷ TP, ÷ DP at ZeRO-3, like the
    parameters they copy.
    """
    per_stage = layers_per_stage(m, c.pp) * m.layer_params + m.vocab * m.hidden
    sharded = per_stage / c.tp
    return c.autocast * where(c.zero >= 3, sharded / c.dp, sharded) * c.weight_bytes


def model_state_bytes(m: ModelNums, c: Case, training: bool) -> tuple[Num, Num, Num]:
    """(weights, gradients, optimizer) bytes per GPU (ZeRO section 3.1; module docstring).

    Weights are the stored parameters (fp32 under AMP, :func:`stored_weight_bytes`); AMP's casts are transient
    (:func:`autocast_copy_bytes`)."""
    if not training:
        return weight_bytes_per_gpu(m, c), 0.0, 0.0
    # fp32 parameters under AMP (every tensor), else the stored copy the kernels read
    base = where(c.autocast > 0, weight_params_per_gpu(m, c) * FP32_BYTES, weight_bytes_per_gpu(m, c))
    adapters = adapter_params_per_gpu(m, c)
    trainable = where(c.full_train > 0, weight_params_per_gpu(m, c) * where(c.zero >= 3, c.dp, 1.0), adapters)
    weights = base + (1.0 - c.full_train) * adapters * c.adapter_bytes
    grad_b = where(c.full_train > 0, c.grad_bytes, c.adapter_bytes)
    opt_b = where(c.full_train > 0, c.opt_bytes, c.adapter_opt_bytes)
    grads = trainable * grad_b / where(c.zero >= 2, c.dp, 1.0)
    opt = trainable * opt_b / where(c.zero >= 1, c.dp, 1.0)
    return weights, grads, opt * (1.0 - c.offload)


def offloaded_bytes(m: ModelNums, c: Case) -> Num:
    """Host-memory bytes of the optimizer state per GPU under ZeRO-Offload (0 without offload)."""
    trainable = where(c.full_train > 0, weight_params_per_gpu(m, c) * where(c.zero >= 3, c.dp, 1.0),
                      adapter_params_per_gpu(m, c))
    opt_b = where(c.full_train > 0, c.opt_bytes, c.adapter_opt_bytes)
    return c.offload * trainable * opt_b / where(c.zero >= 1, c.dp, 1.0)


def layer_activation_bytes(
    m: ModelNums,
    tokens: Num,
    seq: Num,
    c: Case,
    dropout: bool = False,
    norm_bytes: float = 2.0,
    keep_all: bool = False,
) -> Num:
    """Activation bytes one transformer layer saves for backward (Korthikanti Table 2, generalized).

    ``tokens = s·b`` of one micro-batch. Returns per-GPU bytes with TP (and SP) splits applied; with
    ``rc_full`` only the layer input ``2·s·b·h`` (÷ TP under SP) is kept. ``norm_bytes`` per element saved by
    each of the two norms (2 = its 16-bit input, the paper's count); ``keep_all`` ignores ``rc_full`` (the
    layer being recomputed holds everything).
    """
    a_bytes = c.act_bytes
    h, mask = m.hidden, (1.0 if dropout else 0.0)
    # replicated across TP ranks unless sequence parallel: norm inputs, QKV input, MLP input, dropout masks
    repl = tokens * (a_bytes * 2.0 * h + norm_bytes * 2.0 * h + mask * 2.0 * h)
    # split across TP ranks: Q, K, V, attention output, MLP internals
    mlp = a_bytes * (4.0 if m.gated else 2.0) * m.mlp_inner_width
    split = tokens * (a_bytes * (m.qkv_width + h) + mlp)
    # softmax output (kept for its backward and for A·V), plus dropout mask and output when dropout is on
    scores = m.heads * seq * tokens * (a_bytes + mask * (1.0 + a_bytes))
    scores = scores * (1.0 - c.rc_selective)
    lse = 4.0 * m.heads * tokens
    attn_core = where(c.flash > 0, lse, scores)
    repl_per_gpu = where(c.seq_parallel > 0, repl / c.tp, repl)
    full = repl_per_gpu + (split + attn_core) / c.tp
    kept_input = tokens * a_bytes * h / where(c.seq_parallel > 0, c.tp, 1.0)
    if keep_all:
        return full
    return where(c.rc_full > 0, kept_input, full)


def training_activation_bytes(m: ModelNums, c: Case, cal: Calibration) -> tuple[Num, Num]:
    """(activations, logits) bytes per GPU for one training step (module docstring).

    Layers alive: ``ceil(L/p) · min(m, p)`` on the first 1F1B stage. Full recompute adds one layer's
    full activations while that layer's backward runs. Logits ``s·b·V`` at ``cal.logits_bytes_per_element``
    live on the last stage (÷ TP: vocab-parallel head and loss).
    """
    tokens = c.seq * c.seqs_per_replica
    nb = cal.norm_saved_bytes_per_element
    per_layer = layer_activation_bytes(m, tokens, c.seq, c, norm_bytes=nb)
    alive = layers_per_stage(m, c.pp) * vmin(c.micro_batches, c.pp)
    acts = per_layer * alive
    one_layer = layer_activation_bytes(m, tokens, c.seq, c, norm_bytes=nb, keep_all=True)
    recompute_peak = c.rc_full * one_layer
    logits = tokens * m.vocab * cal.logits_bytes_per_element / c.tp
    return acts + recompute_peak, logits


def inference_activation_bytes(m: ModelNums, c: Case, chunk_tokens: Num) -> Num:
    """Peak transient bytes of one layer's forward at ``chunk_tokens`` tokens (buffers are reused).

    Residual stream in and out, the QKV output, the MLP intermediates (3 tensors of width f for gated MLPs,
    2 otherwise), scores when materialized, and the last position's logits in bf16 + fp32 for sampling.
    """
    t, ab = chunk_tokens, c.act_bytes
    width = 3.0 if m.gated else 2.0
    layer = t * ab * (2.0 * m.hidden + (m.qkv_width + width * m.mlp_inner_width) / c.tp)
    # materialized scores: every query of the chunk against the sequence's keys (up to the whole prompt)
    scores = where(c.flash > 0, 0.0, m.heads / c.tp * vmin(c.prompt, t) * t * (ab + 4.0))
    logits = c.seqs_per_replica * m.vocab * (ab + 4.0) / c.tp
    return layer + scores + logits


def kv_cache_bytes(m: ModelNums, c: Case, tokens_per_seq: Num) -> Num:
    """KV-cache bytes per GPU for ``batch`` sequences of ``tokens_per_seq`` tokens (module docstring)."""
    blocks = ceil_div(tokens_per_seq, c.kv_block) * c.kv_block
    if m.window_fraction:  # sliding-window layers keep at most the window (block-rounded)
        window = ceil_div(m.window, c.kv_block) * c.kv_block
        blocks = (1.0 - m.window_fraction) * blocks + m.window_fraction * vmin(blocks, window)
    shard = vmin(c.tp, m.kv_shard_heads)
    per_token = m.kv_elems_per_token_layer * c.kv_bytes * layers_per_stage(m, c.pp) / shard
    return c.seqs_per_replica * blocks * per_token


def tied_embedding_grad_bytes(m: ModelNums, c: Case) -> Num:
    """Bytes of a tied embedding's second gradient at the end of a full-training backward (0 when untied).

    The embedding lookup's backward builds a dense ``V·h`` gradient (``embedding_dense_backward``) that is then
    added into the gradient the LM head already gave the shared weight, so for a moment the weight has two.
    Measured on an H200 (tests/data/measurements/2026-12-04-h200-probe-amp-peaks.txt): Llama-3.2-3B (tied) rose
    from 16.11 to 16.60 bytes per parameter during the embedding backward, ``V·h·4`` = 0.49 per parameter;
    Llama-3-8B (untied) did not. On one pipeline stage only (``pp = 1``; stages keep separate copies), ÷ TP.
    """
    tied = 1.0 if m.head_params == 0 else 0.0
    return c.full_train * tied * where(c.pp == 1, m.embed_params / c.tp * c.grad_bytes, 0.0)


def peak_dynamic_bytes(c: Case, gradients: Num, activations: Num, tied_grad: Num = 0.0) -> Num:
    """Gradients and activations at the training peak (``tied_grad``: :func:`tied_embedding_grad_bytes`, alive
    with all the gradients at the end of backward).

    With persistent gradient buffers (gradient accumulation over micro-batches, DDP buckets, Megatron
    ``main_grad``, ZeRO partitions: any ``micro_batches > 1`` or more than one GPU) both are resident at the
    end of the forward pass. A single-GPU PyTorch step frees gradients in ``zero_grad(set_to_none=True)``
    (the default since PyTorch 2.0) and backward creates them as it frees activations, so the peak is
    ``max(activations, gradients)`` (the larger end of a linear exchange).
    """
    persistent = (c.micro_batches > 1) + (c.tp * c.pp * c.dp > 1) > 0
    return where(persistent, gradients + vmax(activations, tied_grad), vmax(gradients + tied_grad, activations))


def overhead_bytes(m: ModelNums, c: Case, dynamic_bytes: Num, cal: Calibration) -> tuple[Num, Num, Num, Num]:
    """(CUDA context, NCCL buffers, fragmentation, ZeRO-3 gather buffers) bytes per GPU.

    One NCCL communicator per parallel dimension larger than 1; fragmentation is a fraction of the
    dynamically allocated bytes; ZeRO-3/FSDP keeps two gathered layers (current + prefetch) in 16 bit.
    """
    groups = where(c.tp > 1, 1.0, 0.0) + where(c.pp > 1, 1.0, 0.0) + where(c.dp > 1, 1.0, 0.0)
    nccl = groups * cal.nccl_buffer_bytes_per_group
    frag = dynamic_bytes * cal.fragmentation_fraction
    gather = where(c.zero >= 3, 2.0 * m.layer_params / c.tp * c.weight_bytes, 0.0)
    return cal.cuda_context_bytes, nccl, frag, gather
