"""Sampler overhead on a GPU benchmark: bf16 GEMM throughput with and without the sampler thread.

Budget (issue 4): under 1% of a benchmark's throughput. Method: blocks of back-to-back 8192^3 bf16
products timed with a host clock after a device sync; blocks alternate A (no sampler) and B (sampler at
``--interval``, in the same process, as ``gpumatch.bench`` would run it) in ABBA order so the slow drift
of a power-capped card (clock and temperature) cancels; the overhead is 1 - median(B/A) over the pairs.
The window-edge reads (energy ~4 ms) happen outside the timed blocks, as they do at window edges.

    PYTHONPATH=src python benchmarks/bench_sampler_overhead.py --out overhead.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any


def timed_block(torch: Any, a: Any, b: Any, c: Any, seconds: float) -> float:
    """TFLOP/s of back-to-back a@b over about ``seconds`` (sync every 10 products)."""
    n = a.shape[0]
    torch.cuda.synchronize()
    k, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        k += 10
    return 2.0 * n**3 * k / (time.perf_counter() - t0) / 1e12


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--block-s", type=float, default=4.0)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--n", type=int, default=8192)
    args = ap.parse_args()
    import torch

    from gpumatch.telemetry.backends import open_backend
    from gpumatch.telemetry.sampler import Sampler

    backend = open_backend("nvml", [0])
    a, b = (torch.randn(args.n, args.n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty_like(a)
    timed_block(torch, a, b, c, 5.0)  # warm-up to the power-capped steady state
    blocks: list[dict[str, Any]] = []
    ticks: list[float] = []

    def run(with_sampler: bool) -> float:
        if not with_sampler:
            return timed_block(torch, a, b, c, args.block_s)
        s = Sampler(backend, args.interval).start()
        v = timed_block(torch, a, b, c, args.block_s)
        ticks.append(s.stop().stats.mean_tick_s)
        return v

    ratios = []
    for i in range(args.pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        got = {w: run(w) for w in order}
        ratios.append(got[True] / got[False])
        blocks.append({"pair": i, "order": ["sampler" if w else "none" for w in order],
                       "tflops_none": round(got[False], 2), "tflops_sampler": round(got[True], 2)})
        print(blocks[-1], flush=True)
    info, system = backend.devices()[0].info(), backend.system()
    backend.close()
    med = statistics.median(ratios)
    result = {
        "card": info.name, "driver": system.driver_version, "torch": torch.__version__,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "interval_s": args.interval, "block_s": args.block_s, "n": args.n, "pairs": blocks,
        "ratio_sampler_over_none_median": round(med, 5), "ratio_min": round(min(ratios), 5),
        "ratio_max": round(max(ratios), 5), "overhead_pct_median": round((1 - med) * 100, 3),
        "sampler_tick_ms_mean": round(statistics.mean(ticks) * 1e3, 3),
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(f"overhead {result['overhead_pct_median']:.3f}% (median of {args.pairs} ABBA pairs; ratio range "
          f"{result['ratio_min']:.4f}-{result['ratio_max']:.4f}); sampler tick {result['sampler_tick_ms_mean']} ms",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
