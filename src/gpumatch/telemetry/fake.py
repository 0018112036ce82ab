"""A fake backend that replays a recorded trace, so the sampler, the analysis, the preflight checks
and the CLI can be tested (and demonstrated) without a GPU.

Replay rules (documented, deterministic):

- ``sample(t)`` returns the last recorded sample at or before ``t`` seconds after the trace start
  (sample-and-hold), stamped ``t``; GPM fields are left to ``gpm()``, as on the real device.
- ``gpm()`` returns the mean of the recorded GPM values since the previous call (None if none).
- ``edge_counters(t)`` interpolates linearly between the first and last recorded edge readings
  (cumulative counters grow with time; a trace without edges reads all-None).
- ``poll_xid(t)`` returns the recorded Xid events up to ``t``.

:class:`VirtualClock` lets the sampler run over a replay as fast as the CPU allows. A replay holds at most
:data:`MAX_REPLAY_SAMPLES` samples (:meth:`FakeBackend.check_replay`): a trace whose timestamps span years,
or a tiny ``--interval``, would otherwise build billions.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path

from gpumatch.errors import InputError
from gpumatch.telemetry.trace import Trace, read_trace
from gpumatch.telemetry.types import DeviceInfo, EdgeCounters, GpmMetrics, GpuProcess, Sample, SystemInfo, XidEvent

#: Most samples a replay builds (all GPUs together): as many as a trace file may hold (trace_rows.MAX_TRACE_ROWS).
MAX_REPLAY_SAMPLES = 2_000_000


class VirtualClock:
    """A clock that only moves when someone sleeps on it (seconds)."""

    def __init__(self, start_s: float = 0.0) -> None:
        self.t_s = start_s

    def now(self) -> float:
        return self.t_s

    def sleep(self, dt_s: float) -> None:
        self.t_s += max(dt_s, 0.0)


class FakeDevice:
    """One GPU of a recorded trace (implements :class:`gpumatch.telemetry.device.Device`)."""

    def __init__(self, trace: Trace, index: int, t0_s: float, own: Trace | None = None) -> None:
        part = own if own is not None else trace.for_gpu(index)
        self._index = index
        self._t0 = t0_s
        self._samples = sorted(part.samples, key=lambda s: s.t_s)
        self._times = [s.t_s - t0_s for s in self._samples]
        self._info = part.devices[0] if part.devices else DeviceInfo(index=index, name="replay")
        self._edges = sorted(part.edges, key=lambda e: e.t_s)
        self._last_t = 0.0
        self._gpm_from = 0.0
        self._processes: list[GpuProcess] = []

    @property
    def index(self) -> int:
        return self._index

    def info(self) -> DeviceInfo:
        return self._info

    def sample(self, t_s: float) -> Sample:
        self._last_t = t_s
        i = bisect.bisect_right(self._times, t_s + 1e-9) - 1
        if i < 0:
            return Sample(t_s=t_s, gpu_index=self._index)
        r = self._samples[i]  # fields listed (not dataclasses.replace): a replay makes millions of these
        return Sample(t_s=t_s, gpu_index=r.gpu_index, power_instant_w=r.power_instant_w, power_avg_w=r.power_avg_w,
                      sm_clock_mhz=r.sm_clock_mhz, mem_clock_mhz=r.mem_clock_mhz,
                      clock_event_reasons=r.clock_event_reasons, gpu_temp_c=r.gpu_temp_c, mem_temp_c=r.mem_temp_c,
                      memory_used_bytes=r.memory_used_bytes, util_gpu_pct=r.util_gpu_pct, util_mem_pct=r.util_mem_pct)

    def gpm(self) -> GpmMetrics | None:
        lo = bisect.bisect_right(self._times, self._gpm_from + 1e-9)
        hi = bisect.bisect_right(self._times, self._last_t + 1e-9)
        window = self._samples[lo:hi]
        interval = self._last_t - self._gpm_from
        self._gpm_from = self._last_t
        vals = [_mean([getattr(s, k) for s in window]) for k in ("gpm_sm_active", "gpm_tensor_active",
                                                                  "gpm_dram_bw_util")]
        if all(v is None for v in vals):
            return None
        return GpmMetrics(vals[0], vals[1], vals[2], interval_s=interval)

    def edge_counters(self, t_s: float) -> EdgeCounters:
        if not self._edges:
            return EdgeCounters(t_s=t_s, gpu_index=self._index)
        a, b = self._edges[0], self._edges[-1]
        ta, tb = a.t_s - self._t0, b.t_s - self._t0
        f = 0.0 if tb <= ta else min(max((t_s - ta) / (tb - ta), 0.0), 1.0)
        near = a if f < 0.5 else b
        return EdgeCounters(
            t_s=t_s,
            gpu_index=self._index,
            energy_mj=_lerp(a.energy_mj, b.energy_mj, f),
            violation_ns={k: v for k in a.violation_ns
                          if (v := _lerp(a.violation_ns.get(k), b.violation_ns.get(k), f)) is not None},
            ecc_corrected=_lerp(a.ecc_corrected, b.ecc_corrected, f),
            ecc_uncorrected=_lerp(a.ecc_uncorrected, b.ecc_uncorrected, f),
            pcie_replays=_lerp(a.pcie_replays, b.pcie_replays, f),
            remapped_rows=near.remapped_rows,
            pcie_gen=near.pcie_gen,
            pcie_width=near.pcie_width,
        )

    def processes(self) -> list[GpuProcess]:
        return list(self._processes)

    def pcie_link(self) -> tuple[int | None, int | None]:
        """The link at the recorded edge nearest the replay time (else the recorded device info)."""
        e = self.edge_counters(self._last_t)
        if e.pcie_gen is not None or e.pcie_width is not None:
            return (e.pcie_gen, e.pcie_width)
        return (self._info.pcie_gen, self._info.pcie_width)

    @property
    def duration_s(self) -> float:
        return self._times[-1] if self._times else 0.0


class FakeBackend:
    """The GPUs of a recorded trace (implements :class:`gpumatch.telemetry.device.Backend`)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        times = [s.t_s for s in trace.samples]
        self.t0_s = min(times) if times else 0.0
        parts = _split_by_gpu(trace)
        self._devices = [FakeDevice(trace, i, self.t0_s, parts[i]) for i in trace.gpu_indices()]
        self._xids = sorted(trace.xid_events, key=lambda x: x.t_s)
        self._xid_pos = 0

    @classmethod
    def from_file(cls, path: Path) -> FakeBackend:
        return cls(read_trace(path))

    @property
    def duration_s(self) -> float:
        return max((d.duration_s for d in self._devices), default=0.0)

    def replay_samples(self, interval_s: float) -> float:
        """Samples a replay at ``interval_s`` builds: one per GPU per tick over :attr:`duration_s`."""
        return (self.duration_s / interval_s + 1) * len(self._devices)

    def check_replay(self, interval_s: float, label: str = "the trace") -> None:
        """Refuse a replay that would build more than :data:`MAX_REPLAY_SAMPLES` samples (timestamps
        spanning years, or a tiny interval), before any is built; the message names the sizes and the fix."""
        if not interval_s > 0:  # not a usable interval: the sampler's own range check says so
            return
        n = self.replay_samples(interval_s)
        if n > MAX_REPLAY_SAMPLES:
            least = self.duration_s * len(self._devices) / MAX_REPLAY_SAMPLES
            raise InputError(
                f"replaying {label} ({self.duration_s:.6g} s, {len(self._devices)} GPU(s)) every {interval_s:g} s "
                f"would build {n:.3g} samples, more than the {MAX_REPLAY_SAMPLES:,} a replay may hold",
                f"replay with --interval {least:.3g} or longer, or check the t_s column",
            )

    def system(self) -> SystemInfo:
        return self.trace.system

    def devices(self) -> Sequence[FakeDevice]:
        return self._devices

    def poll_xid(self, t_s: float) -> list[XidEvent]:
        out = []
        while self._xid_pos < len(self._xids) and self._xids[self._xid_pos].t_s - self.t0_s <= t_s:
            x = self._xids[self._xid_pos]
            out.append(XidEvent(t_s=x.t_s - self.t0_s, gpu_index=x.gpu_index, xid=x.xid))
            self._xid_pos += 1
        return out

    def close(self) -> None:
        return None


def _split_by_gpu(trace: Trace) -> dict[int, Trace]:
    """``trace.for_gpu(i)`` for every GPU in one pass over the samples (for_gpu per GPU was GPUs x samples)."""
    samples: dict[int, list[Sample]] = {i: [] for i in trace.gpu_indices()}
    for s in trace.samples:
        samples[s.gpu_index].append(s)
    return {
        i: Trace(samples=tuple(own), devices=tuple(d for d in trace.devices if d.index == i), system=trace.system,
                 edges=tuple(e for e in trace.edges if e.gpu_index == i),
                 xid_events=tuple(x for x in trace.xid_events if x.gpu_index in (i, -1)),
                 interval_s=trace.interval_s, stats=trace.stats, meta=trace.meta)
        for i, own in samples.items()
    }


def _mean(vals: Sequence[float | None]) -> float | None:
    xs = [v for v in vals if v is not None]
    return sum(xs) / len(xs) if xs else None


def _lerp(a: int | None, b: int | None, f: float) -> int | None:
    if a is None or b is None:
        return a if b is None else (b if a is None else None)
    return round(a + (b - a) * f)
