"""Telemetry around a bench run: NVML sampling for the whole run (10 Hz), the samples handed to the recording
after each case, and a summary of each case's window (power, clock, temperature, clock-event fractions).

On a machine without NVML, or in a tiny run, there is none (a test may give a backend factory, e.g. a fake
device replaying a trace). SW power cap (0x4) is the expected limiter of dense GEMMs on an H200 (its duty cycle is
reported, not failed on); HW slowdown (0x8), SW/HW thermal (0x20, 0x40) and power brake (0x80) invalidate a
result (benchmark-method.md, section 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.record import Recording

REASON_BITS = {"power_cap_frac": 0x4, "hw_slowdown_frac": 0x8 | 0x80, "thermal_frac": 0x20 | 0x40}
"""NVML clock-event reason bits counted in each case's summary (fraction of samples with any of the bits)."""


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

    def __enter__(self) -> CaseTelemetry:
        if self.tiny and self.factory is None:
            return self
        try:
            from gpumatch.telemetry.nvml import open_nvml
            from gpumatch.telemetry.sampler import Sampler

            self.backend = self.factory() if self.factory is not None else open_nvml(None)
            self.sampler = Sampler(self.backend, 0.1).start()
        except (GpumatchError, ImportError, OSError):
            self.sampler = None
        return self

    def now(self) -> float:
        return float(self.sampler.now_s()) if self.sampler is not None else time.monotonic() - self.t0

    def flush(self, case_id: str, window: tuple[float, float]) -> dict[str, Any]:
        """Send the new samples to the recording; return (and keep in ``by_case``) the summary of the case's
        window."""
        if self.sampler is None:
            return {}
        new = self.sampler.samples_since(self.sent)
        self.sent += len(new)
        self.rec.add_samples(new)
        inside = [s for s in new if window[0] <= s.t_s <= window[1] and s.gpu_index == 0]
        self.by_case[case_id] = summary(inside)
        return self.by_case[case_id]

    def __exit__(self, *exc: object) -> None:
        if self.sampler is not None:
            try:
                self.sampler.stop()
                self.backend.close()
            except (GpumatchError, OSError):
                pass


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
