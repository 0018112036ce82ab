"""Speed of the results store: commit latency, batched sample throughput, reads.

Usage: python benchmarks/bench_store.py [--path FILE] [--n 2000] [--json]

Prints what it measured on this machine (the store's speed depends on the disk's fsync latency: every
commit is fsynced, ``synchronous=FULL``). Answers: how many transactions per second can a sampler afford,
and what does a batched sample cost.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from gpumatch.store import open_store


def _percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _timed(n: int, fn: Any) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def bench(path: Path, n: int) -> dict[str, Any]:
    """Measure on a fresh store at ``path``; returns seconds and rates (SI)."""
    sample = {"t_s": 0.0, "gpu_index": 0, "power_instant_w": 412.0, "power_avg_w": 400.0, "sm_clock_mhz": 1980.0,
              "mem_clock_mhz": 3201.0, "clock_event_reasons": 4, "gpu_temp_c": 61.0, "memory_used_bytes": 2**36,
              "util_gpu_pct": 100.0}
    out: dict[str, Any] = {"n": n, "machine": platform.node(), "python": platform.python_version()}
    with open_store(path) as s:
        run_id = s.begin_run("bench", "bench_store", {"bench": "store"}, {"n": n})
        one = _timed(n, lambda i: s.add_samples(run_id, [sample | {"t_s": float(i)}]))
        res = _timed(max(1, n // 4), lambda i: s.add_result(run_id, "x", float(i), "1"))
        batch = [sample | {"t_s": float(i)} for i in range(n * 10)]
        t0 = time.perf_counter()
        s.add_samples(run_id, batch)
        batch_s = time.perf_counter() - t0
        buf = s.sample_buffer(run_id, flush_interval_s=3600, max_rows=10**9)
        add_s = _timed(n, lambda i: buf.add(sample | {"t_s": float(i)}))
        t0 = time.perf_counter()
        buf.flush()
        flush_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = s.samples(run_id)
        read_s = time.perf_counter() - t0
        s.end_run(run_id, "completed")
    out.update(
        commit_one_sample_s_median=statistics.median(one),
        commit_one_sample_s_p95=_percentile(one, 0.95),
        commit_one_result_s_median=statistics.median(res),
        batched_samples_per_s=len(batch) / batch_s,
        buffer_add_s_median=statistics.median(add_s),
        buffer_flush_rows_per_s=n / flush_s,
        read_samples_per_s=len(rows) / read_s,
        rows_read=len(rows),
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", type=Path, default=None, help="store file (default: a temporary one)")
    ap.add_argument("--n", type=int, default=2000, help="single-row commits to time")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = bench(args.path or Path(tmp) / "bench.sqlite", args.n)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for k, v in result.items():
        print(f"{k:32s} {v:.4g}" if isinstance(v, float) else f"{k:32s} {v}")


if __name__ == "__main__":
    main()
