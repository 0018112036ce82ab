"""Record the telemetry fixtures on a real GPU and measure what the NVML calls cost.

Run on the GPU machine (needs torch with CUDA and nvidia-ml-py)::

    PYTHONPATH=src python benchmarks/record_telemetry_traces.py --out OUTDIR

It records, through gpumatch's own NVML backend and sampler (20 Hz):

1. ``gemm-bf16``: a sustained bf16 8192^3 matrix-product loop (~40 s) that reaches the power cap;
   TFLOP/s per second are kept in the sidecar's meta.
2. ``copy``: a device-to-device copy loop over 2 GiB buffers (memory-bound), GB/s in meta.
3. ``tiny-kernels``: a Python loop of one-element adds (host/launch-bound).
4. ``idle``: 40 s with nothing running, right after the loads, so the clocks settle inside the trace.

and writes each as ``PREFIX-NAME.csv`` + ``.json``, plus ``nvml-costs.json`` (µs per call class).
``--dry-run`` exercises the same code on the CPU with a replayed trace and short durations.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any


def _cuda_sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gemm_loop(torch: Any, device: str, seconds: float, n: int = 8192) -> dict[str, Any]:
    """Back-to-back bf16 n^3 products; returns TFLOP/s per ~1-s block."""
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    c = torch.empty(n, n, device=device, dtype=dtype)
    flops = 2.0 * n**3
    blocks: list[tuple[float, float]] = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        k = 0
        while time.perf_counter() - t0 < 1.0 and time.perf_counter() < t_end:
            for _ in range(20):
                torch.matmul(a, b, out=c)
            _cuda_sync(torch, device)
            k += 20
        dt = time.perf_counter() - t0
        blocks.append((round(t0, 3), k * flops / dt / 1e12))
    return {"n": n, "dtype": str(dtype), "tflops_per_block": [round(v, 1) for _, v in blocks]}


def copy_loop(torch: Any, device: str, seconds: float, n_bytes: int = 2 << 30) -> dict[str, Any]:
    """dst.copy_(src) over n_bytes buffers; GB/s counts bytes read plus bytes written."""
    src = torch.randn(n_bytes // 4, device=device)
    dst = torch.empty_like(src)
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            dst.copy_(src)
        _cuda_sync(torch, device)
        reps += 10
    dt = time.perf_counter() - t0
    return {"bytes": n_bytes, "gb_per_s_read_plus_write": round(2 * n_bytes * reps / dt / 1e9, 1)}


def tiny_loop(torch: Any, device: str, seconds: float) -> dict[str, Any]:
    """One-element adds from a Python loop: the GPU mostly waits on the host."""
    x = torch.zeros(1, device=device)
    launches, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            x.add_(1.0)
        _cuda_sync(torch, device)
        launches += 1000
    dt = time.perf_counter() - t0
    return {"launches_per_s": round(launches / dt)}


def spin_loop(torch: Any, device: str, seconds: float, iters: int = 2_000_000) -> dict[str, Any]:
    """One Triton program (one warp) spinning on a dependent multiply-add chain, launched back to back:
    NVML counts the GPU busy all the time while one SM of 132 works (the note's 100% vs 0.76% case)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _spin(x_ptr, n):
        acc = tl.load(x_ptr)
        for _ in range(n):
            acc = acc * 0.999999 + 0.000001
        tl.store(x_ptr, acc)

    x = torch.ones(1, device=device)
    launches, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _spin[(1,)](x, iters, num_warps=1)
        torch.cuda.synchronize()
        launches += 1
    dt = time.perf_counter() - t0
    return {"kernel_ms": round(dt / max(launches, 1) * 1e3, 3), "grid": 1, "num_warps": 1}


def record(backend: Any, name: str, fn: Any, meta: dict[str, Any], interval_s: float, **clock: Any) -> Any:
    from gpumatch.telemetry.sampler import Sampler

    sampler = Sampler(backend, interval_s, meta={"workload": name, **meta}, **clock)
    sampler.start()
    try:
        extra = fn()
    finally:
        trace = sampler.stop()
    trace.meta.update(extra or {})
    return trace


def nvml_costs(backend: Any, n: int = 200) -> dict[str, float]:
    """Median wall time per call class, µs (the note's probe: energy ~4000 µs, power ~10 µs)."""
    d = backend.devices()[0]
    out: dict[str, float] = {}
    for label, call in (("sample_all_cheap_fields", lambda: d.sample(0.0)), ("gpm_pair", d.gpm),
                        ("edge_counters_incl_energy", lambda: d.edge_counters(0.0)),
                        ("pcie_link", d.pcie_link)):
        times = []
        for _ in range(n if label != "edge_counters_incl_energy" else 30):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out[label + "_us"] = round(statistics.median(times) * 1e6, 1)
    return out


def _dry_backend() -> Any:
    """A replayed two-row trace, so the script's code path runs without a GPU."""
    from gpumatch.telemetry.fake import FakeBackend
    from gpumatch.telemetry.trace import Trace
    from gpumatch.telemetry.types import DeviceInfo, Sample

    rows = tuple(Sample(t_s=t, gpu_index=0, power_avg_w=100.0, sm_clock_mhz=900.0, util_gpu_pct=0.0)
                 for t in (0.0, 100.0))
    return FakeBackend(Trace(samples=rows, devices=(DeviceInfo(index=0, name="dry-run"),)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--prefix", default=None, help="file prefix (default: card-date, e.g. h200-2026-12-02)")
    ap.add_argument("--gemm-s", type=float, default=40.0)
    ap.add_argument("--copy-s", type=float, default=20.0)
    ap.add_argument("--tiny-s", type=float, default=20.0)
    ap.add_argument("--idle-s", type=float, default=40.0)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--spin-s", type=float, default=20.0)
    ap.add_argument("--only", default="gemm-bf16,copy,tiny-kernels,idle",
                    help="comma-separated subset of gemm-bf16,copy,tiny-kernels,spin,idle (idle alone: no torch)")
    ap.add_argument("--suffix", default="", help="appended to the workload name in the file name")
    ap.add_argument("--dry-run", action="store_true", help="CPU + replayed trace, short durations")
    args = ap.parse_args()
    wanted = args.only.split(",")
    torch: Any = None
    if wanted != ["idle"]:
        import torch

    from gpumatch.telemetry.trace import write_trace

    args.out.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        wanted = [w for w in wanted if w != "spin"]  # Triton needs a GPU
        backend: Any = _dry_backend()
        device = "cpu"
        args.gemm_s = args.copy_s = args.tiny_s = args.idle_s = args.spin_s = 0.5
    else:
        from gpumatch.telemetry.backends import open_backend

        backend = open_backend("nvml", [0])
        device = "cuda:0"
    info = backend.devices()[0].info()
    system = backend.system()
    base = {"card": info.name, "driver": system.driver_version, "cuda_driver": system.cuda_driver_version_str,
            "torch": torch.__version__ if torch else None,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "recorded_by": "benchmarks/record_telemetry_traces.py"}
    card = info.name.replace("NVIDIA", "").strip().split()[0].lower() if info.name else "gpu"
    prefix = args.prefix or f"{card}-{time.strftime('%Y-%m-%d', time.gmtime())}"
    costs = nvml_costs(backend)
    unsupported = sorted(getattr(getattr(backend.devices()[0], "_call", None), "off", set()))
    print("nvml costs (us):", costs, "| not supported:", unsupported, flush=True)
    (args.out / "nvml-costs.json").write_text(json.dumps({**base, **costs, "not_supported": unsupported,
                                                          "device_info": info.to_dict(),
                                                          "system": system.to_dict()}, indent=1))
    if "gemm-bf16" in wanted:
        gemm_loop(torch, device, 1.0 if not args.dry_run else 0.1, n=8192 if not args.dry_run else 256)  # warm-up
    runs = [
        ("gemm-bf16", "bf16 8192^3 torch.matmul back to back, sync every 20", lambda: gemm_loop(
            torch, device, args.gemm_s, n=8192 if not args.dry_run else 256)),
        ("copy", "dst.copy_(src) over 2 GiB fp32 buffers, sync every 10", lambda: copy_loop(
            torch, device, args.copy_s, n_bytes=(2 << 30) if not args.dry_run else (1 << 20))),
        ("tiny-kernels", "x.add_(1.0) on a 1-element tensor from a Python loop, sync every 1000", lambda: tiny_loop(
            torch, device, args.tiny_s)),
        ("spin", "one Triton program (1 warp) spinning ~2M dependent FMAs per launch, back to back", lambda: spin_loop(
            torch, device, args.spin_s)),
        ("idle", "nothing running; right after the loads above in the same process (CUDA context held), or, with "
         "--only idle, in a fresh process without a CUDA context", lambda: time.sleep(args.idle_s)),
    ]
    for name, what, fn in runs:
        if name not in wanted:
            continue
        trace = record(backend, name, fn, {**base, "what_ran": what}, args.interval)
        paths = write_trace(trace, args.out / f"{prefix}-{name}{args.suffix}.csv")
        s = trace.stats
        print(f"{name}: {len(trace.samples)} samples over {trace.duration_s:.1f} s, tick {s.mean_tick_s * 1e3:.2f} ms "
              f"mean / {s.max_tick_s * 1e3:.2f} max, overruns {s.overruns}; {trace.meta.get('tflops_per_block') or ''}"
              f"{trace.meta.get('gb_per_s_read_plus_write') or ''}{trace.meta.get('launches_per_s') or ''} -> "
              f"{paths[0].name}", flush=True)
    backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
