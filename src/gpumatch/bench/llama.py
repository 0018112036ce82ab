"""A lean Llama-3-shaped decoder in plain torch: RMSNorm, RoPE, GQA attention, SwiGLU MLP.

Layer shapes follow Hugging Face's LlamaForCausalLM (Q/K/V fused into one projection and gate/up into
another, which changes no parameter count and saves launches, as gpt-fast does). Attention is
``torch.nn.functional.scaled_dot_product_attention``:

- prefill and training: causal, GQA through ``enable_gqa=True`` on the flash backend when torch offers
  it, else K/V repeated to the query heads (HF's ``repeat_kv``); :func:`attention_path` says which ran;
- decode (one new token): the query heads of each KV group are laid out as a length-G query against that
  group's static K/V cache (no mask, no repeat), so the K/V cache is read once per step. Two kernels
  (:data:`DECODE_ATTENTION`): ``sdpa`` (one fused call; its grid is batch × KV heads, 8 blocks at batch 1
  on Llama-3-8B, so a long cache is read by a few multiprocessors) or ``split``: scores as one batched
  matmul over the whole cache, softmax, then P·V over chunks of :data:`DECODE_SPLIT_TOKENS` tokens summed
  (exact, since P is already normalized): the split-KV idea of Flash-Decoding (Dao et al., 2023,
  https://crfm.stanford.edu/2023/10/12/flashdecoding.html), spread over all multiprocessors; or ``flex``:
  ``torch.nn.attention.flex_attention`` with ``enable_gqa``, which under ``torch.compile`` becomes the
  flex-decoding Triton kernel (the cache split over the multiprocessors, the partial results merged by their
  log-sum-exp; uncompiled it runs torch's reference implementation, for tests only). ``auto`` (the
  default) takes ``split`` when batch × KV heads < :data:`SPLIT_BELOW_BLOCKS`, else ``sdpa``. Measured on
  an H200 (Llama-3-8B shape, compiled + CUDA graph, 2026-12-05,
  tests/data/measurements/2026-12-05-h200-decode-mbu-probe.json): batch 1, context 8192: 5.31 ms split
  against 7.71 ms sdpa; batch 1, context 2048: 4.99 against 5.47; batch 16, context 2048: 6.61 against 5.90.

Weights are random (normal, std 0.02) unless a local Hugging Face folder is loaded into them
(:mod:`gpumatch.bench.weights`); nothing is downloaded.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from gpumatch.bench.shapes import LlamaShape

_GQA_PATH: dict[str, str] = {}

DECODE_ATTENTION = ("auto", "split", "sdpa", "flex")
"""Decode attention kernels (module docstring); the first is the default."""

SPLIT_BELOW_BLOCKS = 64
"""``auto`` decode attention splits the cache when SDPA's grid (batch × KV heads blocks) is below this: about
half an H100/H200's 132 multiprocessors (module docstring's measurements)."""

DECODE_SPLIT_TOKENS = 256
"""Cache tokens per P·V chunk of ``split`` decode attention (a cache not a multiple of it is one chunk)."""


def split_kv_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       chunk: int = DECODE_SPLIT_TOKENS) -> torch.Tensor:
    """softmax(q·kᵀ/√D)·v of q (B,Hkv,G,D) over k, v (B,Hkv,L,D), with P·V summed over chunks of the cache.

    Scores and softmax in fp32 (or the inputs' wider type); the chunk partial products are summed likewise."""
    b, h, g, d = q.shape
    length = k.shape[2]
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = torch.matmul(q, k.transpose(-1, -2)).to(acc) * d ** -0.5
    p = torch.softmax(scores, dim=-1).to(q.dtype)
    if length % chunk or length <= chunk:
        return torch.matmul(p, v)
    n = length // chunk
    parts = torch.matmul(p.view(b, h, g, n, chunk).transpose(2, 3), v.view(b, h, n, chunk, d))
    return parts.to(acc).sum(dim=2).to(q.dtype)


def flex_decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q·kᵀ/√D)·v of q (B,H,1,D) over k, v (B,Hkv,L,D) through flex attention (GQA, no mask), returned
    as (B,Hkv,G,D) like the other decode kernels (G = H / Hkv query heads per KV head, in head order)."""
    from torch.nn.attention.flex_attention import flex_attention

    b, h, _, d = q.shape
    out = flex_attention(q, k, v, enable_gqa=True)
    return out.reshape(b, k.shape[1], h // k.shape[1], d)


def attention_path() -> str:
    """How prefill/training attention handled GQA in this process ('flash-gqa', 'repeat-kv' or 'unused')."""
    return _GQA_PATH.get("path", "unused")


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal SDPA of q (B,H,S,D) over k, v (B,Hkv,S,D)."""
    path = _GQA_PATH.get("path")
    if path != "repeat-kv" and q.is_cuda:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        try:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            _GQA_PATH["path"] = "flash-gqa"
            return out
        except RuntimeError:
            _GQA_PATH["path"] = "repeat-kv"
    if path is None and not q.is_cuda:
        _GQA_PATH["path"] = "repeat-kv"
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class RMSNorm(nn.Module):
    """x / rms(x) · w, computed in fp32 and cast back (HF LlamaRMSNorm)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_inv_freq(shape: LlamaShape, device: torch.device) -> torch.Tensor:
    """RoPE's inverse frequencies (head_dim/2,) in rad per position: theta^(-2i/d) (Su et al. 2021,
    arXiv:2104.09864), then the config's ``rope_scaling``:

    - ``linear``: divided by ``factor`` (position interpolation, Chen et al. 2023, arXiv:2306.15595);
    - ``llama3``: wavelengths 2π/f longer than original_max_position_embeddings / low_freq_factor are divided by
      ``factor``, shorter than .../ high_freq_factor kept, and in between blended with
      s = (original_max / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor) as
      (1 - s)·f/factor + s·f (the Llama 3.1 recipe, "The Llama 3 Herd of Models", arXiv:2407.21783, as
      Hugging Face transformers' ``rope_type = "llama3"`` applies it).
    """
    d = shape.head_dim
    inv = 1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    sc = shape.rope_scaling or {}
    kind = sc.get("rope_type", sc.get("type", "default"))
    if kind == "linear":
        return inv / float(sc["factor"])
    if kind == "llama3":
        factor, low, high = float(sc["factor"]), float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
        old = float(sc["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        s = ((old / wavelen - low) / (high - low)).clamp(0.0, 1.0)
        blended = (1 - s) * inv / factor + s * inv
        return torch.where(wavelen > old / low, inv / factor, torch.where(wavelen < old / high, inv, blended))
    return inv


def rope_tables(shape: LlamaShape, positions: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """cos and sin of RoPE (rotate-half layout, as Hugging Face's Llama checkpoints store Q and K), stacked as
    (2, positions, head_dim)."""
    inv = rope_inv_freq(shape, device)
    t = torch.arange(positions, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return torch.stack((emb.cos(), emb.sin())).to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.s = s
        self.wqkv = nn.Linear(s.hidden, (s.heads + 2 * s.kv_heads) * s.head_dim, bias=False)
        self.wo = nn.Linear(s.heads * s.head_dim, s.hidden, bias=False)
        self.decode_attention = DECODE_ATTENTION[0]

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, _ = x.shape
        s = self.s
        q, k, v = self.wqkv(x).split([s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1)
        q = q.view(b, t, s.heads, s.head_dim).transpose(1, 2)
        k = k.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = v.view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
        return q, k, v

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """Full causal attention over x (B,S,h); rope is (2,S,D)."""
        b, t, _ = x.shape
        q, k, v = self._qkv(x)
        q, k = _rotate(q, rope[0], rope[1]), _rotate(k, rope[0], rope[1])
        out = _causal_attention(q, k, v)
        y: torch.Tensor = self.wo(out.transpose(1, 2).reshape(b, t, -1))
        return y

    def forward_cached(
        self, x: torch.Tensor, rope: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        """One new token per sequence, x (B,1,h), written at ``pos`` into caches (B,Hkv,L,D); attends to all L."""
        b = x.shape[0]
        s = self.s
        q, k, v = self._qkv(x)
        q, k = _rotate(q, rope[0], rope[1]), _rotate(k, rope[0], rope[1])
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        group = s.heads // s.kv_heads
        qg = q.reshape(b, s.kv_heads, group, s.head_dim)
        kernel = self.decode_attention
        if kernel == "auto":
            kernel = "split" if b * s.kv_heads < SPLIT_BELOW_BLOCKS else "sdpa"
        if kernel == "sdpa":
            out = F.scaled_dot_product_attention(qg, k_cache, v_cache)
        elif kernel == "flex":
            out = flex_decode_attention(q, k_cache, v_cache)
        else:
            out = split_kv_attention(qg, k_cache, v_cache)
        y: torch.Tensor = self.wo(out.reshape(b, 1, s.heads * s.head_dim))
        return y


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) · up(x)), gate and up fused in one projection."""

    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.ffn = s.ffn
        self.w13 = nn.Linear(s.hidden, 2 * s.ffn, bias=False)
        self.w2 = nn.Linear(s.ffn, s.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w13(x).split([self.ffn, self.ffn], -1)
        y: torch.Tensor = self.w2(F.silu(gate) * up)
        return y


class Block(nn.Module):
    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(s.hidden, s.norm_eps)
        self.attn = Attention(s)
        self.mlp_norm = RMSNorm(s.hidden, s.norm_eps)
        self.mlp = MLP(s)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rope)
        y: torch.Tensor = x + self.mlp(self.mlp_norm(x))
        return y

    def forward_cached(
        self, x: torch.Tensor, rope: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.attn.forward_cached(self.attn_norm(x), rope, pos, k_cache, v_cache)
        y: torch.Tensor = x + self.mlp(self.mlp_norm(x))
        return y


class Llama(nn.Module):
    """Embedding, ``layers`` blocks, final RMSNorm, LM head (tied to the embedding when ``shape.tied``)."""

    def __init__(self, s: LlamaShape) -> None:
        super().__init__()
        self.s = s
        self.embed = nn.Embedding(s.vocab, s.hidden)
        self.layers = nn.ModuleList(Block(s) for _ in range(s.layers))
        self.norm = RMSNorm(s.hidden, s.norm_eps)
        self.lm_head = None if s.tied else nn.Linear(s.hidden, s.vocab, bias=False)
        self.recompute = False

    def head(self, x: torch.Tensor) -> torch.Tensor:
        w = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, w)

    def hidden_states(self, tokens: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """Final-normed hidden states (B,S,h) of a full causal pass; rope is (2,S,D)."""
        x = self.embed(tokens)
        for block in self.layers:
            if self.recompute and torch.is_grad_enabled():
                x = checkpoint(block, x, rope, use_reentrant=False)
            else:
                x = block(x, rope)
        y: torch.Tensor = self.norm(x)
        return y

    def forward(self, tokens: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """Logits (B,S,V) for every position (training)."""
        return self.head(self.hidden_states(tokens, rope))

    def prefill_logits(self, tokens: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        """Logits (B,V) of the last position only, as serving engines compute them."""
        return self.head(self.hidden_states(tokens, rope)[:, -1])


def set_decode_attention(model: Llama, kernel: str) -> None:
    """Use decode attention ``kernel`` (one of :data:`DECODE_ATTENTION`) in every layer of ``model``."""
    if kernel not in DECODE_ATTENTION:
        raise ValueError(f"unknown decode attention {kernel!r}; one of {', '.join(DECODE_ATTENTION)}")
    for layer in model.layers:
        cast(Block, layer).attn.decode_attention = kernel


def build_model(shape: dict[str, Any] | LlamaShape, device: torch.device, dtype: torch.dtype,
                init: bool = True) -> Llama:
    """A randomly initialized model (normal std 0.02, norms 1) built directly on ``device`` in ``dtype``;
    ``init=False`` leaves torch's default initialization (the caller loads weights over it)."""
    s = shape if isinstance(shape, LlamaShape) else LlamaShape.from_dict(shape)
    with torch.device(device):
        model = Llama(s)
    model.to(dtype)
    if not init:
        return model
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    return model


def decode_logits(
    model: Llama,
    tokens: torch.Tensor,
    pos: torch.Tensor,
    rope_all: torch.Tensor,
    caches: list[tuple[torch.Tensor, torch.Tensor]],
    layer_fn: Any = None,
    head_fn: Any = None,
) -> torch.Tensor:
    """Logits (B,V) for tokens (B,1) at position ``pos`` (shape (1,)); writes their K/V into the caches.

    The caches (B,Hkv,L,D) must hold positions 0..L-1 with ``pos = L-1``: attention reads all L entries.
    ``layer_fn(block, x, rope, pos, k, v)`` replaces ``block.forward_cached`` and ``head_fn(model, x)``
    :func:`final_logits` (compiled versions, say).
    """
    rope = rope_all.index_select(1, pos)
    x = model.embed(tokens)
    for layer, (k, v) in zip(model.layers, caches, strict=True):
        block = cast(Block, layer)
        x = block.forward_cached(x, rope, pos, k, v) if layer_fn is None else layer_fn(block, x, rope, pos, k, v)
    return final_logits(model, x) if head_fn is None else cast(torch.Tensor, head_fn(model, x))


def final_logits(model: Llama, x: torch.Tensor) -> torch.Tensor:
    """Logits (B,V) of the last position of hidden states x (B,S,h): final RMSNorm, then the LM head."""
    return model.head(model.norm(x[:, -1:]))[:, -1]


def decode_step(
    model: Llama,
    tokens: torch.Tensor,
    pos: torch.Tensor,
    rope_all: torch.Tensor,
    caches: list[tuple[torch.Tensor, torch.Tensor]],
    layer_fn: Any = None,
    head_fn: Any = None,
) -> torch.Tensor:
    """Greedy next token (B,) of :func:`decode_logits`."""
    return decode_logits(model, tokens, pos, rope_all, caches, layer_fn, head_fn).argmax(dim=-1)
