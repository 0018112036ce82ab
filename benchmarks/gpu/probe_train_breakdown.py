"""Probe: where does a training step's GPU time go? Kernel time by class, per model shape.

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/probe_train_breakdown.py > out.jsonl``.

For each case it runs the same step as :mod:`gpumatch.bench.train` (AMP or bf16, AdamW fused, logits upcast to
fp32 for the loss) under ``torch.profiler`` and sums CUDA kernel time by class (GEMM, attention, loss/softmax,
optimizer, other elementwise), next to the step's wall time, so the estimator's split of compute, memory and
host time can be checked operator class by operator class. It then times bf16 GEMMs of the shapes that a small
hidden size (Qwen2.5-0.5B: h=896) produces, forward and backward, against a square reference, to see whether a
small inner dimension costs efficiency. One JSON line per case.
"""

from __future__ import annotations

import json
import sys

import torch

from gpumatch.bench import shapes
from gpumatch.bench.decode import free
from gpumatch.bench.shapes import LlamaShape
from gpumatch.bench.timing import time_fn
from gpumatch.bench.train import make_step

CLASSES = (
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("loss", ("log_softmax", "softmax", "nll", "cross_entropy")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("gemm", ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90", "matmul")),
)


def classify(name: str) -> str:
    low = name.lower()
    for label, needles in CLASSES:
        if any(n in low for n in needles):
            return label
    return "elementwise"


def breakdown(shape: dict[str, object], batch: int, seq: int, master: str, dev: torch.device) -> dict[str, object]:
    s = LlamaShape.from_dict(shape)
    step = make_step(s, batch, seq, "none", master, dev)
    wall = time_fn(step, dev, warmup=2, iters=5)["median_s"]
    steps = 3
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    by_class: dict[str, float] = {}
    top: dict[str, float] = {}
    for ev in prof.key_averages():
        t = float(getattr(ev, "device_time_total", getattr(ev, "cuda_time_total", 0.0))) * 1e-6 / steps
        if t <= 0 or ev.key.startswith("ProfilerStep"):
            continue
        by_class[classify(ev.key)] = by_class.get(classify(ev.key), 0.0) + t
        top[ev.key[:90]] = t
    out = {"case": "train-breakdown", "model": s.name, "batch": batch, "seq": seq, "master": master,
           "wall_s": wall, "kernel_s": sum(by_class.values()), "by_class_s": by_class,
           "top_kernels_s": dict(sorted(top.items(), key=lambda kv: -kv[1])[:14])}
    return out


def gemm(m: int, n: int, k: int, dev: torch.device) -> dict[str, object]:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    t = time_fn(lambda: a @ b, dev, warmup=5, iters=20)["median_s"]
    return {"case": "gemm", "m": m, "n": n, "k": k, "median_s": t, "tflops_per_s": 2.0 * m * n * k / t / 1e12}


def main() -> None:
    dev = torch.device("cuda")
    cases = ((shapes.QWEN2_5_0_5B, 8, 2048, "fp32"), (shapes.QWEN2_5_0_5B, 4, 4096, "none"),
             (shapes.QWEN2_5_1_5B, 4, 1024, "fp32"), (shapes.LLAMA_3_2_1B, 4, 2048, "fp32"),
             (shapes.LLAMA_3_2_3B, 4, 2048, "none"))
    for shape, b, sq, master in cases:
        try:
            print(json.dumps(breakdown(shape, b, sq, master, dev)), flush=True)
        except Exception as exc:  # a probe: record and go on
            print(json.dumps({"case": "train-breakdown", "model": str(shape.get("name")), "error": repr(exc)[:300]}),
                  flush=True)
        free(dev)
    tok = 16384
    for m, n, k in ((tok, 1152, 896), (tok, 896, 896), (tok, 9728, 896), (tok, 896, 4864),
                    (896, 9728, tok), (tok, 151936, 896), (tok, 896, 151936), (896, 151936, tok),
                    (tok, 3072, 2048), (tok, 16384, 2048), (tok, 2048, 8192),
                    (tok, 4096, 4096), (8192, 8192, 8192)):
        print(json.dumps(gemm(m, n, k, dev)), flush=True)
        free(dev)
    print(json.dumps({"case": "env", "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}),
          file=sys.stderr)


if __name__ == "__main__":
    main()
