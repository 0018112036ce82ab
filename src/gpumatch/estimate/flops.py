"""Floating-point work per token and per layer (estimator-formulas.md section C).

Sources:
- Dense matmul FLOPs = 2 × multiply-accumulates, so a forward token costs ``2·P`` over the active
  matmul weights (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1;
  EleutherAI "Transformer Math 101").
- Attention scores and A·V: ``4·a·d·ctx`` per token per layer (``2·a·(d_qk + d_v)·ctx`` in general);
  a causal prefill of ``s`` tokens attends on average to ``(s + 1)/2`` of them.
- Training: backward = 2 × forward for matmuls (activation and weight gradients; Narayanan et al. 2021,
  "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section 5.1);
  full recompute adds one forward; frozen weights (LoRA/QLoRA) skip the weight-gradient GEMMs.
  Flash-attention backward recomputes the scores: 5 matmuls against 2 in forward, i.e. 2.5 × forward
  (Dao 2023, FlashAttention-2, section 3.1.2); a materialized backward is 2 × forward; selective
  recompute (Korthikanti et al. 2022) re-runs only the attention core.
- MoE: active experts (top-k) set the FLOPs; the expected number of distinct experts that ``b`` tokens
  touch, ``E·(1 − (1 − k/E)^b)``, sets the weight bytes read in a decode step (uniform routing assumed).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gpumatch.estimate._num import Num, vmax, vmin, where
from gpumatch.estimate.case import Case, ModelNums


def layer_gemm_flops(m: ModelNums, tokens: Num) -> Num:
    """Forward GEMM FLOPs of one layer for ``tokens`` tokens (unsharded)."""
    return 2.0 * tokens * m.layer_matmul_params_active


def effective_context(m: ModelNums, context: Num) -> Num:
    """Keys attended per query averaged over layers: sliding-window layers stop at the window
    (Mistral: every layer; Gemma-2: every other layer)."""
    if m.window_fraction == 0.0:
        return context
    return (1.0 - m.window_fraction) * context + m.window_fraction * vmin(context, m.window)


def attention_flops(m: ModelNums, tokens: Num, context: Num) -> Num:
    """Forward score and A·V FLOPs of one layer for ``tokens`` queries attending ``context`` keys each
    (capped by sliding windows, :func:`effective_context`)."""
    return 2.0 * m.attention_dot_dim * effective_context(m, context) * tokens


def head_flops(m: ModelNums, tokens: Num) -> Num:
    """LM-head FLOPs for ``tokens`` positions."""
    return 2.0 * tokens * m.vocab * m.hidden


def prefill_context(prompt: Num) -> Num:
    """Mean keys attended per query in a causal pass over ``prompt`` tokens."""
    return (prompt + 1.0) / 2.0


def decode_context(prompt: Num, gen: Num) -> Num:
    """Mean keys attended per decode step over ``gen`` generated tokens after a ``prompt``."""
    return prompt + (gen + 1.0) / 2.0


def training_multipliers(c: Case) -> tuple[Num, Num]:
    """(GEMM, attention-core) work per training step in units of one forward (module docstring)."""
    gemm = 2.0 + c.full_train + c.rc_full
    fwd, bwd = attention_training_split(c)
    return gemm, fwd + bwd


def attention_training_split(c: Case) -> tuple[Num, Num]:
    """(forward-kernel, backward-kernel) attention-core work per training step in units of one forward: the
    forward, plus its recomputation under full (or, without flash attention, selective) recompute; the
    backward is 2.5 forwards with flash attention (it recomputes the scores) and 2 without."""
    bwd = c.flash * 2.5 + (1.0 - c.flash) * 2.0
    fwd = 1.0 + c.rc_full + c.rc_selective * (1.0 - c.flash) * (1.0 - c.rc_full)
    return fwd, bwd


def model_flops_per_token_train(m: ModelNums, c: Case) -> Num:
    """Algorithmic training FLOPs per token (no recompute) for MFU: (6 or 4)·P + 3 × attention (causal)."""
    gemm = (2.0 + c.full_train) * 2.0 * m.matmul_params_active
    return gemm + 3.0 * m.layers * attention_flops(m, 1.0, prefill_context(c.seq))


def routed_expert_params(m: ModelNums) -> float:
    """Per-layer (averaged) weights of the ``k`` routed experts one token passes through (0 for a dense model):
    the part of ``layer_matmul_params_active`` that runs as grouped expert GEMMs; shared experts are not in it."""
    if m.experts <= 0:
        return 0.0
    return m.experts_per_token * m.expert_params_per_layer * m.moe_layers / m.layers


def moe_extra_weight_params(m: ModelNums, batch: Num) -> Num:
    """Per-layer (averaged) expert weights read beyond the top-k when ``batch`` tokens route independently.

    A decode step reads each expert that at least one of its ``batch`` tokens routes to. Under a uniform router a
    token's top-k set misses a given expert with probability ``C(E−1, k) / C(E, k) = 1 − k/E``, so the step reads
    ``E·(1 − (1 − k/E)^batch)`` distinct experts per MoE layer (the occupancy formula): ``k`` for one token, all
    ``E`` for large batches (DeepSeek-V3, E = 256, k = 8: 57 at batch 8, 163 at 32, 222 at 64). Shared experts are
    in the active weights already. Real routers are skewed, which lowers the count: this is an upper estimate.
    """
    if m.experts <= 0:
        return 0.0
    return (touched_experts(m, batch) - m.experts_per_token) * m.expert_params_per_layer * m.moe_layers / m.layers


def touched_experts(m: ModelNums, tokens: Num) -> Num:
    """Distinct experts per MoE layer that ``tokens`` independently routed tokens reach (the occupancy formula of
    :func:`moe_extra_weight_params`; ``k`` for one token, ``E`` for many)."""
    k, e = m.experts_per_token, m.experts
    return e * (1.0 - (1.0 - k / e) ** tokens)


def grouped_expert_penalty_params(m: ModelNums, tokens: Num, half_tokens: float) -> Num:
    """Expert weights per layer (averaged) to add to what ``tokens`` tokens read so that the expert GEMMs run at
    the grouped GEMM's rate: a touched expert with ``u`` tokens streams its weights at ``u / (u + u_half)`` of a
    dense GEMM's rate (``u = tokens · k / touched``, ``u_half = half_tokens``), i.e. its bytes count
    ``1 + u_half / u`` times. Measured with ``torch._grouped_mm`` on an H200 (2026-12-04,
    ``tests/data/measurements/2026-12-04-h200-moe-grouped.jsonl``: 0.56-0.58 of the dense rate at one token per
    expert, 0.60-0.64 at 1.3-1.6, 0.74-0.78 at 2.2-2.3, 0.82-0.85 at about 4, three expert shapes). Once every
    expert is touched the same probe's time stays flat with more tokens (1027 and 1043 µs at 128 and 256 tokens),
    so the effective weights never fall as tokens grow: past the token count where they peak they stay there."""
    if m.experts <= 0:
        return 0.0
    peak_tokens = _grouped_peak_tokens(m.experts, m.experts_per_token, half_tokens)
    weights = _grouped_weights(m.experts, m.experts_per_token, half_tokens, tokens)
    held = vmax(weights, _grouped_weights(m.experts, m.experts_per_token, half_tokens, peak_tokens))
    effective = where(tokens > peak_tokens, held, weights)
    return (effective - touched_experts(m, tokens)) * m.expert_params_per_layer * m.moe_layers / m.layers


def _grouped_weights(e: float, k: float, half_tokens: float, tokens: Num) -> Num:
    """Expert matrices a grouped GEMM's time is worth, in units of one expert: touched × (1 + u_half / u)."""
    touched = e * (1.0 - (1.0 - k / e) ** tokens)
    return touched * (1.0 + half_tokens * touched / (tokens * k))


@lru_cache(maxsize=256)
def _grouped_peak_tokens(e: float, k: float, half_tokens: float) -> float:
    """Tokens at which :func:`_grouped_weights` peaks (searched on a fine geometric grid up to 64 E)."""
    grid = np.geomspace(1.0, 64.0 * e, 4096)
    return float(grid[int(np.argmax(_grouped_weights(e, k, half_tokens, grid)))])
