"""LoRA and QLoRA on the bench's Llama: a frozen base, rank-r adapters, and a 4-bit base in plain torch.

What the bench trains (recorded in every result row; the estimator's assumptions in brackets,
``gpumatch.estimate.options`` and ``gpumatch.estimate.case``):

- Targets: every linear layer of a block, q, k, v, o, gate, up and down [the same seven: ``lora_params_per_rank_layer``
  counts ``r·(in + out)`` for each]. The model fuses q/k/v and gate/up into one projection each
  (:mod:`gpumatch.bench.llama`); a fused projection gets one adapter per part: ``A`` stacks the parts' ``r × in``
  matrices and ``B`` the parts' ``out_i × r`` matrices, applied part by part, so the parameter count and the
  FLOPs are those of separate adapters.
- Adapters: fp32 parameters [PEFT's default ``autocast_adapter_dtype``: 4 bytes of weights, 4 of gradients, 8 of
  AdamW moments per adapter parameter], cast to bf16 where they are used (what autocast does under PEFT), scaled
  by ``ALPHA / r``; no dropout (PEFT's default ``lora_dropout=0``). ``A`` and ``B`` are both random (normal, std
  0.02), not ``B = 0`` as at the start of a real fine-tune, so no GEMM runs on zeros.
- Base: every parameter frozen (``requires_grad=False``): embedding, norms, LM head and the block projections, in
  bf16. AdamW (fused on CUDA) holds only the adapter parameters.
- QLoRA: the seven block projections stored in NF4 (Dettmers et al. 2023, "QLoRA", section 3: 16 NormalFloat
  levels, the values below as bitsandbytes' ``get_4bit_type('nf4')`` lists them), two 4-bit codes packed per
  uint8 (first element in the high nibble), one absmax scale per block of 64 weights kept in bf16 (no double
  quantization: 0.5 + 2/64 = 0.531 bytes per weight, against 0.5 + 0.127/8 = 0.516 with it [the estimator's
  ``nf4``]). Embedding and LM head stay bf16, as transformers' bitsandbytes integration keeps them [the estimator
  counts every weight at ``nf4``]. Each use dequantizes the layer's weight in plain torch (a 256-entry byte ->
  two-value table through ``F.embedding``, then the block scales) into a transient bf16 matrix: in forward, and
  again in backward for the input gradient (a custom autograd function that saves no dequantized weight, as
  bitsandbytes' ``MatMul4Bit`` does). That costs more memory traffic than bitsandbytes' fused CUDA kernel
  (about 10 bytes per weight per dequantization against 2.5), so a step is an upper bound for a real QLoRA step;
  bitsandbytes is not on the device.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from gpumatch.bench.llama import Block, Llama

VARIANTS = ("lora", "qlora")
ALPHA = 16.0
"""LoRA alpha; the adapter output is scaled by ``ALPHA / r``."""
BLOCK = 64
"""Weights per NF4 absmax scale (bitsandbytes' and QLoRA's block size)."""
NF4_LEVELS = (
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
)
BASE_FORMAT = {"lora": "bf16", "qlora": "nf4-b64-bf16-absmax"}
TARGETS = "q,k,v,o,gate,up,down"


def quantize_nf4(weight: torch.Tensor, block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed uint8 codes of ``numel/2``, bf16 absmax per ``block`` weights) of ``weight`` (module docstring)."""
    if weight.numel() % block:
        raise ValueError(f"NF4 needs a multiple of {block} weights, not {weight.numel()}")
    blocks = weight.detach().reshape(-1, block).float()
    absmax = blocks.abs().amax(dim=1).clamp_min(1e-12)
    levels = torch.tensor(NF4_LEVELS, device=weight.device)
    codes = torch.bucketize(blocks / absmax[:, None], (levels[1:] + levels[:-1]) / 2).reshape(-1, 2)
    packed = (codes[:, 0] * 16 + codes[:, 1]).to(torch.uint8)
    return packed, absmax.to(torch.bfloat16)


def _pair_table(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(256, 2): the two NF4 values a packed byte holds, high nibble first."""
    levels = torch.tensor(NF4_LEVELS, device=device, dtype=dtype)
    byte = torch.arange(256, device=device)
    return torch.stack((levels[byte // 16], levels[byte % 16]), dim=1)


def dequantize_nf4(packed: torch.Tensor, absmax: torch.Tensor, table: torch.Tensor,
                   shape: tuple[int, ...]) -> torch.Tensor:
    """The weight of ``shape`` in ``table``'s dtype from :func:`quantize_nf4`'s codes and scales."""
    pairs = F.embedding(packed.to(torch.int32), table)
    return (pairs.view(absmax.shape[0], -1) * absmax[:, None].to(table.dtype)).view(shape)


class _NF4Matmul(torch.autograd.Function):
    """``x @ W.T`` with W dequantized on use; backward dequantizes again and returns only the input gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, layer: FrozenNF4Linear) -> torch.Tensor:
        ctx.layer = layer
        return F.linear(x, layer.dequantized(x.dtype))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        layer = cast(FrozenNF4Linear, ctx.layer)
        return grad @ layer.dequantized(grad.dtype), None


class FrozenNF4Linear(nn.Module):
    """A bias-free linear layer whose frozen weight is stored as NF4 buffers (no parameters)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.shape = (int(weight.shape[0]), int(weight.shape[1]))
        packed, absmax = quantize_nf4(weight)
        self.register_buffer("packed", packed)
        self.register_buffer("absmax", absmax)
        self.register_buffer("table", _pair_table(weight.device, torch.bfloat16))

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        table = cast(torch.Tensor, self.table)
        return dequantize_nf4(cast(torch.Tensor, self.packed), cast(torch.Tensor, self.absmax),
                              table.to(dtype), self.shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, _NF4Matmul.apply(x, self))  # type: ignore[no-untyped-call]


class LoraLinear(nn.Module):
    """A frozen base projection plus one rank-``r`` adapter per output part (``splits``; module docstring)."""

    def __init__(self, base: nn.Module, in_features: int, splits: tuple[int, ...], rank: int,
                 device: torch.device) -> None:
        super().__init__()
        self.base = base
        self.splits = splits
        self.rank = rank
        self.scaling = ALPHA / rank
        self.lora_a = nn.Parameter(torch.empty(len(splits) * rank, in_features, device=device))
        self.lora_b = nn.Parameter(torch.empty(sum(splits), rank, device=device))
        with torch.no_grad():
            self.lora_a.normal_(0.0, 0.02)
            self.lora_b.normal_(0.0, 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = cast(torch.Tensor, self.base(x))
        a = F.linear(x, self.lora_a.to(x.dtype))
        b = self.lora_b.to(x.dtype)
        if len(self.splits) == 1:
            delta = F.linear(a, b)
        else:
            parts = zip(torch.split(a, self.rank, -1), torch.split(b, list(self.splits), 0), strict=True)
            delta = torch.cat([F.linear(ai, bi) for ai, bi in parts], dim=-1)
        return y + delta * self.scaling


def _wrap(linear: nn.Module, splits: tuple[int, ...], rank: int, variant: str) -> LoraLinear:
    lin = cast(nn.Linear, linear)
    base: nn.Module = FrozenNF4Linear(lin.weight.detach()) if variant == "qlora" else lin
    return LoraLinear(base, lin.in_features, splits, rank, lin.weight.device)


def add_adapters(model: Llama, rank: int, variant: str) -> list[nn.Parameter]:
    """Freeze ``model``, put adapters on every block projection (NF4 bases for ``qlora``); the adapter parameters."""
    if variant not in VARIANTS or rank < 1:
        raise ValueError(f"variant must be lora|qlora and rank >= 1, not {variant!r}/{rank}")
    model.requires_grad_(False)
    s = model.s
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    for layer in model.layers:
        block = cast(Block, layer)
        for parent, name, splits in ((block.attn, "wqkv", (q, kv, kv)), (block.attn, "wo", (s.hidden,)),
                                     (block.mlp, "w13", (s.ffn, s.ffn)), (block.mlp, "w2", (s.hidden,))):
            parent.add_module(name, _wrap(getattr(parent, name), splits, rank, variant))
    return [p for p in model.parameters() if p.requires_grad]
