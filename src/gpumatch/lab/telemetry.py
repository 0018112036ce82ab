"""Telemetry around a bench run: NVML sampling for the whole run (10 Hz), the samples handed to the recording
after each case, the idle power before the first case, each case's window summed up and judged, and the mean
power of a case's own power window (energy per token).

On a machine without NVML, or in a tiny run, there is none (a test may give a backend factory, e.g. a fake
device replaying a trace). Each case's window is bracketed by edge-counter reads (``mark``: the violation
counters and the energy counter), summed up by :func:`gpumatch.telemetry.analysis.summarize_gpu` and judged by
:func:`gpumatch.telemetry.verdict.judge`: SW power cap (0x4) is the expected limiter of dense GEMMs on an H200
(reported, not failed on); HW slowdown (0x8), SW/HW thermal (0x20, 0x40), power brake (0x80), Xid events and new
uncorrectable ECC errors make the case's result invalid or degraded (benchmark-method.md, section 3).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.record import Recording

REASON_BITS = {"power_cap_frac": 0x4, "hw_slowdown_frac": 0x8 | 0x80, "thermal_frac": 0x20 | 0x40}
"""NVML clock-event reason bits counted in each case's summary (fraction of samples with any of the bits)."""

IDLE_WINDOW_S = 3.0
"""Seconds of an idle GPU sampled before the first case: the idle power subtracted from each case's energy."""


class CaseTelemetry:
    """NVML sampling for the whole run when the machine has it (samples go to the recording after each case);
    nothing on a machine without NVML or in a tiny run."""

    def __init__(self, rec: Recording, tiny: bool, factory: Callable[[], Any] | None) -> None:
        self.rec, self.tiny, self.factory = rec, tiny, factory
        self.sampler: Any = None
        self.backend: Any = None
        self.sent = 0
        self.by_case: dict[str, dict[str, Any]] = {}
        self.t0 = time.monotonic()
        self.origin = 0.0
        self.idle_power_w: float | None = None

    def __enter__(self) -> CaseTelemetry:
        if self.tiny and self.factory is None:
            return self
        try:
            from gpumatch.telemetry.nvml import open_nvml
            from gpumatch.telemetry.sampler import Sampler

            self.backend = self.factory() if self.factory is not None else open_nvml(None)
            self.sampler = Sampler(self.backend, 0.1).start()
            self.origin = time.monotonic() - self.sampler.now_s()
        except (GpumatchError, ImportError, OSError):
            self.sampler = None
        return self

    def now(self) -> float:
        return float(self.sampler.now_s()) if self.sampler is not None else time.monotonic() - self.t0

    def mark(self, label: str) -> None:
        """Read the edge counters (a case's window edge)."""
        if self.sampler is not None:
            self.sampler.mark(label)

    def measure_idle(self, seconds: float = IDLE_WINDOW_S) -> dict[str, Any] | None:
        """Sample the idle GPU for ``seconds``: ``{"power_w": median instant power, "n", "window_s"}``, kept in
        ``idle_power_w``; None without telemetry or samples."""
        if self.sampler is None:
            return None
        t0 = self.now()
        time.sleep(seconds)
        t1 = self.now()
        watts = [s.power_instant_w for s in self.sampler.snapshot()
                 if t0 <= s.t_s <= t1 and s.gpu_index == 0 and s.power_instant_w is not None]
        if not watts:
            return None
        self.idle_power_w = statistics.median(watts)
        return {"power_w": self.idle_power_w, "n": len(watts), "window_s": [t0, t1]}

    def power_in(self, window_monotonic_s: Sequence[float]) -> tuple[float | None, int]:
        """Mean instant power (W) of GPU 0 over a window on the host's monotonic clock (a case's power window,
        :func:`gpumatch.bench.timing.power_window`), and the number of samples in it."""
        if self.sampler is None:
            return None, 0
        lo, hi = (float(t) - self.origin for t in window_monotonic_s)
        watts = [s.power_instant_w for s in self.sampler.snapshot()
                 if lo <= s.t_s <= hi and s.gpu_index == 0 and s.power_instant_w is not None]
        return (sum(watts) / len(watts) if watts else None), len(watts)

    def flush(self, case_id: str, window: tuple[float, float]) -> dict[str, Any]:
        """Send the new samples to the recording; return (and keep in ``by_case``) the summary and verdict of
        the case's window."""
        if self.sampler is None:
            return {}
        new = self.sampler.samples_since(self.sent)
        self.sent += len(new)
        self.rec.add_samples(new)
        inside = [s for s in new if window[0] <= s.t_s <= window[1] and s.gpu_index == 0]
        self.by_case[case_id] = {**summary(inside), **_judged(self.sampler.snapshot_trace(), window)}
        return self.by_case[case_id]

    def __exit__(self, *exc: object) -> None:
        if self.sampler is not None:
            try:
                self.sampler.stop()
                self.backend.close()
            except (GpumatchError, OSError):
                pass


def _judged(trace: Any, window: tuple[float, float]) -> dict[str, Any]:
    """The verdict of GPU 0 over ``window`` (:func:`gpumatch.telemetry.verdict.judge`) with its evidence: the
    violation-counter duty (power, thermal, ...), Xid and ECC deltas, and the energy counter's joules."""
    from gpumatch.telemetry.analysis import summarize_gpu
    from gpumatch.telemetry.verdict import judge

    s = summarize_gpu(trace, 0, window[0], window[1])
    v = judge(s)
    return {"verdict": v.label, "verdict_reasons": list(v.reasons), "violation_duty": dict(s.violation_duty),
            "errors": dict(s.errors), "energy_j": s.energy_j, "energy_source": s.energy_source}


def summary(samples: Sequence[Any]) -> dict[str, Any]:
    """A window's samples (GPU 0) summed up: count, mean power (W), mean SM clock (MHz), peak temperature (°C) and
    the fraction of samples under each reason of :data:`REASON_BITS`."""
    def mean(name: str) -> float | None:
        vals = [getattr(s, name) for s in samples if getattr(s, name, None) is not None]
        return sum(vals) / len(vals) if vals else None

    temps = [s.gpu_temp_c for s in samples if s.gpu_temp_c is not None]
    reasons = [s.clock_event_reasons for s in samples if s.clock_event_reasons is not None]
    out: dict[str, Any] = {"n_samples": len(samples), "power_w_mean": mean("power_instant_w"),
                           "sm_clock_mhz_mean": mean("sm_clock_mhz"), "gpu_temp_c_max": max(temps) if temps else None}
    for name, bits in REASON_BITS.items():
        out[name] = sum(1 for r in reasons if r & bits) / len(reasons) if reasons else None
    return out
