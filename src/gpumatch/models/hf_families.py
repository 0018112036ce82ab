"""Config import of the 2025 model families: what each adds to the Llama-style fields of :mod:`gpumatch.models.hf`.

Each function returns the ArchFields entries that differ from the common mapping, following the
``transformers`` configuration and modelling classes (defaults as there when a field is absent):

- ``qwen3`` (Qwen3Config): explicit ``head_dim`` (default 128), per-head ``q_norm``/``k_norm``, no Q/K/V bias
  unless ``attention_bias`` (then on Q, K, V and O), KV heads default 32.
- ``qwen3_moe`` (Qwen3MoeConfig): as qwen3, and layer ``i`` is an MoE layer of ``num_experts`` (128) experts of
  ``moe_intermediate_size`` (768), top ``num_experts_per_tok`` (8), router without bias, no shared expert, when
  ``i`` is not in ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``; other layers are dense MLPs of
  ``intermediate_size``.
- ``gemma3_text`` (Gemma3TextConfig; ``gemma3`` through its ``text_config``): Gemma-2's four norms per layer,
  GeGLU, tied embeddings, plus Q/K norms; ``sliding_window`` (4096) on the layers that ``layer_types`` marks
  ``sliding_attention``, else on every layer but each ``sliding_window_pattern``-th (6: five local, one global).
- ``llama4_text`` (Llama4TextConfig; ``llama4`` through its ``text_config``): MoE layers at
  ``moe_layers`` (default every ``interleave_moe_layer_step``-th layer, 1-based) with ``num_local_experts``
  experts of ``intermediate_size``, one shared expert of the same width, top ``num_experts_per_tok``, router
  without bias; the other layers are dense MLPs of ``intermediate_size_mlp``. Chunked attention of
  ``attention_chunk_size`` (8192) tokens on the RoPE layers (``no_rope_layers[i] == 1``; by default all but
  every ``no_rope_layer_interval``-th = 4th layer); the Q/K L2 norm (``use_qk_norm``) has no weights.
- ``gpt_oss`` (GptOssConfig): every layer is MoE with ``num_local_experts`` experts of ``intermediate_size``
  (both 2880 wide), top ``num_experts_per_tok`` (``experts_per_token`` in the same file), biases on the
  router and on every expert projection, Q/K/V/O biases, one learned attention sink per head, and
  ``sliding_window`` (128) on the ``sliding_attention`` layers of ``layer_types`` (default: even layers).
  The experts ship in MXFP4 when ``quantization_config.quant_method`` says so.
"""

from __future__ import annotations

from typing import Any

from gpumatch.models.hf_schema import HfConfig

FAMILY_TYPES: tuple[str, ...] = ("qwen3", "qwen3_moe", "gemma3_text", "llama4_text", "gpt_oss")
_WINDOWED = ("sliding_attention", "chunked_attention")


def family_fields(c: HfConfig) -> dict[str, Any]:
    """The entries of one of :data:`FAMILY_TYPES` that override or add to the common mapping."""
    if c.model_type in ("qwen3", "qwen3_moe"):
        return _qwen3(c)
    if c.model_type == "gemma3_text":
        return _gemma3(c)
    if c.model_type == "llama4_text":
        return _llama4(c)
    return _gpt_oss(c)


def _qwen3(c: HfConfig) -> dict[str, Any]:
    bias = bool(c.attention_bias)
    out: dict[str, Any] = {"head_dim": c.head_dim or 128, "qk_norm": True, "qkv_bias": bias, "attn_out_bias": bias}
    if c.model_type == "qwen3_moe":
        out["kv_heads"] = c.num_key_value_heads or 4
        experts = c.num_experts if c.num_experts is not None else 128
        if experts:
            step = c.decoder_sparse_step or 1
            dense_only = set(c.mlp_only_layers or [])
            moe = sum(1 for i in range(c.num_hidden_layers) if i not in dense_only and (i + 1) % step == 0)
            out.update(
                experts=experts,
                experts_per_token=c.num_experts_per_tok or 8,
                moe_ffn_size=c.moe_intermediate_size or 768,
                dense_layers=c.num_hidden_layers - moe,
            )
    else:
        out["kv_heads"] = c.num_key_value_heads or 32
    return out


def _gemma3(c: HfConfig) -> dict[str, Any]:
    window = c.sliding_window or 4096
    if c.layer_types:
        local = _count_windowed(c.layer_types)
    else:
        pattern = c.sliding_window_pattern or 6
        local = sum(1 for i in range(c.num_hidden_layers) if (i + 1) % pattern)
    return {"norms_per_layer": 4, "qk_norm": True, "sliding_window": window, "window_layers": local}


def _llama4(c: HfConfig) -> dict[str, Any]:
    layers = c.num_hidden_layers
    if c.moe_layers is not None:
        moe = sum(1 for i in set(c.moe_layers) if 0 <= i < layers)
    else:
        step = c.interleave_moe_layer_step or 1
        moe = len(range(step - 1, layers, step))
    if c.layer_types:
        chunked = _count_windowed(c.layer_types)
    elif c.no_rope_layers:
        chunked = sum(1 for v in c.no_rope_layers[:layers] if v)
    else:
        interval = c.no_rope_layer_interval or 4
        chunked = sum(1 for i in range(layers) if (i + 1) % interval)
    out: dict[str, Any] = {
        "ffn_size": c.intermediate_size_mlp or c.intermediate_size,
        "kv_heads": c.num_key_value_heads or 8,
        "head_dim": c.head_dim or 128,
        "sliding_window": c.attention_chunk_size or 8192,
        "window_layers": chunked,
        "chunked_attention": True,
    }
    if moe:
        out.update(
            experts=c.num_local_experts or 16,
            experts_per_token=c.num_experts_per_tok or 1,
            moe_ffn_size=c.intermediate_size,
            shared_experts=1,
            dense_layers=layers - moe,
        )
    return out


def _gpt_oss(c: HfConfig) -> dict[str, Any]:
    layers = c.num_hidden_layers
    types = c.layer_types or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    quant = (c.quantization_config or {}).get("quant_method")
    bias = c.attention_bias if c.attention_bias is not None else True
    return {
        "kv_heads": c.num_key_value_heads or 8,
        "head_dim": c.head_dim or 64,
        "qkv_bias": bias,
        "attn_out_bias": bias,
        "mlp_bias": True,
        "router_bias": True,
        "attention_sinks": True,
        "experts": c.num_local_experts or c.num_experts or 128,
        "experts_per_token": c.num_experts_per_tok or c.experts_per_token or 4,
        "moe_ffn_size": c.intermediate_size,
        "sliding_window": c.sliding_window or 128,
        "window_layers": _count_windowed(types[:layers]),
        "expert_precision": "mxfp4" if quant == "mxfp4" else "",
    }


def _count_windowed(layer_types: list[str]) -> int:
    return sum(1 for t in layer_types if t in _WINDOWED)
