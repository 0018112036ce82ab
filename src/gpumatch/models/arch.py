"""Transformer architectures and their parameter accounting.

Parameter counts follow the layer shapes of the Hugging Face implementations (LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM, MixtralForCausalLM, Gemma2ForCausalLM, Phi3ForCausalLM,
DeepseekV2/V3ForCausalLM), restated in ../shared/notes/estimator-formulas.md section A:

- embedding ``V·h``; LM head ``V·h`` unless tied;
- attention: Q ``h·a·d`` + K,V ``2·h·a_kv·d`` + O ``a·d·h`` (+ biases ``a·d + 2·a_kv·d`` when
  ``qkv_bias``); MLA replaces Q/K/V with its low-rank projections (see :meth:`ModelArch.attention_params`);
- MLP: ``k·h·f`` with ``k = 3`` for gated (SwiGLU/GeGLU) and 2 otherwise; MoE layers hold
  ``E`` routed experts of ``moe_ffn_size`` plus ``shared_experts`` and a router ``h·E``;
- norms: ``norms_per_layer`` vectors of ``h`` per layer plus the final norm.

Total parameters size memory; active parameters (top-k experts) size FLOPs and decode bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ModelArch:
    """A decoder-only transformer. Sizes are counts (not bytes); ``head_dim`` is per head."""

    name: str
    family: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_size: int
    vocab_size: int
    tied_embeddings: bool
    gated_mlp: bool = True
    qkv_bias: bool = False
    norms_per_layer: int = 2
    experts: int = 0
    experts_per_token: int = 0
    moe_ffn_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int | None = None
    sliding_window_every: int = 0
    max_position_embeddings: int = 0
    source: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    def attention_params(self) -> int:
        """Weights of one attention block (projections and their biases)."""
        h, a, d = self.hidden_size, self.heads, self.head_dim
        if self.uses_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * a * qk_head
            else:
                q = h * a * qk_head
            kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_up = self.kv_lora_rank * a * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_down + kv_up + a * self.v_head_dim * h
        qkv = h * d * (a + 2 * self.kv_heads)
        bias = d * (a + 2 * self.kv_heads) if self.qkv_bias else 0
        return qkv + bias + a * d * h

    def mlp_params(self, ffn_size: int | None = None) -> int:
        """Weights of one dense MLP of width ``ffn_size`` (default: the dense width)."""
        f = self.ffn_size if ffn_size is None else ffn_size
        return (3 if self.gated_mlp else 2) * self.hidden_size * f

    def moe_params(self, active_only: bool) -> int:
        """Weights of one MoE block: routed experts (all, or the top-k), shared experts and router."""
        routed = self.experts_per_token if active_only else self.experts
        expert = self.mlp_params(self.moe_ffn_size)
        return routed * expert + self.shared_experts * expert + self.hidden_size * self.experts

    def layer_params(self, moe: bool, active_only: bool = False) -> int:
        mlp = self.moe_params(active_only) if moe else self.mlp_params()
        return self.attention_params() + mlp + self.norms_per_layer * self.hidden_size

    def embedding_params(self) -> int:
        """Input embedding plus the LM head when untied."""
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    def _count(self, active_only: bool) -> int:
        dense = self.layers - self.moe_layers
        body = dense * self.layer_params(False) + self.moe_layers * self.layer_params(True, active_only)
        return body + self.embedding_params() + self.hidden_size

    @property
    def params_total(self) -> int:
        """All weights (what memory holds)."""
        return self._count(active_only=False)

    @property
    def params_active(self) -> int:
        """Weights touched per token: top-k routed experts instead of all (equals total for dense models)."""
        return self._count(active_only=True)

    @property
    def params_active_nonembedding(self) -> int:
        """Active weights in matmuls per token, excluding the input embedding lookup (a gather, not a GEMM)."""
        return self.params_active - self.vocab_size * self.hidden_size - self.hidden_size

    def kv_bytes_per_token(self, bytes_per_element: float) -> float:
        """KV-cache bytes per token over all layers: ``2·a_kv·d·L`` (MLA: ``(d_c + d_rope)·L``)."""
        if self.uses_mla:
            return (self.kv_lora_rank + self.qk_rope_head_dim) * self.layers * bytes_per_element
        return 2 * self.kv_heads * self.head_dim * self.layers * bytes_per_element

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``gpumatch models show``."""
        d = asdict(self)
        d["params_total"] = self.params_total
        d["params_active"] = self.params_active
        return d
