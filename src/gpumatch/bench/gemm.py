"""GEMM at each precision and host<->device copies through pinned memory, for ``gpumatch bench run``.

- GEMM: ``torch.mm`` of random (m,k)x(k,n) in bf16 / fp16; ``fp32`` with TF32 off and ``tf32`` with TF32 on
  (``torch.backends.cuda.matmul.allow_tf32``); ``fp8``: ``torch._scaled_mm`` of e4m3 operands (B column-major,
  unit scales, bf16 out), which needs compute capability 8.9 or newer. FLOPs = 2·m·n·k. Input sets rotate so
  their total exceeds the L2 (as :mod:`gpumatch.bench.micro`).
- Pinned copies: ``dst.copy_(src, non_blocking=True)`` between a page-locked host buffer and the device;
  bytes = size (one direction).

A precision the device cannot run raises :class:`Unsupported` with the reason (the lab records it as skipped).
"""

from __future__ import annotations

from typing import Any

import torch

from gpumatch.bench.dtypes import torch_dtype
from gpumatch.bench.timing import time_fn
from gpumatch.stats import reported_percentiles
from gpumatch.units import MIB

PRECISIONS = ("bf16", "fp16", "tf32", "fp32", "fp8")
_ROTATE_BYTES = 256 * MIB


class Unsupported(Exception):
    """This device cannot run the case; the message says why."""


def check_precision(precision: str, device: torch.device) -> None:
    """Raise :class:`Unsupported` when ``device`` cannot run a GEMM at ``precision``."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; one of {', '.join(PRECISIONS)}")
    if precision == "fp8":
        if device.type != "cuda":
            raise Unsupported("fp8 GEMM needs a CUDA GPU (torch._scaled_mm)")
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            raise Unsupported(f"fp8 GEMM needs compute capability 8.9 or newer; this GPU is {major}.{minor}")
    if precision == "tf32" and device.type != "cuda":
        raise Unsupported("TF32 is a CUDA tensor-core mode; on CPU it would time fp32 again")


def _operands(m: int, n: int, k: int, precision: str, device: torch.device) -> tuple[list[Any], list[Any]]:
    elem = 1 if precision == "fp8" else torch.finfo(torch_dtype(precision)).bits // 8
    sets = max(1, min(16, _ROTATE_BYTES // max((m * k + k * n) * elem, 1)))
    if precision == "fp8":
        a = [torch.randn(m, k, device=device).to(torch.float8_e4m3fn) for _ in range(sets)]
        b = [torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t() for _ in range(sets)]
        return a, b
    dt = torch_dtype(precision)
    return ([torch.randn(m, k, device=device, dtype=dt) for _ in range(sets)],
            [torch.randn(k, n, device=device, dtype=dt) for _ in range(sets)])


def gemm(m: int, n: int, k: int, precision: str, device: torch.device, iters: int = 30) -> dict[str, Any]:
    """Time one GEMM shape at ``precision``; returns flop/s (from the median) and the timing summary."""
    check_precision(precision, device)
    a, b = _operands(m, n, k, precision, device)
    sets = len(a)
    scale = torch.ones((), device=device, dtype=torch.float32)
    idx = [0]

    def fn() -> None:
        i = idx[0] % sets
        idx[0] += 1
        if precision == "fp8":
            torch._scaled_mm(a[i], b[i], scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
        else:
            torch.mm(a[i], b[i])

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        timing = time_fn(fn, device, warmup=5, iters=iters, inner=max(1, min(sets, 20)))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    flops = 2.0 * m * n * k
    return {"flops": flops, "flops_per_s": flops / timing["median_s"], "timing": timing, "input_sets": sets,
            **reported_percentiles(timing["raw_s"])}


def pinned_copy(size_bytes: int, device: torch.device, iters: int = 30) -> dict[str, Any]:
    """Host->device and device->host bandwidth through a pinned host buffer of ``size_bytes``."""
    if device.type != "cuda":
        raise Unsupported("pinned host<->device copies need a CUDA device (there is no host-device link on CPU)")
    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(size_bytes, dtype=torch.uint8, device=device)
    h2d = time_fn(lambda: dev.copy_(host, non_blocking=True), device, warmup=3, iters=iters)
    d2h = time_fn(lambda: host.copy_(dev, non_blocking=True), device, warmup=3, iters=iters)
    return {"h2d_bytes_per_s": size_bytes / h2d["median_s"], "d2h_bytes_per_s": size_bytes / d2h["median_s"],
            "h2d_timing": h2d, "d2h_timing": d2h}
