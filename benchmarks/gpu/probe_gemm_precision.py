"""Probe: does an FP8 GEMM reach the same fraction of its peak as a BF16 one, in bursts and sustained?

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/probe_gemm_precision.py > out.jsonl``.

The estimator uses one ``gemm_efficiency_max`` for every tensor precision (fitted on BF16 work). Serving
engines run FP8 (e4m3) GEMMs, whose dense peak is twice BF16's; under a 700 W power cap the clock falls
further when the tensor cores do more work per cycle, so FP8 may get a smaller fraction of its peak. This
probe times ``torch._scaled_mm`` (e4m3 x e4m3 -> bf16, per-tensor scales) against ``torch.matmul`` in bf16
on the layer shapes of Llama-3-70B and -8B over a batch ladder (bursts: 20 calls after warm-up), then runs
a sustained 8192^3 GEMM of each precision for ``SUSTAIN_S`` seconds, reporting TFLOP/s per second of it with
NVML power and SM clock. One JSON line per measurement.
"""

from __future__ import annotations

import json
import time

import torch

from gpumatch.bench.timing import time_fn

SUSTAIN_S = 8.0
SHAPES = {  # (N, K) of the fused QKV, gate+up and down projections
    "llama-3-70b qkv": (10240, 8192), "llama-3-70b gate_up": (57344, 8192), "llama-3-70b down": (8192, 28672),
    "llama-3-8b qkv": (6144, 4096), "llama-3-8b gate_up": (28672, 4096), "llama-3-8b down": (4096, 14336),
}
BATCHES = (64, 192, 512, 2048, 8192)


def operands(m: int, n: int, k: int, fp8: bool, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    if fp8:
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()  # column-major B, as _scaled_mm wants
    return a, b.t()


def gemm_fn(a: torch.Tensor, b: torch.Tensor, fp8: bool) -> object:
    if not fp8:
        return lambda: a @ b
    one = torch.ones((), device=a.device, dtype=torch.float32)
    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def nvml_reader() -> object:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return lambda: (pynvml.nvmlDeviceGetPowerUsage(h) / 1e3,
                        pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM))
    except Exception:  # a probe: without NVML the timings still stand
        return lambda: (None, None)


def sustained(fp8: bool, dev: torch.device, read: object) -> dict[str, object]:
    n = 8192
    a, b = operands(n, n, n, fp8, dev)
    fn = gemm_fn(a, b, fp8)
    for _ in range(5):
        fn()  # type: ignore[operator]
    torch.cuda.synchronize()
    windows = []
    t_end = time.perf_counter() + SUSTAIN_S
    while time.perf_counter() < t_end:
        t0, calls = time.perf_counter(), 0
        while time.perf_counter() - t0 < 1.0:
            for _ in range(10):
                fn()  # type: ignore[operator]
            calls += 10
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        watts, mhz = read()  # type: ignore[operator]
        windows.append({"tflops_per_s": 2.0 * n**3 * calls / dt / 1e12, "power_w": watts, "sm_mhz": mhz})
    return {"case": "sustained", "dtype": "fp8" if fp8 else "bf16", "n": n, "windows": windows}


def main() -> None:
    dev = torch.device("cuda")
    read = nvml_reader()
    for name, (n, k) in SHAPES.items():
        for m in BATCHES:
            for fp8 in (False, True):
                a, b = operands(m, n, k, fp8, dev)
                t = time_fn(gemm_fn(a, b, fp8), dev, warmup=5, iters=20)["median_s"]  # type: ignore[arg-type]
                print(json.dumps({"case": "burst", "shape": name, "m": m, "n": n, "k": k,
                                  "dtype": "fp8" if fp8 else "bf16", "median_s": t,
                                  "tflops_per_s": 2.0 * m * n * k / t / 1e12}), flush=True)
    for fp8 in (False, True):
        print(json.dumps(sustained(fp8, dev, read)), flush=True)


if __name__ == "__main__":
    main()
