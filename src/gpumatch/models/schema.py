"""Validated shape of one model preset file (TOML), built-in or in the user overlay directory.

A preset restates a published Hugging Face ``config.json`` in gpumatch's own field names (those of
:class:`~gpumatch.models.arch.ModelArch`) and says where the numbers come from (``source``: the URL of
that config.json). Unknown keys are errors (``extra="forbid"``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpumatch.models.arch import ModelArch
from gpumatch.vocab import WEIGHT_PRECISIONS

Family = Literal[
    "llama", "mistral", "mixtral", "qwen2", "gemma2", "phi3", "deepseek_v2", "deepseek_v3",
    "qwen3", "qwen3_moe", "gemma3", "llama4", "gpt_oss", "other",
]
_MAX_DIM = 1_000_000
_MAX_VOCAB = 10_000_000


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ArchFields(_Strict):
    """The architecture, in gpumatch names (see ModelArch); sizes are element counts."""

    layers: int = Field(gt=0, le=10_000)
    hidden_size: int = Field(gt=0, le=_MAX_DIM)
    heads: int = Field(gt=0, le=100_000)
    kv_heads: int = Field(gt=0, le=100_000)
    head_dim: int = Field(gt=0, le=100_000)
    ffn_size: int = Field(gt=0, le=10 * _MAX_DIM)
    vocab_size: int = Field(gt=0, le=_MAX_VOCAB)
    tied_embeddings: bool
    gated_mlp: bool = True
    qkv_bias: bool = False
    attn_out_bias: bool = False
    mlp_bias: bool = False
    norms_per_layer: int = Field(default=2, ge=0, le=8)
    experts: int = Field(default=0, ge=0, le=100_000)
    experts_per_token: int = Field(default=0, ge=0, le=100_000)
    moe_ffn_size: int = Field(default=0, ge=0, le=10 * _MAX_DIM)
    shared_experts: int = Field(default=0, ge=0, le=1_000)
    dense_layers: int = Field(default=0, ge=0, le=10_000)
    router_bias: bool = False
    q_lora_rank: int = Field(default=0, ge=0, le=_MAX_DIM)
    kv_lora_rank: int = Field(default=0, ge=0, le=_MAX_DIM)
    qk_rope_head_dim: int = Field(default=0, ge=0, le=100_000)
    qk_nope_head_dim: int = Field(default=0, ge=0, le=100_000)
    v_head_dim: int = Field(default=0, ge=0, le=100_000)
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_every: int = Field(default=0, ge=0, le=1_000)
    max_position_embeddings: int = Field(default=0, ge=0, le=100_000_000)
    qk_norm: bool = False
    attention_sinks: bool = False
    window_layers: int | None = Field(default=None, ge=0, le=10_000)
    chunked_attention: bool = False
    expert_precision: str = Field(default="", max_length=20)

    @model_validator(mode="after")
    def _consistent(self) -> ArchFields:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts:
            if not 0 < self.experts_per_token <= self.experts:
                raise ValueError("experts_per_token must be between 1 and experts for an MoE model")
            if not self.moe_ffn_size:
                raise ValueError("an MoE model needs moe_ffn_size (the width of one expert)")
            if self.dense_layers >= self.layers:
                raise ValueError("dense_layers must be fewer than layers")
        elif self.experts_per_token or self.shared_experts or self.dense_layers:
            raise ValueError("experts_per_token/shared_experts/dense_layers need experts > 0")
        if self.window_layers is not None and (self.window_layers > self.layers or not self.sliding_window):
            raise ValueError("window_layers needs a sliding_window and can be at most layers")
        if self.expert_precision and (self.expert_precision not in WEIGHT_PRECISIONS or not self.experts):
            raise ValueError(f"expert_precision needs experts and is one of {', '.join(WEIGHT_PRECISIONS)}")
        if self.kv_lora_rank and not (self.qk_nope_head_dim and self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError("MLA (kv_lora_rank > 0) needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim")
        return self


class ModelFile(_Strict):
    """One preset: names, where the config comes from, and the architecture."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    aliases: list[str] = Field(default_factory=list, max_length=50)
    family: Family
    hf_id: str = Field(default="", max_length=200)
    source: str = Field(pattern=r"^https?://\S+$", description="URL of the published config.json the numbers come from")
    note: str = Field(default="", max_length=2000)
    scope: str = Field(default="", max_length=200, description="what the counts leave out (e.g. a vision tower)")
    arch: ArchFields

    def to_arch(self) -> ModelArch:
        """The runtime value; ``source`` stays the URL of the config the numbers come from."""
        return ModelArch(
            name=self.name,
            family=self.family,
            aliases=tuple(self.aliases),
            hf_id=self.hf_id,
            source=self.source,
            scope=self.scope,
            **self.arch.model_dump(),
        )
