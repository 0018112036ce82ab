"""Probe: the kernel-path check and the convergence runs on one card (the numbers in
docs/bench.md, "Kernel-path check and convergence runs").

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/probe_kernelpath_convergence.py OUT.json``.

Kernel path: the Llama-3-8B GEMMs at 2048 tokens in bf16, fp8, fp32 (TF32 off) and tf32, then deliberately
misaligned shapes (K=N=2880, K=4095, N=5120 with K=2880, a decode GEMV with N=4097) in bf16 and fp8.
Convergence: a 4-layer, hidden-256 Llama on a 512-state Markov source, 300 steps of batch 16 × 256 tokens, lr 2e-3,
in bf16, bf16 with full recompute, fp16, fp32 and fp8, compared on loss reached per second.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from gpumatch.bench import convergence as cv
from gpumatch.bench import kernelpath as kp
from gpumatch.bench.shapes import LLAMA_3_8B

ODD = ((2048, 2880, 2880), (2048, 4096, 4095), (2048, 5120, 2880), (1, 4097, 4096))
SMALL = {"name": "small", "layers": 4, "hidden": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "ffn": 768,
         "vocab": 4096, "tied": False}


def main(path: str) -> None:
    dev = torch.device("cuda")
    res: dict[str, Any] = {"kp": []}
    for p in ("bf16", "fp8", "fp32", "tf32"):
        res["kp"] += kp.kernel_path_suite(LLAMA_3_8B, p, 2048, dev, iters=10)
    for m, n, k in ODD:
        for p in ("bf16", "fp8"):
            res["kp"].append(kp.kernel_path_case("odd", m, n, k, p, dev, iters=10))
    src = cv.MarkovSource(states=512, branch=4, seed=0)
    rows, cmp = cv.convergence_suite(SMALL, dev, steps=300, batch=16, seq=256, lr=2e-3, source=src, log_every=20)
    res["conv"] = {"rows": rows, "compare": cmp}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(res, f, default=str)


if __name__ == "__main__":
    main(sys.argv[1])
