"""A telemetry window: what the GPUs did between two moments, summed up once for every caller.

:meth:`gpumatch.telemetry.sampler.Sampler.begin_window` / :meth:`~gpumatch.telemetry.sampler.Sampler.end_window`
return a :class:`Window` (ml-energy/zeus's ``begin_window`` / ``end_window`` -> ``Measurement`` model); a bench
case, a serving load level (:mod:`gpumatch.loadgen.energy`, from the server's published rows) and the monitor's
per-GPU summary all take their energy, idle power, mean and p95 power and clock-reason shares from here.

The rules (../shared/notes/benchmark-method.md sections 2-3):

- **Energy** (:func:`window_energy_j`): the window's mean power times its duration. The mean power comes from
  NVML's total-energy counter, ``(E_b - E_a) / (t_b - t_a)`` between the edge readings nearest the window's ends
  (``energy_source`` ``counter``: the driver integrates every power reading, so it is exact; read at the window's
  own edges, as the sampler does, the result is the counter difference itself), else, when a reading is missing
  or the counter went backwards (a driver reload), from the trapezoid integral of the sampled power (the 1-s
  average where reported, else the instant power) over the samples' span (``integrated``: a 10-Hz estimate).
  Without a window (a whole trace) the duration is the span of the readings used.
- **Idle power** (:func:`settled_idle_power`): the median 1-s-average power over idle samples (utilization 0)
  once the clocks have settled (the GpuIdle reason set, else the SM clock within 50 MHz of the lowest idle clock)
  and one more second has passed (the average lags ~1 s). Right after a load an H200 read 124 W at 1980 MHz
  against 86 W at 900 MHz once settled, and with a CUDA context held its clocks stayed at 1980 MHz (116 W) for
  40 s: then no idle power is reported (``power_w`` None), since a baseline must wait for the clocks to drop.
  Idle-subtracted energy is ``energy_j - idle_power_w x duration_s`` (:meth:`GpuWindow.net_energy_j`).
- **Power**: a sample's power is its instant power, else its 1-s average (:func:`sample_power_w`); the window's
  mean and p95 (:func:`gpumatch.stats.percentile`) are over those.
- **Clock-reason shares**: the fraction of samples (with a reported mask) having any bit of each group of
  :data:`gpumatch.telemetry.types.REASON_GROUPS` (:func:`reason_shares`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpumatch import stats
from gpumatch.telemetry.types import REASON_GPU_IDLE, REASON_GROUPS, EdgeCounters, Sample

MIN_WINDOW_SAMPLES = 3
"""Fewer samples than this in a window: too short for its power figures (0.3 s at 10 Hz)."""
SETTLE_MHZ = 50.0
"""Without clock-event reasons, clocks count as settled within this many MHz of the lowest idle clock."""
IDLE_LAG_S = 1.0
"""Seconds after the clocks settle before idle samples count (the 1-s average power lags the load)."""

EdgePair = tuple[EdgeCounters, EdgeCounters]


@dataclass(frozen=True)
class IdlePower:
    """Idle power after clocks settled (W; None if they never did), how long settling took from the first idle
    sample (s), the median SM clock of the settled (else of all idle) samples (MHz), and how many samples the
    power is the median of."""

    power_w: float | None
    settle_s: float
    sm_clock_mhz: float | None
    n_samples: int = 0


@dataclass(frozen=True)
class GpuWindow:
    """One GPU over a window (SI units; None = not reported). ``reason_shares``: group of
    :data:`~gpumatch.telemetry.types.REASON_GROUPS` -> fraction of samples, empty without reported masks."""

    gpu_index: int
    duration_s: float
    n_samples: int
    energy_j: float | None
    energy_source: str
    power_w_mean: float | None
    power_w_p95: float | None
    sm_clock_mhz_mean: float | None
    gpu_temp_c_max: float | None
    reason_shares: dict[str, float] = field(default_factory=dict)
    idle: IdlePower | None = None

    def net_energy_j(self, idle_power_w: float | None) -> float | None:
        """Idle-subtracted energy (J): ``energy_j - idle_power_w x duration_s``; None without either."""
        if self.energy_j is None or idle_power_w is None:
            return None
        return self.energy_j - idle_power_w * self.duration_s

    def summary(self) -> dict[str, float | int | None]:
        """The figures a bench case and a serving level store: samples, mean power (W), mean SM clock (MHz),
        peak temperature (°C) and each reason group's share (None without reported masks)."""
        return {"n_samples": self.n_samples, "power_w_mean": self.power_w_mean,
                "sm_clock_mhz_mean": self.sm_clock_mhz_mean, "gpu_temp_c_max": self.gpu_temp_c_max,
                **{name: self.reason_shares.get(name) for name in REASON_GROUPS}}


@dataclass(frozen=True)
class Window:
    """What the GPUs did over [t0_s, t1_s] (s on the sampler's clock): the samples and edge readings inside it and
    one :class:`GpuWindow` per GPU (module docstring for every rule)."""

    name: str
    t0_s: float
    t1_s: float
    samples: tuple[Sample, ...]
    edges: tuple[EdgeCounters, ...]
    gpus: tuple[GpuWindow, ...]

    @property
    def duration_s(self) -> float:
        return self.t1_s - self.t0_s

    @property
    def energy_j(self) -> dict[int, float | None]:
        """Energy per GPU index (J), as zeus's ``Measurement.gpu_energy``."""
        return {g.gpu_index: g.energy_j for g in self.gpus}

    def gpu(self, index: int) -> GpuWindow:
        """The window of GPU ``index`` (an empty one, no samples, when the window has none of it)."""
        for g in self.gpus:
            if g.gpu_index == index:
                return g
        return gpu_window(index, [], (), self.t0_s, self.t1_s)


def make_window(name: str, t0_s: float, t1_s: float, samples: Sequence[Sample],
                edges: Sequence[EdgeCounters]) -> Window:
    """The window [t0_s, t1_s] over ``samples`` (those outside it are dropped) and ``edges`` (per GPU, the
    readings nearest its ends are used)."""
    inside = tuple(s for s in samples if t0_s <= s.t_s <= t1_s)
    indices = sorted({s.gpu_index for s in inside} | {e.gpu_index for e in edges})
    gpus = tuple(gpu_window(i, [s for s in inside if s.gpu_index == i], [e for e in edges if e.gpu_index == i],
                            t0_s, t1_s) for i in indices)
    return Window(name, t0_s, t1_s, inside, tuple(edges), gpus)


def gpu_window(index: int, samples: Sequence[Sample], edges: Sequence[EdgeCounters], t0_s: float,
               t1_s: float) -> GpuWindow:
    """One GPU's figures over [t0_s, t1_s] from its own samples and edge readings."""
    watts = [w for s in samples if (w := sample_power_w(s)) is not None]
    temps = [float(s.gpu_temp_c) for s in samples if s.gpu_temp_c is not None]
    e, source = window_energy_j(samples, edge_pair(edges, t0_s, t1_s), (t0_s, t1_s))
    return GpuWindow(
        gpu_index=index, duration_s=t1_s - t0_s, n_samples=len(samples), energy_j=e, energy_source=source,
        power_w_mean=mean(watts), power_w_p95=stats.percentile(watts, 95) if watts else None,
        sm_clock_mhz_mean=mean([float(s.sm_clock_mhz) for s in samples if s.sm_clock_mhz is not None]),
        gpu_temp_c_max=max(temps) if temps else None, reason_shares=reason_shares(samples),
        idle=settled_idle_power(samples))


def mean(xs: Sequence[float]) -> float | None:
    """Arithmetic mean; None without values."""
    return sum(xs) / len(xs) if xs else None


def sample_power_w(s: Sample) -> float | None:
    """A sample's board power (W): the instant reading, else the 1-s average."""
    return s.power_instant_w if s.power_instant_w is not None else s.power_avg_w


def reason_shares(samples: Sequence[Sample], groups: Mapping[str, int] = REASON_GROUPS) -> dict[str, float]:
    """Fraction of samples whose clock-event-reason mask has any bit of each group (samples without a mask are
    skipped; empty when none has one)."""
    masks = [s.clock_event_reasons for s in samples if s.clock_event_reasons is not None]
    if not masks:
        return {}
    return {name: sum(1 for m in masks if m & bits) / len(masks) for name, bits in groups.items()}


def edge_pair(edges: Sequence[EdgeCounters], t0_s: float, t1_s: float) -> EdgePair | None:
    """The edge readings nearest to the window's start and end (None if fewer than two, or the same one)."""
    if len(edges) < 2:
        return None
    a = min(edges, key=lambda e: abs(e.t_s - t0_s))
    b = min(edges, key=lambda e: abs(e.t_s - t1_s))
    return (a, b) if b.t_s > a.t_s else None


def window_energy_j(samples: Sequence[Sample], pair: EdgePair | None,
                    window_s: tuple[float, float] | None = None) -> tuple[float | None, str]:
    """Energy over the window (J) and its source, ``counter``, ``integrated`` or ``none`` (module docstring):
    mean power (counter, else trapezoid of the sampled power) x the window's duration; without ``window_s``,
    x the span of the readings used."""
    if pair is not None and pair[0].energy_mj is not None and pair[1].energy_mj is not None:
        (a, b), d_mj = pair, pair[1].energy_mj - pair[0].energy_mj
        if d_mj >= 0:
            return _scaled(d_mj / 1000.0, b.t_s - a.t_s, window_s), "counter"
    pts = [(s.t_s, p) for s in samples
           if (p := s.power_avg_w if s.power_avg_w is not None else s.power_instant_w) is not None]
    if len(pts) < 2:
        return None, "none"
    e = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(pts))
    return _scaled(e, pts[-1][0] - pts[0][0], window_s), "integrated"


def _scaled(energy_j: float, span_s: float, window_s: tuple[float, float] | None) -> float:
    """``energy_j`` over ``span_s`` carried to the window's duration at the same mean power."""
    if window_s is None or span_s <= 0:
        return energy_j
    return energy_j * (window_s[1] - window_s[0]) / span_s


def _settled(s: Sample, floor_mhz: float, settle_mhz: float) -> bool:
    """Clocks are down: the GpuIdle reason is set (when reasons are reported), else the SM clock sits within
    ``settle_mhz`` of the lowest idle clock in the window."""
    if s.clock_event_reasons is not None:
        return bool(s.clock_event_reasons & REASON_GPU_IDLE)
    return s.sm_clock_mhz is not None and s.sm_clock_mhz <= floor_mhz + settle_mhz


def settled_idle_power(samples: Sequence[Sample], settle_mhz: float = SETTLE_MHZ,
                       lag_s: float = IDLE_LAG_S) -> IdlePower | None:
    """Idle power once clocks have settled (module docstring; None when nothing in the window is idle).

    ``power_w``: median 1-s-average power over idle samples (util 0) whose clocks are down, from ``lag_s`` after
    the first such sample; None when the clocks never settled, e.g. while a process keeps a CUDA context open
    (seen on an H200: 1980 MHz and 116 W for 40 s after a load, reasons 0x0, against 77 W before any context
    existed).
    """
    idle = [s for s in samples if s.util_gpu_pct == 0]
    if not idle:
        return None
    clocks = [float(s.sm_clock_mhz) for s in idle if s.sm_clock_mhz is not None]
    floor = min(clocks) if clocks else 0.0
    settled = [s for s in idle if _settled(s, floor, settle_mhz)]
    if not settled:
        return IdlePower(None, 0.0, stats.percentile(clocks, 50) if clocks else None)
    t_settled = settled[0].t_s
    watts = [float(s.power_avg_w) for s in settled if s.t_s >= t_settled + lag_s and s.power_avg_w is not None]
    settled_clocks = [float(s.sm_clock_mhz) for s in settled if s.sm_clock_mhz is not None]
    return IdlePower(stats.percentile(watts, 50) if watts else None, t_settled - idle[0].t_s,
                     stats.percentile(settled_clocks, 50) if settled_clocks else None, len(watts))
