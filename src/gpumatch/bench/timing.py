"""Timing with CUDA events (or the host clock on CPU): warm-up, then repeated timed iterations.

Method: METHOD.md of the device library and ../shared/notes/benchmark-method.md: device work is
asynchronous, so each iteration is bracketed by CUDA events and read after one synchronize; warm-up
iterations keep compilation, handle creation and allocator growth out of the numbers; the median and
p10/p90 are reported with the raw list.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from gpumatch.bench.stats import summarize


def device_of(default: str | None = None) -> torch.device:
    """The CUDA device when there is one, else the CPU (or ``default`` when given)."""
    if default is not None:
        return torch.device(default)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_fn(
    fn: Callable[[], Any],
    device: torch.device,
    warmup: int = 3,
    iters: int = 10,
    inner: int = 1,
    max_s: float | None = None,
) -> dict[str, Any]:
    """Time ``fn`` ``iters`` times after ``warmup`` calls; each sample is one call of ``inner`` repeats.

    Returns :func:`gpumatch.bench.stats.summarize` of seconds per call of ``fn`` (sample time / inner).
    ``max_s`` stops early (after at least 3 samples) when the samples so far exceed that many seconds.
    """
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples: list[float] = []
    spent = 0.0
    for _ in range(iters):
        if device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            elapsed = start.elapsed_time(end) / 1e3
        else:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            elapsed = time.perf_counter() - t0
        samples.append(elapsed / inner)
        spent += elapsed
        if max_s is not None and spent > max_s and len(samples) >= 3:
            break
    return summarize(samples)


def power_window(fn: Callable[[], Any], device: torch.device, seconds: float) -> dict[str, Any]:
    """Run ``fn`` back to back for at least ``seconds`` (after the timed samples) so the telemetry sampler
    (10 Hz) sees the case's steady power: returns ``{"monotonic_s": [t0, t1], "iters": n}`` on the host's
    monotonic clock, which the parent maps onto its sampler's clock. The energy counter and instant power
    need windows of about a second or more (benchmark-method.md section 2)."""
    synchronize(device)
    t0 = time.monotonic()
    n = 0
    while True:
        for _ in range(8):
            fn()
        n += 8
        synchronize(device)
        t1 = time.monotonic()
        if t1 - t0 >= seconds:
            return {"monotonic_s": [t0, t1], "iters": n}
