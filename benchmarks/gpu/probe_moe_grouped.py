"""Probe: how fast does a decode step's MoE layer stream the experts its tokens touch, against a dense GEMM?

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/probe_moe_grouped.py > out.jsonl``.

The estimator reads, per MoE layer and decode step, the weights of the experts the batch's tokens route to (the
occupancy formula, :func:`gpumatch.estimate.flops.moe_extra_weight_params`) at the dense GEMM's memory efficiency.
Serving engines run those experts as one grouped GEMM per projection with a few tokens per expert. This probe
routes ``T`` tokens to ``k`` of ``E`` experts uniformly at random, and times -- captured in a CUDA graph, as an
engine's decode runs -- (a) ``torch._grouped_mm`` (bf16) over the tokens sorted by expert, gate+up then down;
(b) the same as one ``mm`` per touched expert; (c) one dense ``mm`` of the same weight bytes. It prints the
bytes streamed per second of each against a device copy measured in the same run. Shapes are one GPU's slice
of DeepSeek-V3 at TP 8, gpt-oss-120b and Qwen3-30B-A3B at TP 1. One JSON line per measurement.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import moe_probe_common
import torch

SHAPES = {  # name: (experts E, top-k, hidden K, expert intermediate per GPU N)
    "deepseek-v3 tp8": (256, 8, 7168, 256),
    "gpt-oss-120b tp1": (128, 4, 2880, 2880),
    "qwen3-30b-a3b tp1": (128, 8, 2048, 768),
}
TOKENS = (1, 4, 16, 64, 128, 256)
REPLAYS = 50


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    """``fn`` captured once in a CUDA graph; calling the result replays it."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def seconds(fn: Callable[[], None]) -> float:
    """Median seconds per call over 7 samples of ``REPLAYS`` calls, after 5 warm-up calls."""
    return moe_probe_common.seconds(fn, torch.device("cuda"), REPLAYS, samples=7, warmup=5)


def copy_bandwidth() -> float:
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    return 2 * x.numel() / seconds(graphed(lambda: y.copy_(x)))


def probe(name: str, e: int, k: int, hidden: int, inter: int, t: int, bw: float) -> dict[str, object]:
    dev = torch.device("cuda")
    w1 = torch.randn(e, hidden, 2 * inter, device=dev, dtype=torch.bfloat16) * 0.02  # gate+up, (E, K, 2N)
    w2 = torch.randn(e, inter, hidden, device=dev, dtype=torch.bfloat16) * 0.02  # down, (E, N, K)
    x = torch.randn(t, hidden, device=dev, dtype=torch.bfloat16)
    gen = torch.Generator(device="cpu").manual_seed(t)
    choice = torch.rand(t, e, generator=gen).topk(k, dim=1).indices.flatten()  # uniform router, top-k
    order = torch.sort(choice, stable=True)
    counts = torch.bincount(order.values, minlength=e)
    touched = int((counts > 0).sum())
    rows = x[torch.div(order.indices, k, rounding_mode="floor").to(dev)]  # tokens sorted by expert
    offs = torch.cumsum(counts, 0).to(dev, torch.int32)
    h = torch.empty(t * k, inter, device=dev, dtype=torch.bfloat16)
    weight_bytes = touched * 3 * hidden * inter * 2
    out: dict[str, object] = {"shape": name, "experts": e, "top_k": k, "tokens": t, "touched": touched,
                              "weight_bytes": weight_bytes, "copy_bytes_per_s": bw}

    def grouped() -> None:
        g = torch._grouped_mm(rows, w1, offs=offs)
        h.copy_(g[:, :inter] * g[:, inter:])
        torch._grouped_mm(h, w2, offs=offs)

    ids = [i for i in range(e) if int(counts[i]) > 0]
    starts = [int(v) for v in (torch.cumsum(counts, 0) - counts)]
    sizes = [int(v) for v in counts]

    def looped() -> None:
        for i in ids:
            r = rows[starts[i]:starts[i] + sizes[i]]
            g = r @ w1[i]
            (g[:, :inter] * g[:, inter:]) @ w2[i]

    dense_w1 = torch.randn(hidden, touched * 2 * inter, device=dev, dtype=torch.bfloat16) * 0.02
    dense_w2 = torch.randn(touched * inter, hidden, device=dev, dtype=torch.bfloat16) * 0.02
    xd = x[: max(1, t)]

    def dense() -> None:
        g = xd @ dense_w1
        half = g.shape[1] // 2
        (g[:, :half] * g[:, half:]) @ dense_w2

    for label, fn in (("grouped_mm", grouped), ("mm_per_expert", looped), ("dense_mm", dense)):
        try:
            s = seconds(graphed(fn))
            out[f"{label}_s"] = s
            out[f"{label}_bytes_per_s"] = weight_bytes / s
            out[f"{label}_of_copy"] = weight_bytes / s / bw
        except Exception as exc:  # a probe: one failing path does not stop the others
            out[f"{label}_error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def main() -> None:
    bw = copy_bandwidth()
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "copy_bytes_per_s": bw}))
    for name, (e, k, hidden, inter) in SHAPES.items():
        for t in TOKENS:
            print(json.dumps(probe(name, e, k, hidden, inter, t, bw)), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
