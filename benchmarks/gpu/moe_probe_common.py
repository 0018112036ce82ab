"""What the MoE kernel probes share: timing, the card's identity, and the sweep over shapes and token counts that
writes one JSON document (``probe_moe_prefill.py``, ``probe_moe_triton.py``; ``probe_moe_grouped.py`` times with
:func:`seconds`)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

Shape = tuple[int, int, int, int]
"""(experts E, top-k, hidden H, expert intermediate per GPU N)."""

SLICES: dict[str, Shape] = {  # one GPU's slice of each model's experts at the TP named
    "qwen3-30b-a3b tp1": (128, 8, 2048, 768),
    "deepseek-v3 tp8": (256, 8, 7168, 256),
    "gpt-oss-120b tp8": (128, 4, 2880, 360),
    "gpt-oss-120b tp1": (128, 4, 2880, 2880),
    "qwen3-235b-a22b tp8": (128, 8, 4096, 192),
    "qwen3-235b-a22b tp4": (128, 8, 4096, 384),
    "mixtral-8x7b tp8": (8, 2, 4096, 1792),
    "mixtral-8x7b tp1": (8, 2, 4096, 14336),
}
PREFILL_TOKENS = (512, 2048, 8192, 16384)
"""Prompt tokens in one pass: a short prompt to two chunked-prefill budgets' worth."""


def seconds(fn: Callable[[], object], dev: torch.device, reps: int, samples: int = 5, warmup: int = 3) -> float:
    """Median seconds per call of ``fn`` over ``samples`` samples of ``reps`` calls, after ``warmup`` calls: CUDA
    events on a GPU, the wall clock on the CPU."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(samples):
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


def fp8_dense_mlp(rows: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> Callable[[], object]:
    """The dense reference in fp8 e4m3 (``torch._scaled_mm``, unit row-wise scales): ``rows`` (M, H) through
    ``gate_up`` (H, 2N), SiLU·up, then ``down`` (N, H); the weights are copied to fp8 in the column-major layout
    ``_scaled_mm`` takes."""
    f8 = torch.float8_e4m3fn
    inter = down.shape[0]
    a = rows.to(f8)
    b1, b2 = gate_up.t().contiguous().to(f8).t(), down.t().contiguous().to(f8).t()
    sa = torch.ones(a.shape[0], 1, device=a.device, dtype=torch.float32)
    s1 = torch.ones(1, b1.shape[1], device=a.device, dtype=torch.float32)
    s2 = torch.ones(1, b2.shape[1], device=a.device, dtype=torch.float32)

    def run() -> object:
        g = torch._scaled_mm(a, b1, sa, s1, out_dtype=torch.bfloat16)
        h = (torch.nn.functional.silu(g[:, :inter]) * g[:, inter:]).to(f8)
        return torch._scaled_mm(h, b2, sa, s2, out_dtype=torch.bfloat16)

    return run


def card() -> dict[str, object]:
    """The GPU's name and what nvidia-smi says of its driver, power limit and top SM clock ("cpu" without one)."""
    if not torch.cuda.is_available():
        return {"gpu": "cpu"}
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True, check=False).stdout.strip()
    return {"gpu": torch.cuda.get_device_name(), "nvidia_smi": smi}


def cli(description: str, smoke_help: str) -> tuple[Path, bool, torch.device]:
    """(``--out`` file, ``--smoke``, the device: the GPU if there is one) from the command line."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--smoke", action="store_true", help=smoke_help)
    args = ap.parse_args()
    return args.out, args.smoke, torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sweep(out: Path, probe: str, shapes: Mapping[str, Shape], tokens: tuple[int, ...],
          case: Callable[[str, Shape, int], dict[str, object]], shown: tuple[str, ...],
          extra: Mapping[str, object] | None = None) -> None:
    """Run ``case(name, shape, tokens)`` over every shape and token count; print each result's keys ending in
    ``shown``, and rewrite ``out`` (one JSON document: probe, date, versions, card, results) after every shape."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    results: list[dict[str, object]] = []
    doc: dict[str, object] = {"probe": probe, "date": now, "torch": torch.__version__, **(extra or {}), **card(),
                              "results": results}
    for name, shape in shapes.items():
        for t in tokens:
            r = case(name, shape, t)
            results.append(r)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
                              if k.endswith(shown) or k in ("shape", "tokens")}), flush=True)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        out.write_text(json.dumps(doc, indent=1))
