"""The work a measured step must do: the bytes of a decode step (the MBU numerator) and the model FLOPs of a
prefill and a training step (the MFU numerator). Plain arithmetic on a :class:`~gpumatch.bench.shapes.LlamaShape`;
no torch.

Conventions (docs/bench.md, "Ratios to the card's ceilings"):

- decode bytes: every weight read once (an untied embedding table only by its gathered rows), the K/V cache read
  over the context and the new token's K/V written; activations and logits are left out (a few MB);
- prefill FLOPs: 2 per multiply-add of every projection for each token, the causal attention products
  (Q·Kᵀ and P·V over the lower triangle: 2 · S² · head_dim per head and sequence), and the LM head on the last
  position only (serving engines compute no other logits);
- training FLOPs: model FLOPs, 3 × the forward of every position (forward + backward, the PaLM appendix B
  convention, arXiv:2204.02311): recomputation is not counted, so MFU stays comparable across recompute settings.
"""

from __future__ import annotations

from typing import Any

from gpumatch.bench.shapes import LlamaShape


def _shape(shape: LlamaShape | dict[str, Any]) -> LlamaShape:
    return shape if isinstance(shape, LlamaShape) else LlamaShape.from_dict(shape)


def decode_bytes(shape: LlamaShape | dict[str, Any], batch: int, context: int, elem_bytes: int = 2) -> dict[str, int]:
    """The fewest bytes one decode step moves through device memory, by part (elements of ``elem_bytes``):

    - ``weight_bytes``: every weight read once, except an untied embedding table (a tied one is read whole as the
      LM head, so then it counts);
    - ``embedding_row_bytes``: the gathered rows of an untied table, batch × hidden elements;
    - ``kv_read_bytes``: the K/V cache over the context, 2 · layers · KV heads · head dim elements per token,
      × batch × context (attention reads every cached position, the new one included);
    - ``kv_write_bytes``: the new token's K/V, the same per token × batch;
    - ``total_bytes``: their sum.
    """
    s = _shape(shape)
    weights = s.layers * s.params_per_layer + s.hidden + s.vocab * s.hidden  # blocks, final norm, head or table
    kv_token = 2 * s.layers * s.kv_heads * s.head_dim * elem_bytes
    out = {"weight_bytes": weights * elem_bytes, "embedding_row_bytes": 0 if s.tied else batch * s.hidden * elem_bytes,
           "kv_read_bytes": kv_token * batch * context, "kv_write_bytes": kv_token * batch}
    out["total_bytes"] = sum(out.values())
    return out


def _matmul_params(s: LlamaShape) -> int:
    """Weights that multiply each token in the layers (projections; the norms are element-wise)."""
    return s.layers * (s.params_per_layer - 2 * s.hidden)


def _causal_attention_flops(s: LlamaShape, batch: int, seq: int) -> float:
    """Q·Kᵀ and P·V over the causal lower triangle: 2 · S² · head_dim FLOPs per head, layer and sequence."""
    return 2.0 * s.layers * s.heads * s.head_dim * batch * seq * seq


def prefill_flops(shape: LlamaShape | dict[str, Any], batch: int, seq: int) -> float:
    """FLOPs of a prefill of batch × seq tokens that returns the last position's logits (module docstring)."""
    s = _shape(shape)
    return (2.0 * _matmul_params(s) * batch * seq + _causal_attention_flops(s, batch, seq)
            + 2.0 * s.hidden * s.vocab * batch)


def train_flops(shape: LlamaShape | dict[str, Any], batch: int, seq: int) -> float:
    """Model FLOPs of one training step on batch × seq tokens: 3 × (the projections and LM head of every
    position + causal attention), recomputation not counted (module docstring)."""
    s = _shape(shape)
    forward = 2.0 * (_matmul_params(s) + s.hidden * s.vocab) * batch * seq + _causal_attention_flops(s, batch, seq)
    return 3.0 * forward
