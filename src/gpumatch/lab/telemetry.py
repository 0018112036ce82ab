"""Telemetry around a bench run: one sampler (10 Hz) for the whole run, opened through the backend factory
(:func:`gpumatch.telemetry.backends.open_backend`), the samples handed to the recording after each case, and one
telemetry window (:meth:`gpumatch.telemetry.sampler.Sampler.begin_window` / ``end_window``) per stretch: the idle
window before the first case, each case's window (summed up and judged), and each result's own power window
(energy per token).

On a machine without NVML, or in a tiny run, there is none (a test may give a backend factory, e.g. a fake
device replaying a trace). Energy, idle power, mean power and the clock-reason shares are the window's
(:mod:`gpumatch.telemetry.window`, one rule each); the verdict is :func:`gpumatch.telemetry.verdict.judge` of the
case's window: SW power cap (0x4) is the expected limiter of dense GEMMs on an H200 (reported, not failed on); HW
slowdown (0x8), SW/HW thermal (0x20, 0x40), power brake (0x80), Xid events and new uncorrectable ECC errors make
the case's result invalid or degraded (benchmark-method.md, section 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.record import Recording
from gpumatch.telemetry.window import Window

IDLE_WINDOW_S = 3.0
"""Seconds of an idle GPU sampled before the first case: its settled idle power is subtracted from each case's
energy."""
GPU = 0
"""The GPU whose telemetry a case's figures are (the bench runs on ``cuda:0``)."""


class CaseTelemetry:
    """NVML sampling for the whole run when the machine has it (samples go to the recording after each case);
    nothing on a machine without NVML or in a tiny run."""

    def __init__(self, rec: Recording, tiny: bool, factory: Callable[[], Any] | None) -> None:
        self.rec, self.tiny, self.factory = rec, tiny, factory
        self.sampler: Any = None
        self.backend: Any = None
        self.sent = 0
        self.by_case: dict[str, dict[str, Any]] = {}
        self.windows: dict[str, Window] = {}
        self.t0 = time.monotonic()
        self.origin = 0.0
        self.idle_power_w: float | None = None

    def __enter__(self) -> CaseTelemetry:
        if self.tiny and self.factory is None:
            return self
        try:
            from gpumatch.telemetry.backends import open_backend
            from gpumatch.telemetry.sampler import Sampler

            self.backend = self.factory() if self.factory is not None else open_backend("nvml")
            self.sampler = Sampler(self.backend, 0.1).start()
            self.origin = time.monotonic() - self.sampler.now_s()
        except (GpumatchError, ImportError, OSError):
            self.sampler = None
        return self

    def now(self) -> float:
        return float(self.sampler.now_s()) if self.sampler is not None else time.monotonic() - self.t0

    def begin(self, name: str) -> float:
        """Open the telemetry window ``name`` (edge counters read); its start (s)."""
        return float(self.sampler.begin_window(name)) if self.sampler is not None else self.now()

    def end(self, name: str) -> tuple[float, float]:
        """Close the window ``name`` (kept in ``windows``); its (start, end) (s)."""
        if self.sampler is None:
            return (self.now(), self.now())
        w = self.windows[name] = self.sampler.end_window(name)
        return (w.t0_s, w.t1_s)

    def measure_idle(self, seconds: float = IDLE_WINDOW_S) -> dict[str, Any] | None:
        """Sample the idle GPU for ``seconds``: its settled idle power (:func:`gpumatch.telemetry.window.
        settled_idle_power`) as ``{"power_w", "n", "settle_s", "window_s"}``, kept in ``idle_power_w``; None
        without telemetry or when the clocks did not settle."""
        if self.sampler is None:
            return None
        self.begin("idle")
        time.sleep(seconds)
        self.end("idle")
        w = self.windows["idle"]
        idle = w.gpu(GPU).idle
        if idle is None or idle.power_w is None:
            return None
        self.idle_power_w = idle.power_w
        return {"power_w": idle.power_w, "n": idle.n_samples, "settle_s": idle.settle_s,
                "window_s": [w.t0_s, w.t1_s]}

    def power_in(self, window_monotonic_s: Sequence[float]) -> tuple[float | None, int]:
        """Mean power (W) of GPU 0 over a window on the host's monotonic clock (a case's power window,
        :func:`gpumatch.bench.timing.power_window`), and the number of samples in it."""
        if self.sampler is None:
            return None, 0
        lo, hi = (float(t) - self.origin for t in window_monotonic_s)
        g = self.sampler.window("power", lo, hi).gpu(GPU)
        return g.power_w_mean, g.n_samples

    def flush(self, case_id: str) -> dict[str, Any]:
        """Send the new samples to the recording; return (and keep in ``by_case``) the summary and verdict of
        the case's window (closed by :meth:`end`)."""
        if self.sampler is None:
            return {}
        new = self.sampler.samples_since(self.sent)
        self.sent += len(new)
        self.rec.add_samples(new)
        w = self.windows[case_id]
        g = w.gpu(GPU)
        self.by_case[case_id] = {**g.summary(), **_judged(self.sampler.snapshot_trace(), w),
                                 "energy_j": g.energy_j, "energy_source": g.energy_source}
        return self.by_case[case_id]

    def __exit__(self, *exc: object) -> None:
        if self.sampler is not None:
            try:
                self.sampler.stop()
                self.backend.close()
            except (GpumatchError, OSError):
                pass


def _judged(trace: Any, w: Window) -> dict[str, Any]:
    """The verdict of GPU 0 over the window (:func:`gpumatch.telemetry.verdict.judge`) with its evidence: the
    violation-counter duty (power, thermal, ...) and the Xid and ECC deltas."""
    from gpumatch.telemetry.analysis import summarize_gpu
    from gpumatch.telemetry.verdict import judge

    s = summarize_gpu(trace, GPU, w.t0_s, w.t1_s)
    v = judge(s)
    return {"verdict": v.label, "verdict_reasons": list(v.reasons), "violation_duty": dict(s.violation_duty),
            "errors": dict(s.errors)}
