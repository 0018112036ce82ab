"""Speed of a full-catalog plan: a 70B full fine-tune, every SKU, counts up to 64, all layouts and mitigations.

Run: ``python benchmarks/bench_plan_speed.py [--json] [--repeat N] [--serving]``. The workload is
``examples/finetune-70b-cluster.toml`` with its GPU deny list removed (so every catalog SKU is a candidate) and
the micro-batch left to the planner (1, 2, 4, 8); ``--serving`` plans ``examples/chat-70b-serving.toml`` over
every SKU and up to 64 GPUs instead (the serving roles at vLLM's steady state, :mod:`gpumatch.plan.served`).
Reports the first call in a fresh process (catalog load, GPU table, numpy warm-up included) and the median and
worst of the repeated calls, with the candidate counts.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from gpumatch.plan import from_workload, plan
from gpumatch.workload import load_workload

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "finetune-70b-cluster.toml"
SERVING = Path(__file__).resolve().parents[1] / "examples" / "chat-70b-serving.toml"


def main(repeat: int = 10, serving: bool = False) -> dict[str, float]:
    t0 = time.perf_counter()
    if serving:
        req = replace(from_workload(load_workload(SERVING)), gpus_deny=(), max_gpus=64, w_per_node=None)
    else:
        req = replace(from_workload(load_workload(EXAMPLE)), gpus_deny=(), micro_batch=None, max_gpus=64)
    first = plan(req)
    first_s = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        p = plan(req)
        times.append(time.perf_counter() - t)
    return {
        "candidates_evaluated": p.candidates_evaluated,
        "candidates_estimated": p.candidates_estimated,
        "feasible": p.feasible,
        "gpu_models": len({r["gpu"] for r in p.rejected} | {e["gpu"] for v in p.shortlist.values() for e in v}),
        "first_call_s": first_s,
        "first_plan_elapsed_s": first.elapsed_s,
        "median_s": statistics.median(times),
        "max_s": max(times),
        "repeats": repeat,
    }


if __name__ == "__main__":
    n = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 10
    out = main(n, serving="--serving" in sys.argv)
    meta = {"python": platform.python_version(), "numpy": np.__version__, "cpus": os.cpu_count(),
            "machine": platform.machine(), "load_average": os.getloadavg()}
    if "--json" in sys.argv:
        print(json.dumps({"results": out, "meta": meta}, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:24s} {v:12,.4g}")
        print(meta)
