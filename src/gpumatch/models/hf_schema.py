"""The fields gpumatch reads from a Hugging Face ``config.json`` (every other key is ignored).

Names and meanings follow the ``transformers`` configuration classes of each ``model_type`` (see
:mod:`gpumatch.models.hf` for the defaults applied when a field is absent). A multimodal config (``gemma3``,
``llama4``, ``mistral3``) is read through its ``text_config``: :func:`text_part` lifts it to the top level.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_DIM = Field(default=None, gt=0, le=1_000_000)
_LAYER_LIST = Field(default=None, max_length=10_000)

#: multimodal model_type -> the model_type of its text tower when ``text_config`` does not name one
#: (transformers Gemma3Config, Llama4Config, Mistral3Config).
MULTIMODAL_TEXT_TYPES: dict[str, str] = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral"}


class HfConfig(BaseModel):
    """The fields gpumatch reads from a config.json; every other key is ignored."""

    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)

    model_type: str = Field(max_length=100)
    name_or_path: str = Field(default="", alias="_name_or_path", max_length=1000)
    hidden_size: int = Field(gt=0, le=1_000_000)
    num_hidden_layers: int = Field(gt=0, le=10_000)
    num_attention_heads: int = Field(gt=0, le=100_000)
    intermediate_size: int = Field(gt=0, le=10_000_000)
    vocab_size: int = Field(gt=0, le=10_000_000)
    num_key_value_heads: int | None = _DIM
    head_dim: int | None = _DIM
    tie_word_embeddings: bool | None = None
    max_position_embeddings: int | None = Field(default=None, ge=0, le=100_000_000)
    sliding_window: int | None = Field(default=None, gt=0)
    use_sliding_window: bool | None = None
    attention_bias: bool | None = None
    mlp_bias: bool | None = None
    num_local_experts: int | None = Field(default=None, gt=0, le=100_000)
    num_experts_per_tok: int | None = Field(default=None, gt=0, le=100_000)
    n_routed_experts: int | None = Field(default=None, gt=0, le=100_000)
    n_shared_experts: int | None = Field(default=None, ge=0, le=1_000)
    moe_intermediate_size: int | None = Field(default=None, gt=0, le=10_000_000)
    first_k_dense_replace: int | None = Field(default=None, ge=0, le=10_000)
    moe_layer_freq: int | None = Field(default=None, gt=0, le=10_000)
    topk_method: str | None = Field(default=None, max_length=100)
    q_lora_rank: int | None = Field(default=None, ge=0, le=1_000_000)
    kv_lora_rank: int | None = Field(default=None, ge=0, le=1_000_000)
    qk_rope_head_dim: int | None = Field(default=None, ge=0, le=100_000)
    qk_nope_head_dim: int | None = Field(default=None, ge=0, le=100_000)
    v_head_dim: int | None = Field(default=None, ge=0, le=100_000)
    # 2025 families: Qwen3-MoE, Gemma-3, Llama-4, gpt-oss
    num_experts: int | None = Field(default=None, ge=0, le=100_000)
    experts_per_token: int | None = Field(default=None, gt=0, le=100_000)
    decoder_sparse_step: int | None = Field(default=None, gt=0, le=10_000)
    mlp_only_layers: list[int] | None = _LAYER_LIST
    layer_types: list[str] | None = _LAYER_LIST
    sliding_window_pattern: int | None = Field(default=None, gt=0, le=10_000)
    interleave_moe_layer_step: int | None = Field(default=None, gt=0, le=10_000)
    moe_layers: list[int] | None = _LAYER_LIST
    intermediate_size_mlp: int | None = Field(default=None, gt=0, le=10_000_000)
    no_rope_layers: list[int] | None = _LAYER_LIST
    no_rope_layer_interval: int | None = Field(default=None, gt=0, le=10_000)
    attention_chunk_size: int | None = Field(default=None, gt=0)
    quantization_config: dict[str, Any] | None = None


# Absent fields of a Gemma-3 text tower take the Gemma3TextConfig defaults (the published gemma-3-*-it
# configs leave vocab_size, and some num_attention_heads or head_dim, to them).
_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "tie_word_embeddings": True,
}


def text_part(raw: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The decoder's fields and a note: a multimodal config's ``text_config`` lifted to the top level
    (its ``_name_or_path`` and ``tie_word_embeddings`` kept when the text part lacks them), else ``raw``.

    The note says when only the text part is counted (the vision tower and projector are not modelled).
    """
    outer = raw.get("model_type")
    if outer not in MULTIMODAL_TEXT_TYPES:
        return _with_defaults(raw), ""
    inner = raw.get("text_config")
    if not isinstance(inner, dict):
        return raw, ""  # validation then names the missing fields
    text: dict[str, Any] = {k: v for k, v in raw.items() if k in ("_name_or_path", "tie_word_embeddings")}
    text.update(inner)
    text["model_type"] = inner.get("model_type") or MULTIMODAL_TEXT_TYPES[str(outer)]
    return _with_defaults(text), f"text part only (the vision tower of this {outer} config is not counted)"


def _with_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    if raw.get("model_type") != "gemma3_text":
        return raw
    return {**_GEMMA3_TEXT_DEFAULTS, **{k: v for k, v in raw.items() if v is not None}}
