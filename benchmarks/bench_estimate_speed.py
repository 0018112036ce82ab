"""Speed of the estimators on one core: single-configuration estimates per second, scalar and vectorized.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_estimate_speed.py [--json]``. Prints what it measured:
1. ``estimate()`` end to end (request validation, case building, evaluation, result dataclasses), one call
   per configuration, inference and training;
2. ``engine.evaluate`` on a pre-built scalar Case (the formulas alone);
3. ``candidate_case`` + ``evaluate`` on 10^5 candidates at once (numpy arrays: every catalog SKU, random
   layouts, precisions, recompute, micro-batches), reported as seconds per call and candidates per second.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from gpumatch.catalog import get_gpu, load_catalog
from gpumatch.estimate import Request, build_case, estimate, evaluate, model_nums
from gpumatch.estimate.vectorized import Choice, candidate_case, gpu_table
from gpumatch.models import get_model


def rate(fn: Callable[[], object], min_s: float = 1.0) -> float:
    """Calls per second of ``fn`` over at least ``min_s`` seconds (after a warm-up call)."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= min_s:
            return n / dt


def main() -> dict[str, float]:
    arch = get_model("llama-3.1-70b")
    gpu = get_gpu("H100 SXM")
    m = model_nums(arch)
    res: dict[str, float] = {}
    res["estimate_infer_per_s"] = rate(
        lambda: estimate(arch, gpu, Request(task="serve", tp=4, concurrency=16), with_scaling=False)
    )
    res["estimate_train_per_s"] = rate(
        lambda: estimate(arch, gpu, Request(task="train", tp=8, pp=2, dp=4, zero=1, micro_batch=1), with_scaling=False)
    )
    case_i, _ = build_case(arch, gpu, Request(task="serve", concurrency=16, tp=4))
    case_t, _ = build_case(arch, gpu, Request(task="train", tp=8, pp=2, dp=4, zero=1))
    res["evaluate_scalar_infer_per_s"] = rate(lambda: evaluate("serve", m, case_i))
    res["evaluate_scalar_train_per_s"] = rate(lambda: evaluate("train", m, case_t))

    specs = load_catalog().gpus
    table = gpu_table(specs)
    rng = np.random.default_rng(0)
    n = 100_000
    cols = {
        "gpu_index": rng.integers(0, len(specs), n),
        "tp": rng.choice([1, 2, 4, 8], n).astype(float),
        "pp": rng.choice([1, 2, 4], n).astype(float),
        "dp": rng.choice([1, 2, 4, 8], n).astype(float),
        "zero": rng.choice([0, 1, 2, 3], n).astype(float),
        "seqs_per_replica": rng.choice([1, 2, 4, 8], n).astype(float),
        "micro_batches": rng.choice([1, 4, 16], n).astype(float),
    }
    prec = Choice(("bf16", "fp8"), rng.integers(0, 2, n))
    rc = Choice(("none", "selective", "full"), rng.integers(0, 3, n))
    wq = Choice(("bf16", "fp8", "int8", "int4"), rng.integers(0, 4, n))

    def vector_train() -> None:
        case = candidate_case(arch, table, "train", precision=prec, recompute=rc, seq=4096.0, **cols)
        evaluate("train", m, case)

    def vector_serve() -> None:
        case = candidate_case(arch, table, "serve", precision=wq, prompt=2048.0, gen=256.0, **cols)
        evaluate("serve", m, case)

    for name, fn in (("train", vector_train), ("serve", vector_serve)):
        t = 1.0 / rate(fn, 2.0)
        res[f"vector_{name}_candidates"] = n
        res[f"vector_{name}_call_s"] = t
        res[f"vector_{name}_candidates_per_s"] = n / t

    small = 1000  # the same path in calls of 1,000 configurations (e.g. one SKU's layouts at a time)
    sub = {k: v[:small] for k, v in cols.items()}
    sub_prec = Choice(prec.names, prec.codes[:small])
    sub_rc = Choice(rc.names, rc.codes[:small])

    def vector_small() -> None:
        case = candidate_case(arch, table, "train", precision=sub_prec, recompute=sub_rc, seq=4096.0, **sub)
        evaluate("train", m, case)

    res["vector_train_1000_per_call_candidates_per_s"] = small * rate(vector_small, 1.0)
    return res


if __name__ == "__main__":
    out = main()
    meta = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }
    if "--json" in sys.argv:
        print(json.dumps({"results": out, "meta": meta}, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:34s} {v:14,.6g}")
        print(meta)
