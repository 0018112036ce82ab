"""The sampler: a background thread that reads cheap fields at 10-20 Hz, GPM at about 1 Hz, Xid
events about once a second, and the expensive cumulative counters only at window edges.

Why these rates (../shared/notes/benchmark-method.md sections 2-3): clock-event reasons are
instantaneous, so they need frequent samples; GPM metrics are defined over a pair of samples, and a
1-s pair matches NVML's own utilization period; the energy counter costs ~4 ms a read and ticks every
~100 ms, so it is read only at window edges (``start``, ``mark``, ``stop``) and windows should be
>= 1 s. The budget is < 1% of a benchmark's throughput (benchmarks/bench_sampler_overhead.py).

The clock and the sleep are injectable, so a replay (:class:`gpumatch.telemetry.fake.VirtualClock`)
runs the same code path as a real recording, as fast as the CPU allows.

Windows (ml-energy/zeus's model): ``begin_window(name)`` reads the edge counters and notes the time,
``end_window(name)`` reads them again and returns a :class:`gpumatch.telemetry.window.Window` (energy,
idle power, mean and p95 power, clock-reason shares per GPU); ``window(name, t0_s, t1_s)`` makes one
afterwards from what was sampled. A long-lived sampler (a server) passes ``keep_s`` (only the last that
many seconds are kept) and ``edge_interval_s`` (the edge counters read every that many seconds, so a
client can window any stretch of the kept history).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gpumatch.errors import InputError
from gpumatch.telemetry.device import Backend
from gpumatch.telemetry.trace import SamplerStats, Trace
from gpumatch.telemetry.types import EdgeCounters, Sample, XidEvent
from gpumatch.telemetry.window import Window, make_window

MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 60.0


class Sampler:
    """Record a :class:`Trace` from every device of ``backend``.

    Use as ``with Sampler(backend) as s: ...; trace = s.trace`` or ``start()`` / ``stop()``; for a
    replay, ``run_for(duration_s)`` runs the loop in the calling thread on the injected clock.
    ``interval_s``: cheap-field period (default 0.1 s = 10 Hz); ``gpm_interval_s``: GPM pair period;
    ``gpus``: the indices sampled (default all of ``backend``); ``edge_interval_s``: also read the edge
    counters every that many seconds (default only at window edges); ``keep_s``: keep only the samples and
    edge readings of the last that many seconds (default all).
    """

    def __init__(
        self,
        backend: Backend,
        interval_s: float = 0.1,
        gpm_interval_s: float = 1.0,
        xid_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
        meta: dict[str, Any] | None = None,
        gpus: Sequence[int] | None = None,
        edge_interval_s: float | None = None,
        keep_s: float | None = None,
    ) -> None:
        if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
            raise InputError(f"sampling interval {interval_s} s is out of range",
                             f"use {MIN_INTERVAL_S} to {MAX_INTERVAL_S} s (0.05-0.1 s is 10-20 Hz)")
        self._backend = backend
        self._devices = [d for d in backend.devices() if gpus is None or d.index in gpus]
        self.interval_s = interval_s
        self.gpm_interval_s = max(gpm_interval_s, interval_s)
        self.xid_interval_s = xid_interval_s
        self._clock = clock
        self._sleep = sleep
        self._meta = dict(meta or {})
        self.edge_interval_s = edge_interval_s
        self._keep_samples = _kept(keep_s, interval_s, len(self._devices))
        self._keep_edges = _kept(keep_s, edge_interval_s, len(self._devices))
        self._dropped = 0
        self._open_windows: dict[str, float] = {}
        self.started_unix_s = 0.0
        self._samples: list[Sample] = []
        self._edges: list[EdgeCounters] = []
        self._xids: list[XidEvent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._ticks = self._overruns = self._gpm_reads = 0
        self._cost_sum = self._cost_max = 0.0
        self.trace: Trace | None = None

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self) -> Sampler:
        """Read the opening edge counters, prime GPM, and start the background thread."""
        self._open()
        self._thread = threading.Thread(target=self._loop, name="gpumatch-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Trace:
        """Stop the thread, read the closing edge counters, and return the trace."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._close()

    def run_for(self, duration_s: float) -> Trace:
        """Run the loop in this thread until ``duration_s`` on the injected clock (replays, tests)."""
        self._open()
        self._loop(until_s=duration_s)
        return self._close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def mark(self, label: str) -> float:
        """Read the edge counters now (a window edge; costs ~4 ms per GPU for the energy counter); the time (s)."""
        return self._read_edges(label)

    # --- windows ------------------------------------------------------------------------------
    def begin_window(self, name: str) -> float:
        """Open the window ``name``: read the edge counters (label ``NAME:start``); its start (s on this clock)."""
        if name in self._open_windows:
            raise InputError(f"telemetry window {name!r} is already open", "end it before beginning it again")
        self._open_windows[name] = t0 = self._read_edges(f"{name}:start")
        return t0

    def end_window(self, name: str) -> Window:
        """Close the window ``name``: read the edge counters (label ``NAME:end``) and return what the GPUs did
        between its edges (:class:`~gpumatch.telemetry.window.Window`)."""
        t0 = self._open_windows.pop(name, None)
        if t0 is None:
            raise InputError(f"telemetry window {name!r} was not begun", "call begin_window(name) first")
        t1 = self._read_edges(f"{name}:end")
        with self._lock:
            edges = [e for e in self._edges if e.label in (f"{name}:start", f"{name}:end") and t0 <= e.t_s <= t1]
        return make_window(name, t0, t1, self.samples_between(t0, t1), edges)

    def window(self, name: str, t0_s: float, t1_s: float) -> Window:
        """A window over [t0_s, t1_s] (s on this clock) made from what was sampled, with the edge readings
        nearest its ends (a stretch whose edges were not read at the time: a step's own power window)."""
        with self._lock:
            edges = list(self._edges)
        return make_window(name, t0_s, t1_s, self.samples_between(t0_s, t1_s), edges)

    def edges_since(self, t_s: float) -> list[EdgeCounters]:
        """The edge readings kept from ``t_s`` (s on this clock) on."""
        with self._lock:
            return [e for e in self._edges if e.t_s >= t_s]

    def samples_between(self, t0_s: float, t1_s: float) -> list[Sample]:
        """Samples with ``t0_s <= t_s <= t1_s`` (s on this clock; they are appended in time order: a bisection)."""
        with self._lock:
            lo = bisect.bisect_left(self._samples, t0_s, key=lambda s: s.t_s)
            hi = bisect.bisect_right(self._samples, t1_s, key=lambda s: s.t_s)
            return self._samples[lo:hi]

    def now_s(self) -> float:
        """Seconds since the sampler started, on its clock."""
        return self._clock() - self._t0

    def snapshot(self) -> list[Sample]:
        """A copy of the samples so far (for live displays)."""
        with self._lock:
            return list(self._samples)

    def samples_since(self, start: int) -> list[Sample]:
        """Samples from position ``start`` on (counted from the first sample ever taken, so positions hold when
        ``keep_s`` drops old ones; for incremental saving while the run goes on)."""
        with self._lock:
            return self._samples[max(start - self._dropped, 0):]

    # --- internals ----------------------------------------------------------------------------
    def _open(self) -> None:
        self._t0 = self._clock()
        self.started_unix_s = time.time()
        for d in self._devices:
            d.gpm()  # the first GPM call only takes the opening sample of the pair
        self._read_edges("start")

    def snapshot_trace(self) -> Trace:
        """The trace so far, without stopping (the edge counters read by ``start`` and ``mark`` so far): a
        window's summary and verdict while the run goes on."""
        return self._trace()

    def _close(self) -> Trace:
        self._read_edges("end")
        self._xids.extend(self._backend.poll_xid(self.now_s()))
        self.trace = self._trace()
        return self.trace

    def _trace(self) -> Trace:
        n = max(self._ticks, 1)
        with self._lock:
            samples = tuple(self._samples)
            edges = tuple(self._edges)
        stats = SamplerStats(self._ticks, self._overruns, self._cost_sum / n, self._cost_max, self._gpm_reads,
                             len(edges))
        return Trace(
            samples=samples,
            devices=tuple(d.info() for d in self._devices),
            system=self._backend.system(),
            edges=edges,
            xid_events=tuple(self._xids),
            interval_s=self.interval_s,
            stats=stats,
            meta=self._meta,
        )

    def _read_edges(self, label: str) -> float:
        t = self.now_s()
        rows = [replace(d.edge_counters(t), label=label) for d in self._devices]
        with self._lock:
            self._edges.extend(rows)
            if self._keep_edges is not None and len(self._edges) > self._keep_edges * 1.1:
                del self._edges[:len(self._edges) - self._keep_edges]
        return t

    def _loop(self, until_s: float | None = None) -> None:
        next_t = self.now_s()
        last_gpm = last_xid = last_edge = next_t
        while not self._stop.is_set():
            t = self.now_s()
            wall0 = time.perf_counter()
            rows = [d.sample(t) for d in self._devices]
            if t - last_gpm >= self.gpm_interval_s - 1e-9:
                rows = self._add_gpm(rows)
                last_gpm = t
            if t - last_xid >= self.xid_interval_s:
                self._xids.extend(self._backend.poll_xid(t))
                last_xid = t
            if self.edge_interval_s is not None and t - last_edge >= self.edge_interval_s - 1e-9:
                self._read_edges("tick")
                last_edge = t
            self._keep(rows)
            self._account(time.perf_counter() - wall0)
            next_t += self.interval_s
            if until_s is not None and next_t > until_s + 1e-9:
                break
            wait = next_t - self.now_s()
            if wait < 0:
                self._overruns += 1
                next_t = self.now_s()
                wait = 0.0
            if self._sleep is not None:
                self._sleep(wait)
            elif self._stop.wait(wait):
                break

    def _add_gpm(self, rows: list[Sample]) -> list[Sample]:
        out = []
        for d, row in zip(self._devices, rows, strict=True):
            m = d.gpm()
            self._gpm_reads += 1
            if m is not None:
                row = replace(row, gpm_sm_active=m.sm_active_pct, gpm_tensor_active=m.tensor_active_pct,
                              gpm_dram_bw_util=m.dram_bw_util_pct)
            out.append(row)
        return out

    def _keep(self, rows: list[Sample]) -> None:
        """Append a tick's rows; past ``keep_s``, drop the oldest (in blocks of a tenth, not every tick)."""
        with self._lock:
            self._samples.extend(rows)
            if self._keep_samples is not None and len(self._samples) > self._keep_samples * 1.1:
                drop = len(self._samples) - self._keep_samples
                del self._samples[:drop]
                self._dropped += drop

    def _account(self, cost_s: float) -> None:
        self._ticks += 1
        self._cost_sum += cost_s
        self._cost_max = max(self._cost_max, cost_s)


def _kept(keep_s: float | None, every_s: float | None, n_gpus: int) -> int | None:
    """How many rows ``keep_s`` seconds hold when each of ``n_gpus`` gives one every ``every_s`` (None: all)."""
    if keep_s is None or not every_s:
        return None
    return int(keep_s / every_s * max(n_gpus, 1)) + 1
