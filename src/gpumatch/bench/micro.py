"""Microbenchmarks the estimator's calibration needs: bf16 GEMM rate, memory bandwidth, launch overhead.

- GEMM: ``torch.mm`` of random bf16 (m,k)x(k,n), FLOPs = 2·m·n·k (dense matmul), rotating among input
  sets whose total exceeds the L2 so small shapes are not timed from cache (METHOD.md).
- Copy: ``dst.copy_(src)``, bytes = 2 × size (read + write), as KINDS.md counts device copies.
- Read: ``x.sum()`` over bf16, bytes = size (the reduction's arithmetic is negligible).
- Launch: a tiny in-place add launched eagerly (per-launch host+device cost), the same add repeated N times
  inside one CUDA graph (per-kernel cost in a graph) and a one-kernel graph (per-replay cost).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gpumatch.bench.timing import time_fn
from gpumatch.units import GIB, MIB

_ROTATE_BYTES = 256 * MIB  # exceed the H200's 60 MB L2 several times over


def gemm_case(m: int, n: int, k: int, device: torch.device, iters: int = 20) -> dict[str, Any]:
    dt = torch.bfloat16
    per_set = (m * k + k * n) * 2
    sets = max(1, min(16, _ROTATE_BYTES // max(per_set, 1)))
    a = [torch.randn(m, k, device=device, dtype=dt) for _ in range(sets)]
    b = [torch.randn(k, n, device=device, dtype=dt) for _ in range(sets)]
    out = torch.empty(m, n, device=device, dtype=dt)
    idx = [0]

    def fn() -> None:
        i = idx[0] % sets
        idx[0] += 1
        torch.mm(a[i], b[i], out=out)

    inner = max(1, min(sets, 50))
    timing = time_fn(fn, device, warmup=5, iters=iters, inner=inner)
    flops = 2.0 * m * n * k
    return {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16", "flops": flops, "timing": timing,
            "tflops_per_s": flops / timing["median_s"] / 1e12, "input_sets": sets}


def copy_case(size_bytes: int, device: torch.device, iters: int = 20) -> dict[str, Any]:
    n = size_bytes // 2
    src = torch.randn(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    inner = max(1, min(100, GIB // max(size_bytes, 1)))
    copy_t = time_fn(lambda: dst.copy_(src), device, warmup=3, iters=iters, inner=inner)
    read_t = time_fn(lambda: src.sum(), device, warmup=3, iters=iters, inner=inner)
    return {
        "kind": "memory", "size_bytes": n * 2, "copy_timing": copy_t, "read_timing": read_t,
        "copy_bytes_per_s": 2 * n * 2 / copy_t["median_s"], "read_bytes_per_s": n * 2 / read_t["median_s"],
    }


def launch_case(device: torch.device, kernels_in_graph: int = 1000) -> dict[str, Any]:
    x = torch.ones(1, device=device)
    eager = time_fn(lambda: x.add_(1.0), device, warmup=100, iters=20, inner=200)
    row: dict[str, Any] = {"kind": "launch", "eager_op_timing": eager, "eager_op_s": eager["median_s"]}
    if device.type == "cuda":
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            x.add_(1.0)
        torch.cuda.current_stream().wait_stream(stream)
        many, one = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(many):
            for _ in range(kernels_in_graph):
                x.add_(1.0)
        with torch.cuda.graph(one):
            x.add_(1.0)
        g_many = time_fn(many.replay, device, warmup=3, iters=20)
        g_one = time_fn(one.replay, device, warmup=10, iters=20, inner=100)
        row.update(
            graph_kernels=kernels_in_graph, graph_many_timing=g_many, graph_one_timing=g_one,
            graph_kernel_s=g_many["median_s"] / kernels_in_graph, graph_replay_s=g_one["median_s"],
        )
    return row


DEFAULT_GEMMS: tuple[tuple[int, int, int], ...] = (
    (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
    (16384, 16384, 16384),
    # Llama-3-8B layer shapes (tokens m × out n × in k) at decode and prefill sizes
    *((m, 6144, 4096) for m in (1, 8, 32, 128, 512, 2048, 8192)),
    *((m, 28672, 4096) for m in (1, 8, 32, 128, 512, 2048, 8192)),
    *((m, 4096, 14336) for m in (1, 8, 32, 128, 512, 2048, 8192)),
    *((m, 128256, 4096) for m in (1, 32, 128, 2048)),
)
DEFAULT_COPY_BYTES: tuple[int, ...] = tuple(2**p for p in range(20, 33, 2))  # 1 MiB .. 4 GiB


def micro_suite(
    device: torch.device,
    gemms: Sequence[tuple[int, int, int]] = DEFAULT_GEMMS,
    copies: Sequence[int] = DEFAULT_COPY_BYTES,
) -> list[dict[str, Any]]:
    """All microbenchmarks, one result dict each."""
    rows: list[dict[str, Any]] = [launch_case(device)]
    rows += [copy_case(size, device) for size in copies]
    rows += [gemm_case(m, n, k, device) for (m, n, k) in gemms]
    return rows
