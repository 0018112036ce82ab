"""Transformer architectures and their parameter accounting.

Parameter counts follow the layer shapes of the Hugging Face implementations (LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM, MixtralForCausalLM, Gemma2ForCausalLM, Phi3ForCausalLM,
DeepseekV2/V3ForCausalLM; Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM, Llama4ForCausalLM and
GptOssForCausalLM for the 2025 families), restated in ../shared/notes/estimator-formulas.md section A:

- embedding ``V·h``; LM head ``V·h`` unless tied;
- attention: Q ``h·a·d`` + K,V ``2·h·a_kv·d`` + O ``a·d·h``; biases ``a·d + 2·a_kv·d`` on Q,K,V when
  ``qkv_bias`` (Qwen2 always; Llama when ``attention_bias``) and ``h`` on O when ``attn_out_bias``
  (Llama ``attention_bias``); Phi-3's fused ``qkv_proj`` has the same count as separate Q,K,V;
  MLA replaces Q/K/V with its low-rank projections (see :meth:`ModelArch.attention_params`);
  ``qk_norm`` adds the per-head RMSNorm weights on queries and keys (``2·d``: Qwen3 ``q_norm``/``k_norm``,
  Gemma-3; Llama-4's ``use_qk_norm`` is weightless and does not count); ``attention_sinks`` adds one learned
  sink logit per head (``a``: gpt-oss ``self_attn.sinks``);
- MLP: ``k·h·f`` with ``k = 3`` for gated (SwiGLU/GeGLU, Phi-3's fused ``gate_up_proj`` included) and
  2 otherwise, plus ``2f + h`` (gated) or ``f + h`` biases when ``mlp_bias``; MoE layers hold ``E``
  routed experts of ``moe_ffn_size`` plus ``shared_experts`` and a router ``h·E`` (+ ``E`` when
  ``router_bias``: DeepSeek-V3's ``e_score_correction_bias``, gpt-oss's router bias); dense layers of an MoE
  model use ``ffn_size`` (Llama-4 Maverick: ``intermediate_size_mlp``);
- norms: ``norms_per_layer`` vectors of ``h`` per layer (2 for Llama-style pre-norm blocks, 4 for
  Gemma-2's pre+post norms around attention and MLP) plus the final norm; MLA adds its ``q_a``/``kv_a``
  norms (``q_lora_rank``, ``kv_lora_rank``).

Total parameters size memory; active parameters (top-k experts) size FLOPs and decode bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ModelArch:
    """A decoder-only transformer. Sizes are counts (not bytes); ``head_dim`` is per head.

    For MLA models ``head_dim`` is the query/key head size ``qk_nope_head_dim + qk_rope_head_dim`` and
    ``kv_heads == heads`` (what the published configs say); the KV cache uses the latent instead.
    ``sliding_window`` (tokens) applies to every layer when ``sliding_window_every`` is 0 or 1, and to
    one layer in ``sliding_window_every`` otherwise (Gemma-2 alternates local and global layers: 2).
    ``window_layers``, when set, is the exact number of windowed layers and overrides that rule (Gemma-3: 5
    local layers in 6; gpt-oss: ``layer_types``; Llama-4: the RoPE layers, 3 in 4). ``chunked_attention``
    says the window is Llama-4's chunked attention (a token attends within its aligned chunk of
    ``sliding_window`` tokens; the cache of such a layer holds at most one chunk) rather than a sliding one.
    ``expert_precision`` names the stored format of the routed experts in the published checkpoint when it
    differs from the rest (gpt-oss: ``mxfp4``; a :data:`gpumatch.vocab.WEIGHT_PRECISIONS` name; "" = none).
    ``scope`` says what the counts leave out of the published checkpoint ("" = nothing; multimodal models:
    the vision tower).
    """

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
    attn_out_bias: bool = False
    mlp_bias: bool = False
    router_bias: bool = False
    qk_norm: bool = False
    attention_sinks: bool = False
    window_layers: int | None = None
    chunked_attention: bool = False
    expert_precision: str = ""
    scope: str = ""
    hf_id: str = ""
    aliases: tuple[str, ...] = ()

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def sliding_layers(self) -> int:
        """Layers whose attention is limited to ``sliding_window`` tokens (0 without a window)."""
        if not self.sliding_window:
            return 0
        if self.window_layers is not None:
            return self.window_layers
        if self.sliding_window_every <= 1:
            return self.layers
        return (self.layers + self.sliding_window_every - 1) // self.sliding_window_every

    def attention_params(self) -> int:
        """Weights of one attention block: projections, their biases, MLA's latent norms, Q/K norms, sinks."""
        h, a, d = self.hidden_size, self.heads, self.head_dim
        if self.uses_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * a * qk_head
            else:
                q = h * a * qk_head
            kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_up = self.kv_lora_rank * a * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_down + kv_up + a * self.v_head_dim * h + (h if self.attn_out_bias else 0)
        qkv = h * d * (a + 2 * self.kv_heads)
        bias = d * (a + 2 * self.kv_heads) if self.qkv_bias else 0
        extra = (2 * d if self.qk_norm else 0) + (a if self.attention_sinks else 0)
        return qkv + bias + a * d * h + (h if self.attn_out_bias else 0) + extra

    def mlp_params(self, ffn_size: int | None = None) -> int:
        """Weights of one dense MLP of width ``ffn_size`` (default: the dense width), biases included."""
        f = self.ffn_size if ffn_size is None else ffn_size
        k = 3 if self.gated_mlp else 2
        bias = ((k - 1) * f + self.hidden_size) if self.mlp_bias else 0
        return k * self.hidden_size * f + bias

    def moe_params(self, active_only: bool) -> int:
        """Weights of one MoE block: routed experts (all, or the top-k), shared experts and router."""
        routed = self.experts_per_token if active_only else self.experts
        expert = self.mlp_params(self.moe_ffn_size)
        router = self.hidden_size * self.experts + (self.experts if self.router_bias else 0)
        return routed * expert + self.shared_experts * expert + router

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
        """Active weights in matmuls per token, excluding the input embedding lookup (a gather, not a GEMM).

        The LM head stays in (it is a GEMM). This is also how DeepSeek counts "activated" parameters.
        """
        return self.params_active - self.vocab_size * self.hidden_size - self.hidden_size

    @property
    def params_nonembedding(self) -> int:
        """All weights except the input embedding and the (untied) LM head: the Qwen/Gemma model-card
        "non-embedding parameters" convention (final norm included)."""
        return self.params_total - self.embedding_params()

    def kv_bytes_per_token(self, bytes_per_element: float) -> float:
        """KV-cache bytes per token over all layers: ``2·a_kv·d·L`` (MLA: ``(d_c + d_rope)·L``).

        This is the cost of one more token of context while every layer still keeps it; layers with a
        sliding window stop growing past the window (see :meth:`kv_bytes_for_context`).
        """
        return self._kv_elements_per_token_layer() * self.layers * bytes_per_element

    def kv_bytes_for_context(self, context_tokens: int, bytes_per_element: float) -> float:
        """KV-cache bytes of one sequence holding ``context_tokens``, windowed layers capped at the window."""
        per_layer = self._kv_elements_per_token_layer() * bytes_per_element
        windowed = self.sliding_layers
        capped = min(context_tokens, self.sliding_window) if self.sliding_window else context_tokens
        return per_layer * (windowed * capped + (self.layers - windowed) * context_tokens)

    def _kv_elements_per_token_layer(self) -> int:
        if self.uses_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``gpumatch models show``."""
        d = asdict(self)
        d["aliases"] = list(self.aliases)
        d["params_total"] = self.params_total
        d["params_active"] = self.params_active
        d["params_active_nonembedding"] = self.params_active_nonembedding
        d["kv_bytes_per_token_bf16"] = self.kv_bytes_per_token(2)
        return d
