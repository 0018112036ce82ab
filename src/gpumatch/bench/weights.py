"""Real weights into the bench decoder, and the simulated weight-only quantizations of the quality check.

:func:`load_weights` copies a checked Hugging Face folder (:mod:`gpumatch.bench.hfweights`) into a
:class:`~gpumatch.bench.llama.Llama`, one tensor at a time through ``safetensors.safe_open`` (host memory holds one
tensor beyond the model), each tensor cast to the model's dtype. Q, K and V go into the rows of the fused
``wqkv`` in that order, gate and up into ``w13``; nothing is downloaded.

Quantization (``transform`` of the loader, applied to each block's Linear weight as it is loaded; the
embedding, the norms and the LM head stay as stored, as weight-only schemes such as LLM.int8() and AWQ leave
them). It is **simulated**: quantize then dequantize back to the model's dtype, so the GEMMs stay bf16 and the
rounding error is exactly the format's; it measures quality, not speed.

- ``int8``: symmetric per output channel (row r of W): scale s_r = max|W_r| / 127, q = clamp(round(W/s_r),
  -127, 127), W' = q · s_r (Dettmers et al. 2022, arXiv:2208.07339, vector-wise quantization).
- ``fp8``: e4m3 (``torch.float8_e4m3fn``, largest finite 448) per output channel: s_r = max|W_r| / 448,
  W' = e4m3(W / s_r) · s_r (Micikevicius et al. 2022, "FP8 Formats for Deep Learning", arXiv:2209.05433). The
  cast runs on the model's device, CUDA or CPU alike; it is not a fp8 GEMM on either.
- ``bf16``: the stored weights (the reference).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gpumatch.bench.hfweights import LINEAR_SUFFIXES
from gpumatch.bench.llama import Llama

QUANT_VARIANTS = ("bf16", "int8", "fp8")
INT8_MAX = 127.0
FP8_E4M3_MAX = 448.0
Transform = Callable[[str, torch.Tensor], torch.Tensor]


def _target(model: Llama, name: str) -> tuple[torch.Tensor, int]:
    """The model tensor a Hugging Face tensor goes into, and its first row there."""
    s = model.s
    if name == "model.embed_tokens.weight":
        return model.embed.weight, 0
    if name == "model.norm.weight":
        return model.norm.weight, 0
    if name == "lm_head.weight":
        if model.lm_head is None:
            raise KeyError(name)
        return model.lm_head.weight, 0
    parts = name.split(".")  # model.layers.{i}.{module}.{tensor}.weight
    block: Any = model.layers[int(parts[2])]
    rest = ".".join(parts[3:])
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    table: dict[str, tuple[torch.Tensor, int]] = {
        "self_attn.q_proj.weight": (block.attn.wqkv.weight, 0),
        "self_attn.k_proj.weight": (block.attn.wqkv.weight, q),
        "self_attn.v_proj.weight": (block.attn.wqkv.weight, q + kv),
        "self_attn.o_proj.weight": (block.attn.wo.weight, 0),
        "mlp.gate_proj.weight": (block.mlp.w13.weight, 0),
        "mlp.up_proj.weight": (block.mlp.w13.weight, s.ffn),
        "mlp.down_proj.weight": (block.mlp.w2.weight, 0),
        "input_layernorm.weight": (block.attn_norm.weight, 0),
        "post_attention_layernorm.weight": (block.mlp_norm.weight, 0),
    }
    return table[rest]


def load_weights(model: Llama, folder: str | Path, files: dict[str, str],
                 transform: Transform | None = None) -> int:
    """Copy every tensor ``files`` maps (name -> safetensors file in ``folder``) into ``model``; returns the
    number of tensors loaded. ``transform(name, tensor)`` (float32 in, float32 out) runs on each before the
    copy, on the model's device."""
    from safetensors import safe_open

    by_file: dict[str, list[str]] = {}
    for name, file in files.items():
        if (name == "lm_head.weight" and model.lm_head is None) or name.endswith("rotary_emb.inv_freq"):
            continue  # tied: the embedding serves as the head; RoPE's frequencies are recomputed
        by_file.setdefault(file, []).append(name)
    dev = model.embed.weight.device
    loaded = 0
    with torch.no_grad():
        for file, names in sorted(by_file.items()):
            with safe_open(str(Path(folder) / file), framework="pt", device="cpu") as f:
                for name in names:
                    dst, row = _target(model, name)
                    t = f.get_tensor(name).to(dev)
                    if transform is not None:
                        t = transform(name, t.float())
                    dst[row:row + t.shape[0]].copy_(t.to(dst.dtype))
                    loaded += 1
    return loaded


def quantize_dequantize(w: torch.Tensor, variant: str) -> torch.Tensor:
    """W' of ``variant`` for a 2-D float32 weight (module docstring); rows of zeros stay zero."""
    if variant == "bf16":
        return w
    top = w.abs().amax(dim=1, keepdim=True)
    if variant == "int8":
        s = (top / INT8_MAX).clamp_min(torch.finfo(torch.float32).tiny)
        return torch.clamp(torch.round(w / s), -INT8_MAX, INT8_MAX) * s
    if variant == "fp8":
        s = (top / FP8_E4M3_MAX).clamp_min(torch.finfo(torch.float32).tiny)
        return (w / s).to(torch.float8_e4m3fn).to(torch.float32) * s
    raise ValueError(f"unknown quantization {variant!r}; one of {', '.join(QUANT_VARIANTS)}")


class Quantizer:
    """A loader ``transform`` for ``variant``: quantizes the blocks' Linear weights and keeps the relative
    error ||W' - W||_F / ||W||_F summed over them (``rel_error``)."""

    def __init__(self, variant: str) -> None:
        if variant not in QUANT_VARIANTS:
            raise ValueError(f"unknown quantization {variant!r}; one of {', '.join(QUANT_VARIANTS)}")
        self.variant = variant
        self.quantized = 0
        self._err2 = 0.0
        self._ref2 = 0.0

    def __call__(self, name: str, w: torch.Tensor) -> torch.Tensor:
        if self.variant == "bf16" or not name.endswith(LINEAR_SUFFIXES):
            return w
        out = quantize_dequantize(w, self.variant)
        self._err2 += float((out - w).pow(2).sum())
        self._ref2 += float(w.pow(2).sum())
        self.quantized += 1
        return out

    @property
    def rel_error(self) -> float:
        """||W' - W||_F / ||W||_F over every quantized weight (0 for bf16)."""
        return (self._err2 / self._ref2) ** 0.5 if self._ref2 else 0.0
