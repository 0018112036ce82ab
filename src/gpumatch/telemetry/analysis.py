"""Trace analysis: throttle duty cycles, dips, burst vs sustained, and the per-GPU summary that
:mod:`gpumatch.telemetry.verdict` labels.

Method (../shared/notes/benchmark-method.md sections 2-5):

- Throttle duty per reason: from the violation counters (ns limited / ns of window) when both window
  edges have them (better: they integrate in the driver); otherwise the fraction of samples whose
  clock-event bitmask has the bit set.
- Energy and settled idle power: the one rule of each in :mod:`gpumatch.telemetry.window` (the energy counter's
  mean power x the window, else the trapezoid of the sampled power; the median 1-s-average power once the
  clocks have settled).
- Active span: from the first to the last sample with evidence of work: NVML utilization >= 5%, or
  instant power >= 50% of the enforced limit (utilization lags a load step by up to its 1/6-1 s
  averaging period; on an H200 the first GEMM sample read 739 W at 1% utilization). Idle draws 11-18%
  of the limit on an H200 (78 W settled, 117-126 W with clocks up), so half the limit means kernels
  ran. GPM SM-active is not used: it is sampled once a second over the second before, and NVML
  utilization (any kernel running) is never the lower of the two. Busy stretches shorter than
  ``MIN_BUSY_S`` do not count (a leftover of the previous process's utilization window read 19-29%
  for 0.25 s at the start of an idle H200 trace). Before the span is the start-up (process start,
  CUDA init, loading), after it the tail; the workload is classified from means over the span,
  while energy, duty cycles and the window's own means stay over the whole window.
- Dips: runs of >= ``min_len`` samples inside the active span where utilization or power falls under
  half of its median there, with work on both sides (seed 001 section 4.2: such drops are waits for
  data loading or communication). Start-up and tail are reported as such, not as dips.
- Burst vs sustained: mean SM clock and power over the first minute (or the first quarter of a shorter
  run) against the last half (seed 001 section 3.4: short runs hide thermal down-clocking).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpumatch import stats
from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import REASON_NAMES, DeviceInfo, EdgeCounters, Sample
from gpumatch.telemetry.window import (
    IdlePower,
    edge_pair,
    mean,
    reason_shares,
    settled_idle_power,
    window_energy_j,
)

BURST_WINDOW_S = 60.0
BUSY_UTIL_PCT = 5.0
BUSY_POWER_FRACTION = 0.5
MIN_BUSY_S = 1.0


@dataclass(frozen=True)
class Dips:
    """Drops of a signal under half its median inside the active span: how many, the fraction of the span,
    the longest (s)."""

    signal: str
    count: int
    time_fraction: float
    longest_s: float


@dataclass(frozen=True)
class ActiveSpan:
    """Where the GPU worked: [t0_s, t1_s] (s on the trace clock), the start-up before it and the tail
    after it (s), and the activity means over it (%, W; None = not reported)."""

    t0_s: float
    t1_s: float
    duration_s: float
    lead_in_s: float
    tail_s: float
    n_samples: int
    util_gpu_pct_mean: float | None
    util_mem_pct_mean: float | None
    gpm_sm_active_mean: float | None
    gpm_tensor_active_mean: float | None
    gpm_dram_bw_util_mean: float | None
    power_avg_w_mean: float | None


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
    active: ActiveSpan | None = None

    @property
    def idle_power_w(self) -> float | None:
        return None if self.idle is None else self.idle.power_w

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["idle_power_w"] = self.idle_power_w
        return d


def _vals(samples: Sequence[Sample], key: str) -> list[float]:
    return [float(v) for s in samples if (v := getattr(s, key)) is not None]


def percentile(xs: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of telemetry samples, :func:`gpumatch.stats.percentile` (numpy's linear
    method); None without samples. A descriptive figure of a time series (p95 power, p5 clock, a median), so
    no minimum-sample rule: that rule is for reported latency and timing percentiles."""
    return stats.percentile(xs, q) if xs else None


def bitmask_duty(samples: Sequence[Sample]) -> dict[str, float]:
    """Fraction of samples with each clock-event reason set (samples without a mask are skipped)."""
    return reason_shares(samples, {name: bit for bit, name in REASON_NAMES.items()})


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


def is_busy(s: Sample, power_floor_w: float | None) -> bool:
    """Evidence of work in one sample: NVML utilization >= 5%, or instant power >= ``power_floor_w``."""
    if s.util_gpu_pct is not None and s.util_gpu_pct >= BUSY_UTIL_PCT:
        return True
    return power_floor_w is not None and s.power_instant_w is not None and s.power_instant_w >= power_floor_w


def _busy_stretches(samples: Sequence[Sample], power_floor_w: float | None) -> list[tuple[int, int]]:
    """(first, last) indices of each run of consecutive busy samples."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    for i, s in enumerate(samples):
        if is_busy(s, power_floor_w):
            start = i if start is None else start
        elif start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(samples) - 1))
    return out


def active_span(samples: Sequence[Sample], power_limit_w: float | None = None,
                min_busy_s: float = MIN_BUSY_S) -> ActiveSpan | None:
    """The active span of a window (rules in the module docstring); None when nothing was busy for
    ``min_busy_s`` at a stretch."""
    floor = None if not power_limit_w else BUSY_POWER_FRACTION * power_limit_w
    long = [(a, b) for a, b in _busy_stretches(samples, floor) if samples[b].t_s - samples[a].t_s >= min_busy_s]
    if not long:
        return None
    first, last = long[0][0], long[-1][1]
    part = samples[first:last + 1]
    t0, t1 = part[0].t_s, part[-1].t_s
    return ActiveSpan(
        t0_s=t0, t1_s=t1, duration_s=t1 - t0, lead_in_s=t0 - samples[0].t_s, tail_s=samples[-1].t_s - t1,
        n_samples=len(part),
        util_gpu_pct_mean=mean(_vals(part, "util_gpu_pct")),
        util_mem_pct_mean=mean(_vals(part, "util_mem_pct")),
        gpm_sm_active_mean=mean(_vals(part, "gpm_sm_active")),
        gpm_tensor_active_mean=mean(_vals(part, "gpm_tensor_active")),
        gpm_dram_bw_util_mean=mean(_vals(part, "gpm_dram_bw_util")),
        power_avg_w_mean=mean(_vals(part, "power_avg_w")),
    )


def find_dips(samples: Sequence[Sample], key: str, min_len: int = 3) -> Dips | None:
    """Runs of >= ``min_len`` samples under half the median of the active samples (value > 0), with
    samples at or above that level on both sides: a run that reaches either end of ``samples`` is a
    ramp-up or a tail, not a wait. Pass the samples of the active span."""
    pts = [(s.t_s, float(v)) for s in samples if (v := getattr(s, key)) is not None]
    active = [v for _, v in pts if v > 0]
    med = percentile(active, 50)
    if med is None or len(pts) < 2:
        return None
    limit = med / 2
    runs: list[float] = []
    start: int | None = None  # index where the current run under the limit began
    for i, (t, v) in enumerate(pts):
        if v < limit:
            start = i if start is None else start
        elif start is not None:
            if start > 0 and i - start >= min_len:  # work before and after it: a wait
                runs.append(t - pts[start][0])
            start = None
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
    e, e_src = window_energy_j(samples, pair, None if t0_s is None or t1_s is None else (t0_s, t1_s))
    temps = _vals(samples, "gpu_temp_c")
    tmax = max(temps) if temps else None
    span = active_span(samples, info.power_limit_enforced_w)
    inside = samples if span is None else [s for s in samples if span.t0_s <= s.t_s <= span.t1_s]
    dips = [d for key in ("util_gpu_pct", "power_instant_w") if (d := find_dips(inside, key)) is not None]
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
        active=span,
    )
