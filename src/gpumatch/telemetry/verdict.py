"""What a window of telemetry says: the workload class and the validity verdict, each with reasons.

Verdicts (../shared/notes/benchmark-method.md section 4.5), first match wins:

- ``invalid-errors``: an Xid event, new uncorrectable ECC errors, a new or pending row remap, or a
  failed remap during the window. PCIe replays that rose are reported as a note (the link retried).
- ``invalid-hw-slowdown``: HW slowdown, HW thermal slowdown or HW power brake set in >= 2% of the
  samples (a single sample can be a P-state change: NVML says HW slowdown "may be also reported
  during PState or clock change").
- ``degraded-thermal``: the thermal violation counter (or the SW-thermal bit) >= 2% of the window, or
  the hottest sample within 5 °C of the slowdown threshold.
- ``valid-power-capped``: the SW power cap held clocks for >= 5% of the window. Expected for dense
  GEMMs on an H200 (6.81 s of 7.01 s in the probe); the duty cycle is reported, nothing fails.
- ``valid``: none of the above.

Workload classes (GPM where the GPU has it; NVML utilization otherwise, which is weaker because
``utilization.gpu`` counts any kernel running, so one busy thread reads 100% — section 3). They are
judged from means over the *active span* (:func:`gpumatch.telemetry.analysis.active_span`: first to
last sample with NVML utilization >= 5% or instant power >= half the limit), not over the whole
window: ``gpumatch monitor -- CMD`` opens the window before CMD has started, so process start-up and
CUDA init (4.9 s of a 15.2-s window on an H200, 2026-12-03) would otherwise dilute every mean. A
window without an active span is judged over all of it.

- ``idle``: mean NVML utilization < 5%.
- ``host-bound``: GPM SM-active < 25% and DRAM-bandwidth utilization < 40%, while NVML utilization
  is >= 20% or SM-active is under a tenth of it (utilization >= 5%). Why the ratio: a tiny kernel
  runs on one or a few of the GPU's SMs (132 on an H100/H200), so NVML, which counts time with any
  kernel running, reads it as busy, while GPM SM-active counts SM-time and reads ~1/132 of that. A
  launch-bound loop of 1-element kernels on an H200 read 20-27% utilization against 0.03% SM-active
  (host-bound, not "mixed"); a dense GEMM reads 100% against 96%. The DRAM condition keeps a copy
  that leaves the SMs idle but the memory busy out of this class. Without GPM: utilization < 60%
  with power under 35% of the limit.
- ``memory-bound``: GPM DRAM-bandwidth utilization >= 40% and above tensor activity; without GPM,
  NVML memory utilization >= 50%.
- ``compute-bound``: GPM tensor-active >= 40% or SM-active >= 60%; without GPM, utilization >= 90% and
  power >= 80% of the limit.
- ``mixed``: active but none of the above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpumatch.telemetry.analysis import GpuSummary, summarize_gpu
from gpumatch.telemetry.trace import Trace

HOST_BOUND_SM_MAX_PCT = 25.0
HOST_BOUND_UTIL_PCT = 20.0
HOST_BOUND_SM_PER_UTIL = 0.1
HOST_BOUND_DRAM_MAX_PCT = 40.0
HW_SLOWDOWN_MIN_DUTY = 0.02
THERMAL_MIN_DUTY = 0.02
THERMAL_MIN_HEADROOM_C = 5.0
POWER_CAP_MIN_DUTY = 0.05

VERDICTS = ("valid", "valid-power-capped", "degraded-thermal", "invalid-hw-slowdown", "invalid-errors")
WORKLOADS = ("idle", "host-bound", "memory-bound", "compute-bound", "mixed")


@dataclass(frozen=True)
class Verdict:
    """A label with the evidence for it (one short sentence per reason)."""

    label: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class GpuVerdict:
    """One GPU over one window: the summary, its workload class and its validity verdict."""

    summary: GpuSummary
    workload: Verdict
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_index": self.summary.gpu_index,
            "workload": self.workload.label,
            "workload_reasons": list(self.workload.reasons),
            "verdict": self.verdict.label,
            "verdict_reasons": list(self.verdict.reasons),
            "summary": self.summary.to_dict(),
        }


def power_cap_duty(s: GpuSummary) -> float:
    """Fraction of the window under the power limiter: the 'power' violation counter if read, else
    the SW-power-cap bit's sample fraction."""
    if "power" in s.violation_duty:
        return s.violation_duty["power"]
    return s.throttle_duty.get("sw_power_cap", 0.0)


def thermal_duty(s: GpuSummary) -> float:
    if "thermal" in s.violation_duty:
        return s.violation_duty["thermal"]
    return s.throttle_duty.get("sw_thermal", 0.0)


def hw_slowdown_duty(s: GpuSummary) -> float:
    """Largest sampled duty of the result-invalidating HW reasons (no violation counter covers them)."""
    return max((s.throttle_duty.get(k, 0.0) for k in ("hw_slowdown", "hw_thermal", "hw_power_brake")), default=0.0)


def judge(s: GpuSummary) -> Verdict:
    """The validity verdict of one summary (rules in the module docstring)."""
    e = s.errors
    bad = []
    if e.get("xid"):
        bad.append(f"Xid event(s) {e['xid']}")
    if (e.get("ecc_uncorrected_delta") or 0) > 0:
        bad.append(f"{e['ecc_uncorrected_delta']} new uncorrectable ECC error(s)")
    if e.get("remap_pending") or e.get("remap_failed") or (e.get("remapped_rows_delta") or 0) > 0:
        bad.append("row remapping pending, failed or new during the window")
    if bad:
        return Verdict("invalid-errors", tuple(bad))
    notes = []
    if (e.get("pcie_replays_delta") or 0) > 0:
        notes.append(f"PCIe replays rose by {e['pcie_replays_delta']} (link retries)")
    hw = hw_slowdown_duty(s)
    if hw >= HW_SLOWDOWN_MIN_DUTY:
        return Verdict("invalid-hw-slowdown", (f"HW slowdown/brake in {hw:.0%} of samples", *notes))
    th = thermal_duty(s)
    if th >= THERMAL_MIN_DUTY:
        return Verdict("degraded-thermal", (f"thermal limit for {th:.0%} of the window", *notes))
    if s.temp_headroom_c is not None and s.temp_headroom_c < THERMAL_MIN_HEADROOM_C:
        return Verdict("degraded-thermal", (f"{s.temp_headroom_c:.0f} °C from the slowdown threshold", *notes))
    pc = power_cap_duty(s)
    src = "violation counter" if "power" in s.violation_duty else "sampled reasons"
    if pc >= POWER_CAP_MIN_DUTY:
        return Verdict("valid-power-capped", (f"SW power cap for {pc:.0%} of the window ({src}); expected for "
                                              "dense compute", *notes))
    return Verdict("valid", tuple(notes) or ("no limiter beyond idle/boost management",))


@dataclass(frozen=True)
class Activity:
    """The means a workload class is judged from (%, W; None = not reported) and where they come from."""

    util_gpu_pct: float | None
    util_mem_pct: float | None
    sm_active_pct: float | None
    tensor_active_pct: float | None
    dram_bw_util_pct: float | None
    power_avg_w: float | None
    basis: str


def activity(s: GpuSummary) -> Activity:
    """Means over the active span when there is one, else over the whole window."""
    a = s.active
    if a is None or a.util_gpu_pct_mean is None:
        return Activity(s.util_gpu_pct_mean, s.util_mem_pct_mean, s.gpm_sm_active_mean, s.gpm_tensor_active_mean,
                        s.gpm_dram_bw_util_mean, s.power_avg_w_mean, "")
    basis = ""
    if a.lead_in_s + a.tail_s > 0.05 * max(s.duration_s, 1e-9):
        basis = (f"means over the active {a.duration_s:.1f} s of {s.duration_s:.1f} s (start-up {a.lead_in_s:.1f} s, "
                 f"tail {a.tail_s:.1f} s left out)")
    return Activity(a.util_gpu_pct_mean, a.util_mem_pct_mean, a.gpm_sm_active_mean, a.gpm_tensor_active_mean,
                    a.gpm_dram_bw_util_mean, a.power_avg_w_mean, basis)


def classify(s: GpuSummary) -> Verdict:
    """The workload class of one summary (rules in the module docstring)."""
    act = activity(s)
    util = act.util_gpu_pct
    if util is None:
        return Verdict("mixed", ("no utilization samples",))
    if util < 5:
        v = Verdict("idle", (f"NVML utilization {util:.1f}%",))
    elif act.sm_active_pct is not None:
        v = _classify_gpm(util, act.sm_active_pct, act.tensor_active_pct or 0.0, act.dram_bw_util_pct or 0.0)
    else:
        v = _classify_nvml(s, act)
    return Verdict(v.label, (*v.reasons, act.basis)) if act.basis else v


def _pct(v: float) -> str:
    """A percentage readable at both ends: 82.3%, 0.76%, 0.027%."""
    return f"{v:.1f}%" if v >= 1 or v == 0 else f"{v:.2g}%"


def _classify_gpm(util: float, sm: float, tensor: float, dram: float) -> Verdict:
    gpm = f"GPM SM-active {_pct(sm)}, tensor {_pct(tensor)}, DRAM BW {_pct(dram)}"
    if sm < HOST_BOUND_SM_MAX_PCT and dram < HOST_BOUND_DRAM_MAX_PCT:
        if util >= HOST_BOUND_UTIL_PCT:
            return Verdict("host-bound", (f"{gpm} against NVML utilization {util:.0f}%: kernels too small or the "
                                          "host cannot feed the GPU",))
        if sm < HOST_BOUND_SM_PER_UTIL * util:
            return Verdict("host-bound", (f"{gpm}, under a tenth of NVML utilization {util:.0f}%: kernels occupy "
                                          "a few SMs, or the host cannot feed the GPU",))
    if dram >= 40 and dram > tensor:
        return Verdict("memory-bound", (gpm,))
    if tensor >= 40 or sm >= 60:
        return Verdict("compute-bound", (gpm,))
    return Verdict("mixed", (gpm,))


def _classify_nvml(s: GpuSummary, act: Activity) -> Verdict:
    util = act.util_gpu_pct or 0.0
    limit = s.power_limit_w
    power = act.power_avg_w
    frac = None if not limit or power is None else power / limit
    basis = f"NVML utilization {util:.0f}% (no GPM on this GPU; weaker evidence)"
    if util < 60 and frac is not None and frac < 0.35:
        return Verdict("host-bound", (basis, f"power {frac:.0%} of the limit"))
    if (act.util_mem_pct or 0) >= 50:
        return Verdict("memory-bound", (basis, f"NVML memory utilization {act.util_mem_pct:.0f}%"))
    if util >= 90 and frac is not None and frac >= 0.8:
        return Verdict("compute-bound", (basis, f"power {frac:.0%} of the limit"))
    return Verdict("mixed", (basis,))


def analyze(trace: Trace, t0_s: float | None = None, t1_s: float | None = None) -> list[GpuVerdict]:
    """Summary, workload class and verdict for every GPU of ``trace`` over [t0_s, t1_s]."""
    out = []
    for i in trace.gpu_indices():
        s = summarize_gpu(trace, i, t0_s, t1_s)
        out.append(GpuVerdict(summary=s, workload=classify(s), verdict=judge(s)))
    return out
