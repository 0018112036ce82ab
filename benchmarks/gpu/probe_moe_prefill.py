"""Probe: how fast do a prefill pass's MoE expert GEMMs run, against a dense GEMM of the same size?

Usage (device): ``python3 benchmarks/gpu/probe_moe_prefill.py --out FILE.json``; ``--smoke`` runs tiny shapes on
whatever device there is (the CPU included) to check the code paths.

The estimator times a layer's GEMMs as one operator of ``GEMMS_PER_LAYER`` calls at the dense GEMM's efficiency
(:func:`gpumatch.estimate.roofline.op`). In an MoE layer the expert GEMMs are many small problems: ``T`` prompt
tokens routed to ``k`` of ``E`` experts give each expert about ``T·k/E`` rows, and at tensor parallelism each GPU
holds ``1/tp`` of every expert's intermediate width. This probe routes ``T`` tokens uniformly at random and times,
eagerly (prefill passes are not graphed), on one GPU's slice of several MoE models:

- ``grouped``: ``torch._grouped_mm`` (bf16, CUTLASS) over the rows sorted by expert: gate+up, SiLU·up, down;
- ``grouped_fp8``: the same with ``torch._scaled_grouped_mm`` (fp8 e4m3, row-wise scales), where the card has it;
- ``per_expert``: one ``mm`` per touched expert (cuBLAS), the form whose per-call cost the estimator models;
- ``dense``: one ``mm`` of all ``T·k`` rows against one expert-sized weight of the same shape: the same FLOPs and
  operand shapes without the grouping (``dense_fp8``: with ``torch._scaled_mm``, the base of ``grouped_fp8``);
- ``permute`` / ``combine``: gathering the rows by expert, and the weighted sum of each token's ``k`` outputs.

Each result gives seconds and TFLOP/s; ``*_of_dense`` is the ratio of the dense time to the path's time (1 = as
fast as a dense GEMM of the same size). One JSON document with the card, driver, torch version and the date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch

SHAPES = {  # name: (experts E, top-k, hidden K, expert intermediate per GPU N)
    "qwen3-30b-a3b tp1": (128, 8, 2048, 768),
    "deepseek-v3 tp8": (256, 8, 7168, 256),
    "gpt-oss-120b tp8": (128, 4, 2880, 360),
    "gpt-oss-120b tp1": (128, 4, 2880, 2880),
    "qwen3-235b-a22b tp8": (128, 8, 4096, 192),
    "qwen3-235b-a22b tp4": (128, 8, 4096, 384),
    "mixtral-8x7b tp8": (8, 2, 4096, 1792),
    "mixtral-8x7b tp1": (8, 2, 4096, 14336),
}
TOKENS = (512, 2048, 8192, 16384)
SMOKE_SHAPES = {"tiny": (8, 2, 64, 32)}
SMOKE_TOKENS = (16,)


def seconds(fn: Callable[[], object], dev: torch.device, reps: int) -> float:
    """Median seconds per call of ``fn`` over 5 samples of ``reps`` calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    out = []
    for _ in range(5):
        if dev.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                fn()
            b.record()
            torch.cuda.synchronize()
            out.append(a.elapsed_time(b) / 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            out.append((time.perf_counter() - t0) / reps)
    return sorted(out)[len(out) // 2]


def _route(t: int, e: int, k: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(source token of each sorted row, rows per expert, cumulative offsets int32) of a uniform top-k router."""
    gen = torch.Generator(device="cpu").manual_seed(1000 + t)
    choice = torch.rand(t, e, generator=gen).topk(k, dim=1).indices.flatten()
    order = torch.sort(choice, stable=True)
    counts = torch.bincount(order.values, minlength=e)
    token = torch.div(order.indices, k, rounding_mode="floor").to(dev)
    return token, counts, torch.cumsum(counts, 0).to(dev, torch.int32)


def _fp8_path(rows: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, offs: torch.Tensor,
              inter: int) -> Callable[[], object]:
    """The expert GEMMs in fp8 e4m3 with row-wise scales (``torch._scaled_grouped_mm``); weights column-major."""
    f8 = torch.float8_e4m3fn
    a = rows.to(f8)
    b1 = w1.transpose(1, 2).contiguous().to(f8).transpose(1, 2)  # (E, K, 2N), column-major per expert
    b2 = w2.transpose(1, 2).contiguous().to(f8).transpose(1, 2)  # (E, N, K)
    sa = torch.ones(a.shape[0], device=a.device, dtype=torch.float32)
    s1 = torch.ones(w1.shape[0], w1.shape[2], device=a.device, dtype=torch.float32)
    s2 = torch.ones(w2.shape[0], w2.shape[2], device=a.device, dtype=torch.float32)

    def run() -> object:
        g = torch._scaled_grouped_mm(a, b1, sa, s1, offs=offs, out_dtype=torch.bfloat16)
        h = (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]).to(f8)
        return torch._scaled_grouped_mm(h, b2, sa, s2, offs=offs, out_dtype=torch.bfloat16)

    return run


def _fp8_dense(rows: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, inter: int) -> Callable[[], object]:
    """The ``dense`` path in fp8 e4m3 with row-wise scales (``torch._scaled_mm``)."""
    f8 = torch.float8_e4m3fn
    a = rows.to(f8)
    b1 = w1[0].t().contiguous().to(f8).t()  # (K, 2N), column-major
    b2 = w2[0].t().contiguous().to(f8).t()  # (N, K)
    sa = torch.ones(a.shape[0], 1, device=a.device, dtype=torch.float32)
    s1 = torch.ones(1, b1.shape[1], device=a.device, dtype=torch.float32)
    s2 = torch.ones(1, b2.shape[1], device=a.device, dtype=torch.float32)

    def run() -> object:
        g = torch._scaled_mm(a, b1, sa, s1, out_dtype=torch.bfloat16)
        h = (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]).to(f8)
        return torch._scaled_mm(h, b2, sa, s2, out_dtype=torch.bfloat16)

    return run


def probe(name: str, e: int, k: int, hidden: int, inter: int, t: int, dev: torch.device,
          reps: int) -> dict[str, object]:
    """One shape at ``t`` tokens: seconds and TFLOP/s of every path (module docstring)."""
    bf = torch.bfloat16
    w1 = torch.randn(e, hidden, 2 * inter, device=dev, dtype=bf) * 0.02
    w2 = torch.randn(e, inter, hidden, device=dev, dtype=bf) * 0.02
    x = torch.randn(t, hidden, device=dev, dtype=bf)
    token, counts, offs = _route(t, e, k, dev)
    rows = x[token]
    flop = 2.0 * t * k * hidden * 3 * inter
    out: dict[str, object] = {"shape": name, "experts": e, "top_k": k, "hidden": hidden, "inter_per_gpu": inter,
                              "tokens": t, "rows_per_expert": t * k / e, "touched": int((counts > 0).sum()),
                              "max_rows_per_expert": int(counts.max()), "flop": flop}
    ids = [i for i in range(e) if int(counts[i]) > 0]
    starts = [int(v) for v in torch.cumsum(counts, 0) - counts]
    weight = torch.rand(t * k, 1, device=dev, dtype=bf)

    def grouped() -> object:
        g = torch._grouped_mm(rows, w1, offs=offs)
        h = torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]
        return torch._grouped_mm(h, w2, offs=offs)

    def per_expert() -> object:
        y = None
        for i in ids:
            r = rows[starts[i]:starts[i] + int(counts[i])]
            g = r @ w1[i]
            y = (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]) @ w2[i]
        return y

    def dense() -> object:
        g = rows @ w1[0]
        return (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]) @ w2[0]

    y = torch.randn(t * k, hidden, device=dev, dtype=bf)
    paths: dict[str, Callable[[], object]] = {
        "dense": dense, "grouped": grouped, "per_expert": per_expert,
        "permute": lambda: x[token], "combine": lambda: torch.zeros_like(x).index_add_(0, token, y * weight)}
    if dev.type == "cuda" and hasattr(torch, "_scaled_grouped_mm"):
        try:
            paths["grouped_fp8"] = _fp8_path(rows, w1, w2, offs, inter)
            paths["dense_fp8"] = _fp8_dense(rows, w1, w2, inter)
        except Exception as exc:  # a probe: an unsupported path is recorded, not fatal
            out["grouped_fp8_error"] = f"{type(exc).__name__}: {exc}"[:200]
    for label, fn in paths.items():
        try:
            s = seconds(fn, dev, reps)
        except Exception as exc:  # a probe: one failing path does not stop the others
            out[f"{label}_error"] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        out[f"{label}_s"] = s
        if label not in ("permute", "combine"):
            out[f"{label}_tflops"] = flop / s / 1e12
    for label, base in (("grouped", "dense"), ("per_expert", "dense"), ("grouped_fp8", "dense_fp8")):
        if f"{label}_s" in out and f"{base}_s" in out:
            out[f"{label}_of_dense"] = float(out[f"{base}_s"]) / float(out[f"{label}_s"])  # type: ignore[arg-type]
    return out


def _card() -> dict[str, object]:
    if not torch.cuda.is_available():
        return {"gpu": "cpu"}
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True, check=False).stdout.strip()
    return {"gpu": torch.cuda.get_device_name(), "nvidia_smi": smi}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, any device (a code-path check)")
    args = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    shapes, tokens = (SMOKE_SHAPES, SMOKE_TOKENS) if args.smoke else (SHAPES, TOKENS)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    doc: dict[str, object] = {"probe": "probe_moe_prefill", "date": now, "torch": torch.__version__, **_card(),
                              "results": []}
    results: list[dict[str, object]] = doc["results"]  # type: ignore[assignment]
    for name, (e, k, hidden, inter) in shapes.items():
        for t in tokens:
            r = probe(name, e, k, hidden, inter, t, dev, reps=2 if args.smoke else 10)
            results.append(r)
            print(json.dumps({key: (round(v, 4) if isinstance(v, float) else v) for key, v in r.items()
                              if key.endswith(("_of_dense", "_tflops")) or key in ("shape", "tokens")}), flush=True)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
