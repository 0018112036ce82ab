"""Trace analysis: throttle duty cycles, dips, burst vs sustained, settled idle power, energy, and the
per-GPU summary that :mod:`gpumatch.telemetry.verdict` labels.

Method (../shared/notes/benchmark-method.md sections 2-5):

- Throttle duty per reason: from the violation counters (ns limited / ns of window) when both window
  edges have them (better: they integrate in the driver); otherwise the fraction of samples whose
  clock-event bitmask has the bit set.
- Energy: the energy-counter difference between the edges (mJ); a missing or negative difference
  (driver reload) falls back to the trapezoid integral of the 1-s-average power.
- Idle power: the median of the 1-s-average power over idle samples (util 0) taken once the SM clock
  has settled near its lowest value and one more second has passed (the average lags ~1 s); right
  after load an H200 idled at 124 W at 1980 MHz against 86 W at 900 MHz once settled.
- Dips: runs of >= ``min_len`` samples where utilization or power falls under half of its median over
  the active part (seed 001 section 4.2: such drops are waits for data loading or communication).
- Burst vs sustained: mean SM clock and power over the first minute (or the first quarter of a shorter
  run) against the last half (seed 001 section 3.4: short runs hide thermal down-clocking).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import REASON_GPU_IDLE, REASON_NAMES, DeviceInfo, EdgeCounters, Sample

BURST_WINDOW_S = 60.0


@dataclass(frozen=True)
class Dips:
    """Drops of a signal under half its active median: how many, the fraction of time, the longest (s)."""

    signal: str
    count: int
    time_fraction: float
    longest_s: float


@dataclass(frozen=True)
class BurstSustained:
    """First-minute (burst) against last-half (sustained) means; ``ratio`` = sustained / burst."""

    burst_window_s: float
    burst_sm_clock_mhz: float | None
    sustained_sm_clock_mhz: float | None
    burst_power_w: float | None
    sustained_power_w: float | None
    sm_clock_ratio: float | None


@dataclass(frozen=True)
class IdlePower:
    """Idle power after clocks settled (W; None if they never did), how long settling took from the
    first idle sample (s), and the median SM clock of the settled (else of all idle) samples (MHz)."""

    power_w: float | None
    settle_s: float
    sm_clock_mhz: float | None


@dataclass(frozen=True)
class GpuSummary:
    """Everything the verdict needs about one GPU over one window (SI units; None = not reported)."""

    gpu_index: int
    name: str
    duration_s: float
    n_samples: int
    power_avg_w_mean: float | None
    power_instant_w_max: float | None
    power_w_p95: float | None
    power_limit_w: float | None
    energy_j: float | None
    energy_source: str
    sm_clock_mhz_mean: float | None
    sm_clock_mhz_p5: float | None
    sm_clock_max_mhz: float | None
    util_gpu_pct_mean: float | None
    util_mem_pct_mean: float | None
    gpm_sm_active_mean: float | None
    gpm_tensor_active_mean: float | None
    gpm_dram_bw_util_mean: float | None
    gpu_temp_c_max: float | None
    mem_temp_c_max: float | None
    temp_headroom_c: float | None
    throttle_duty: dict[str, float]
    throttle_source: str
    violation_duty: dict[str, float]
    reasons_seen: list[str]
    dips: list[Dips]
    burst: BurstSustained | None
    idle: IdlePower | None
    errors: dict[str, Any] = field(default_factory=dict)
    pcie_gen_end: int | None = None
    pcie_width_end: int | None = None

    @property
    def idle_power_w(self) -> float | None:
        return None if self.idle is None else self.idle.power_w

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["idle_power_w"] = self.idle_power_w
        return d


def _vals(samples: Sequence[Sample], key: str) -> list[float]:
    return [float(v) for s in samples if (v := getattr(s, key)) is not None]


def mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def percentile(xs: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default 'linear' method), q in [0, 100]."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def bitmask_duty(samples: Sequence[Sample]) -> dict[str, float]:
    """Fraction of samples with each clock-event reason set (samples without a mask are skipped)."""
    masks = [s.clock_event_reasons for s in samples if s.clock_event_reasons is not None]
    if not masks:
        return {}
    return {name: sum(1 for m in masks if m & bit) / len(masks) for bit, name in REASON_NAMES.items()}


def edge_pair(edges: Sequence[EdgeCounters], t0_s: float, t1_s: float) -> tuple[EdgeCounters, EdgeCounters] | None:
    """The edge readings nearest to the window's start and end (None if fewer than two)."""
    if len(edges) < 2:
        return None
    a = min(edges, key=lambda e: abs(e.t_s - t0_s))
    b = min(edges, key=lambda e: abs(e.t_s - t1_s))
    return (a, b) if b.t_s > a.t_s else None


def violation_duty(pair: tuple[EdgeCounters, EdgeCounters] | None) -> dict[str, float]:
    """Fraction of the window limited, per NVML perf policy: Δviolation_ns / Δt (clamped to [0, 1])."""
    if pair is None:
        return {}
    a, b = pair
    span_ns = (b.t_s - a.t_s) * 1e9
    out = {}
    for k, v0 in a.violation_ns.items():
        v1 = b.violation_ns.get(k)
        if v1 is not None and span_ns > 0:
            out[k] = min(max((v1 - v0) / span_ns, 0.0), 1.0)
    return out


def energy_j(samples: Sequence[Sample], pair: tuple[EdgeCounters, EdgeCounters] | None) -> tuple[float | None, str]:
    """Energy over the window (J) and its source: 'counter' or 'integrated' (trapezoid of power)."""
    if pair is not None and pair[0].energy_mj is not None and pair[1].energy_mj is not None:
        d = pair[1].energy_mj - pair[0].energy_mj
        if d >= 0:
            return d / 1000.0, "counter"
    pts = [(s.t_s, p) for s in samples if (p := s.power_avg_w if s.power_avg_w is not None else s.power_instant_w)
           is not None]
    if len(pts) < 2:
        return None, "none"
    e = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(pts))
    return e, "integrated"


def find_dips(samples: Sequence[Sample], key: str, min_len: int = 3) -> Dips | None:
    """Runs of >= ``min_len`` samples under half the median of the active samples (value > 0)."""
    pts = [(s.t_s, float(v)) for s in samples if (v := getattr(s, key)) is not None]
    active = [v for _, v in pts if v > 0]
    med = percentile(active, 50)
    if med is None or len(pts) < 2:
        return None
    limit = med / 2
    runs: list[float] = []
    start: float | None = None
    count = 0
    for t, v in pts:
        if v < limit:
            if start is None:
                start, count = t, 0
            count += 1
        elif start is not None:
            if count >= min_len:
                runs.append(t - start)
            start = None
    if start is not None and count >= min_len:
        runs.append(pts[-1][0] - start)
    total = pts[-1][0] - pts[0][0]
    return Dips(key, len(runs), sum(runs) / total if total > 0 else 0.0, max(runs, default=0.0))


def burst_vs_sustained(samples: Sequence[Sample], window_s: float = BURST_WINDOW_S) -> BurstSustained | None:
    """First ``window_s`` (or the first quarter of a shorter run) against the last half, active samples."""
    active = [s for s in samples if (s.util_gpu_pct or 0) >= 50]
    if len(active) < 8:
        return None
    t0, t1 = active[0].t_s, active[-1].t_s
    w = min(window_s, (t1 - t0) / 4)
    burst = [s for s in active if s.t_s < t0 + w]
    sustained = [s for s in active if s.t_s >= t0 + (t1 - t0) / 2]
    b_clk, s_clk = mean(_vals(burst, "sm_clock_mhz")), mean(_vals(sustained, "sm_clock_mhz"))
    return BurstSustained(
        burst_window_s=w,
        burst_sm_clock_mhz=b_clk,
        sustained_sm_clock_mhz=s_clk,
        burst_power_w=mean(_vals(burst, "power_avg_w")),
        sustained_power_w=mean(_vals(sustained, "power_avg_w")),
        sm_clock_ratio=None if not b_clk or s_clk is None else s_clk / b_clk,
    )


def _settled(s: Sample, floor_mhz: float, settle_mhz: float) -> bool:
    """Clocks are down: the GpuIdle reason is set (when reasons are reported), else the SM clock sits
    within ``settle_mhz`` of the lowest idle clock in the trace."""
    if s.clock_event_reasons is not None:
        return bool(s.clock_event_reasons & REASON_GPU_IDLE)
    return s.sm_clock_mhz is not None and s.sm_clock_mhz <= floor_mhz + settle_mhz


def settled_idle_power(samples: Sequence[Sample], settle_mhz: float = 50.0, lag_s: float = 1.0) -> IdlePower | None:
    """Idle power once clocks have settled (None when nothing in the window is idle).

    ``power_w``: median 1-s-average power over idle samples (util 0) whose clocks are down, from
    ``lag_s`` after the first such sample (the average lags the load by ~1 s); None when the clocks
    never settled, e.g. while a process keeps a CUDA context open (seen on an H200: 1980 MHz and
    116 W for 40 s after a load, reasons 0x0, against 77 W before any context existed).
    """
    idle = [s for s in samples if s.util_gpu_pct == 0]
    if not idle:
        return None
    clocks = [float(s.sm_clock_mhz) for s in idle if s.sm_clock_mhz is not None]
    floor = min(clocks) if clocks else 0.0
    settled = [s for s in idle if _settled(s, floor, settle_mhz)]
    unsettled_clock = percentile(clocks, 50)
    if not settled:
        return IdlePower(None, 0.0, unsettled_clock)
    t_settled = settled[0].t_s
    watts = [float(s.power_avg_w) for s in settled if s.t_s >= t_settled + lag_s and s.power_avg_w is not None]
    return IdlePower(percentile(watts, 50), t_settled - idle[0].t_s, percentile(
        [float(s.sm_clock_mhz) for s in settled if s.sm_clock_mhz is not None], 50))


def error_deltas(trace: Trace, pair: tuple[EdgeCounters, EdgeCounters] | None) -> dict[str, Any]:
    """Counter deltas over the window plus Xid events: the evidence for 'invalid-errors'."""
    out: dict[str, Any] = {"xid": [x.xid for x in trace.xid_events]}
    if pair is None:
        return out
    a, b = pair
    for key in ("ecc_corrected", "ecc_uncorrected", "pcie_replays"):
        v0, v1 = getattr(a, key), getattr(b, key)
        out[f"{key}_delta"] = None if v0 is None or v1 is None else v1 - v0
    if b.remapped_rows is not None:
        out["remap_pending"] = bool(b.remapped_rows[2])
        out["remap_failed"] = bool(b.remapped_rows[3])
        if a.remapped_rows is not None:
            out["remapped_rows_delta"] = (b.remapped_rows[0] + b.remapped_rows[1]) - (
                a.remapped_rows[0] + a.remapped_rows[1])
    return out


def summarize_gpu(trace: Trace, index: int, t0_s: float | None = None, t1_s: float | None = None) -> GpuSummary:
    """Summarise one GPU of ``trace`` over [t0_s, t1_s] (default: the whole trace)."""
    part = trace.for_gpu(index)
    samples = [s for s in part.samples if (t0_s is None or s.t_s >= t0_s) and (t1_s is None or s.t_s <= t1_s)]
    info = part.devices[0] if part.devices else DeviceInfo(index=index, name="unknown")
    lo = samples[0].t_s if samples else 0.0
    hi = samples[-1].t_s if samples else 0.0
    pair = edge_pair(part.edges, lo if t0_s is None else t0_s, hi if t1_s is None else t1_s)
    viol = violation_duty(pair)
    duty = bitmask_duty(samples)
    e, e_src = energy_j(samples, pair)
    temps = _vals(samples, "gpu_temp_c")
    tmax = max(temps) if temps else None
    dips = [d for key in ("util_gpu_pct", "power_instant_w") if (d := find_dips(samples, key)) is not None]
    return GpuSummary(
        gpu_index=index,
        name=info.name,
        duration_s=hi - lo,
        n_samples=len(samples),
        power_avg_w_mean=mean(_vals(samples, "power_avg_w")),
        power_instant_w_max=max(_vals(samples, "power_instant_w"), default=None),
        power_w_p95=percentile(_vals(samples, "power_avg_w"), 95),
        power_limit_w=info.power_limit_enforced_w,
        energy_j=e,
        energy_source=e_src,
        sm_clock_mhz_mean=mean(_vals(samples, "sm_clock_mhz")),
        sm_clock_mhz_p5=percentile(_vals(samples, "sm_clock_mhz"), 5),
        sm_clock_max_mhz=info.sm_clock_max_mhz,
        util_gpu_pct_mean=mean(_vals(samples, "util_gpu_pct")),
        util_mem_pct_mean=mean(_vals(samples, "util_mem_pct")),
        gpm_sm_active_mean=mean(_vals(samples, "gpm_sm_active")),
        gpm_tensor_active_mean=mean(_vals(samples, "gpm_tensor_active")),
        gpm_dram_bw_util_mean=mean(_vals(samples, "gpm_dram_bw_util")),
        gpu_temp_c_max=tmax,
        mem_temp_c_max=max(_vals(samples, "mem_temp_c"), default=None),
        temp_headroom_c=None if tmax is None or info.temp_slowdown_c is None else info.temp_slowdown_c - tmax,
        throttle_duty=duty,
        throttle_source="violation_counters" if viol else ("sampled_bitmask" if duty else "none"),
        violation_duty=viol,
        reasons_seen=[k for k, v in duty.items() if v > 0],
        dips=dips,
        burst=burst_vs_sustained(samples),
        idle=settled_idle_power(samples),
        errors=error_deltas(part, pair),
        pcie_gen_end=pair[1].pcie_gen if pair else None,
        pcie_width_end=pair[1].pcie_width if pair else None,
    )
