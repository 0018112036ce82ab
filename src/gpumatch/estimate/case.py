"""Numeric inputs of the estimators: a model's shape constants and one configuration's numbers.

:class:`ModelNums` flattens a :class:`~gpumatch.models.arch.ModelArch` into the floats the formulas
use (computed once per model). :class:`Case` holds the numbers of one configuration -- or, with numpy
arrays in its fields, of many (structure-of-arrays, broadcasting) -- so the planner evaluates 10^5
candidates in one call of the same formulas the scalar :func:`gpumatch.estimate.estimate` uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpumatch.estimate._num import Num
from gpumatch.models.arch import ModelArch


@dataclass(frozen=True)
class ModelNums:
    """Shape constants of one model (counts, not bytes). Per-layer values are averages over layers."""

    layers: float
    hidden: float
    heads: float
    kv_heads: float
    head_dim: float
    vocab: float
    gated: bool
    params_total: float
    params_active: float
    embed_params: float
    head_params: float
    layer_params: float
    layer_matmul_params_active: float
    layer_attention_params: float
    qkv_width: float
    kv_elems_per_token_layer: float
    kv_shard_heads: float
    attention_dot_dim: float
    mlp_inner_width: float
    experts: float
    experts_per_token: float
    expert_params_per_layer: float
    moe_layers: float
    lora_params_per_rank_layer: float
    window: float = float("inf")
    window_fraction: float = 0.0
    mla: bool = False
    """Multi-head latent attention (DeepSeek-V2/V3): a latent KV cache and absorbed projections."""
    shared_experts: float = 0.0
    """Shared experts per MoE layer (DeepSeek, Qwen2-MoE): always active, beside the routed top-k."""

    @property
    def matmul_params_active(self) -> float:
        """Active weights used in GEMMs per token, including the LM head (tied or not)."""
        return self.layers * self.layer_matmul_params_active + self.vocab * self.hidden


@lru_cache(maxsize=256)
def model_nums(m: ModelArch) -> ModelNums:
    """Flatten ``m`` (see ModelArch for the parameter accounting and its sources)."""
    h, L = float(m.hidden_size), float(m.layers)
    embed = float(m.vocab_size * m.hidden_size)
    head = 0.0 if m.tied_embeddings else embed
    body_total = m.params_total - embed - head - h
    body_active = m.params_active - embed - head - h
    norms = m.norms_per_layer * h
    attn = float(m.attention_params())
    if m.uses_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        dot_dim = float(m.heads * (qk + m.v_head_dim))
        qkv_width = float(m.heads * qk + m.kv_lora_rank + m.qk_rope_head_dim)
        kv_shard = 1.0
    else:
        dot_dim = float(2 * m.heads * m.head_dim)
        qkv_width = float(m.head_dim * (m.heads + 2 * m.kv_heads))
        kv_shard = float(m.kv_heads)
    inner, expert = float(m.ffn_size), 0.0
    if m.is_moe:
        moe_inner = (m.experts_per_token + m.shared_experts) * m.moe_ffn_size
        inner = (moe_inner * m.moe_layers + m.ffn_size * m.dense_layers) / m.layers
        expert = float(m.mlp_params(m.moe_ffn_size))
    mlp_in_out = 3 if m.gated_mlp else 2
    q_out = m.heads * m.head_dim
    lora_rank1 = (h + q_out) * 2 + (h + m.kv_heads * m.head_dim) * 2 + mlp_in_out * (h + m.ffn_size)
    return ModelNums(
        layers=L,
        hidden=h,
        heads=float(m.heads),
        kv_heads=float(m.kv_heads),
        head_dim=float(m.head_dim),
        vocab=float(m.vocab_size),
        gated=m.gated_mlp,
        params_total=float(m.params_total),
        params_active=float(m.params_active),
        embed_params=embed,
        head_params=head,
        layer_params=body_total / L,
        layer_matmul_params_active=(body_active - L * norms) / L,
        layer_attention_params=attn,
        qkv_width=qkv_width,
        kv_elems_per_token_layer=m.kv_bytes_per_token(1.0) / L,
        kv_shard_heads=kv_shard,
        attention_dot_dim=dot_dim,
        mlp_inner_width=float(inner),
        experts=float(m.experts),
        experts_per_token=float(m.experts_per_token),
        expert_params_per_layer=expert,
        moe_layers=float(m.moe_layers),
        lora_params_per_rank_layer=float(lora_rank1),
        window=float(m.sliding_window) if m.sliding_window else float("inf"),
        window_fraction=m.sliding_layers / m.layers if m.sliding_window else 0.0,
        mla=m.uses_mla,
        shared_experts=float(m.shared_experts),
    )


@dataclass
class Case:
    """Numbers of one configuration, or arrays of them (every field broadcasts against the others).

    GPU: ``capacity_bytes`` usable memory; ``bandwidth_bytes_per_s`` HBM; ``peak_flops_per_s`` dense peak of
    the compute path (NaN = unsupported); ``tdp_w``; links per direction: ``scaleup_bytes_per_s`` (0 if none)
    within ``scaleup_domain`` GPUs, ``pcie_bytes_per_s`` (already halved when there is no P2P), and
    ``usd_per_gpu_hour`` (cloud) and ``purchase_usd`` per GPU (NaN = unknown).
    Layout: ``tp``, ``pp``, ``dp``, ``zero`` (0-3; 3 = FSDP full shard), ``micro_batches`` per step and
    pipeline, ``gpus_per_node``. Workload: ``seqs_per_replica``, the sequences one replica (a DP rank) holds in
    one forward pass: the micro-batch (training) or its share of the sequences in flight (inference,
    ``ceil(concurrency / dp)``: :attr:`gpumatch.estimate.request.Request.seqs_per_replica`); ``seq``
    (training), ``prompt`` and ``gen`` tokens (inference), ``kv_block`` tokens; ``split_kv`` 1 when
    decode attention splits the KV sequence across thread blocks (serving engines), 0 for plain SDPA;
    ``graphs`` 1 when the step replays a CUDA graph (no CPU dispatch per kernel), 0 for eager PyTorch;
    ``fused`` 1 when norms, RoPE and the MLP activation run as fused kernels (serving engines);
    ``low_precision_gemm`` 1 when the GEMMs run on an 8-bit or 4-bit tensor path (fp8, int8, fp4);
    ``offload`` 1 when the optimizer state lives and is updated in host memory (ZeRO-Offload);
    ``prefill_chunk`` tokens per prefill forward for the memory peak (0 = the whole batch at once);
    ``in_flight`` sequences in flight over all inference replicas, at most ``seqs_per_replica × dp`` (inf = full).
    Precisions in bytes per element: ``weight_bytes``, ``act_bytes``, ``kv_bytes``, ``grad_bytes``,
    ``opt_bytes`` (optimizer state per trainable parameter, master copy included); ``autocast`` 1 for PyTorch
    AMP: the parameters are stored in fp32 (they are the master copy, not in ``opt_bytes``) and
    ``weight_bytes`` is then autocast's 16-bit cast of each matmul weight. Flags (0/1):
    ``rc_full``, ``rc_selective``, ``flash``, ``seq_parallel``, ``full_train`` (1 full, 0 adapters only);
    ``lora_rank``; ``adapter_bytes`` per adapter parameter (weights and gradients) and ``adapter_opt_bytes``
    (optimizer state per adapter parameter).
    """

    capacity_bytes: Num
    bandwidth_bytes_per_s: Num
    peak_flops_per_s: Num
    tdp_w: Num
    scaleup_bytes_per_s: Num = 0.0
    scaleup_domain: Num = 1.0
    pcie_bytes_per_s: Num = 32e9
    pcie_p2p: Num = 1.0
    usd_per_gpu_hour: Num = float("nan")
    purchase_usd: Num = float("nan")
    tp: Num = 1.0
    pp: Num = 1.0
    dp: Num = 1.0
    zero: Num = 0.0
    micro_batches: Num = 1.0
    gpus_per_node: Num = 8.0
    seqs_per_replica: Num = 1.0
    seq: Num = 2048.0
    prompt: Num = 512.0
    gen: Num = 256.0
    kv_block: Num = 1.0
    split_kv: Num = 1.0
    graphs: Num = 1.0
    fused: Num = 0.0
    low_precision_gemm: Num = 0.0
    engine_attention: Num = 0.0
    """1 when prefill attention runs a serving engine's own kernels (vLLM, SGLang, TensorRT-LLM), 0 for
    PyTorch's SDPA (plain PyTorch, gpumatch serve)."""
    attention_peak_flops_per_s: Num = float("nan")
    """Dense peak of the attention core's path (NaN: ``peak_flops_per_s``): the activations' 16-bit path, or
    FP8 for a serving engine with an FP8 KV cache (:func:`gpumatch.estimate.options.attention_precision`)."""
    offload: Num = 0.0
    engine_memory_fraction: Num = float("nan")
    """Task serve: the share of GPU memory the engine takes, as the request set it (NaN: the engine profile's;
    :func:`gpumatch.estimate.engine_profiles.kv_pool`)."""
    prefill_chunk: Num = 8192.0
    in_flight: Num = float("inf")
    weight_bytes: Num = 2.0
    edge_weight_bytes: Num = 2.0
    """Bytes per element of the token embedding and the LM head: 16-bit in a quantized checkpoint
    (:func:`gpumatch.estimate.precision.edge_precision`), else ``weight_bytes``."""
    moe_attention_weight_bytes: Num = 2.0
    """Bytes per element of an MoE model's attention projections: 16-bit when its experts are stored in FP4
    (:func:`gpumatch.estimate.precision.moe_attention_precision`), else ``weight_bytes``; dense models ignore it."""
    autocast: Num = 0.0
    act_bytes: Num = 2.0
    kv_bytes: Num = 2.0
    grad_bytes: Num = 2.0
    opt_bytes: Num = 12.0
    rc_full: Num = 0.0
    rc_selective: Num = 0.0
    flash: Num = 1.0
    seq_parallel: Num = 1.0
    full_train: Num = 1.0
    lora_rank: Num = 0.0
    adapter_bytes: Num = 4.0
    adapter_opt_bytes: Num = 8.0

    @property
    def count(self) -> Num:
        return self.tp * self.pp * self.dp
