"""The sampler: a background thread that reads cheap fields at 10-20 Hz, GPM at about 1 Hz, Xid
events about once a second, and the expensive cumulative counters only at window edges.

Why these rates (../shared/notes/benchmark-method.md sections 2-3): clock-event reasons are
instantaneous, so they need frequent samples; GPM metrics are defined over a pair of samples, and a
1-s pair matches NVML's own utilization period; the energy counter costs ~4 ms a read and ticks every
~100 ms, so it is read only at window edges (``start``, ``mark``, ``stop``) and windows should be
>= 1 s. The budget is < 1% of a benchmark's throughput (benchmarks/bench_sampler_overhead.py).

The clock and the sleep are injectable, so a replay (:class:`gpumatch.telemetry.fake.VirtualClock`)
runs the same code path as a real recording, as fast as the CPU allows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpumatch.errors import InputError
from gpumatch.telemetry.device import Backend
from gpumatch.telemetry.trace import SamplerStats, Trace
from gpumatch.telemetry.types import EdgeCounters, Sample, XidEvent

MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 60.0


class Sampler:
    """Record a :class:`Trace` from every device of ``backend``.

    Use as ``with Sampler(backend) as s: ...; trace = s.trace`` or ``start()`` / ``stop()``; for a
    replay, ``run_for(duration_s)`` runs the loop in the calling thread on the injected clock.
    ``interval_s``: cheap-field period (default 0.1 s = 10 Hz); ``gpm_interval_s``: GPM pair period.
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
    ) -> None:
        if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
            raise InputError(f"sampling interval {interval_s} s is out of range",
                             f"use {MIN_INTERVAL_S} to {MAX_INTERVAL_S} s (0.05-0.1 s is 10-20 Hz)")
        self._backend = backend
        self._devices = list(backend.devices())
        self.interval_s = interval_s
        self.gpm_interval_s = max(gpm_interval_s, interval_s)
        self.xid_interval_s = xid_interval_s
        self._clock = clock
        self._sleep = sleep
        self._meta = dict(meta or {})
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

    def mark(self, label: str) -> None:
        """Read the edge counters now (a window edge; costs ~4 ms per GPU for the energy counter)."""
        self._read_edges(label)

    def now_s(self) -> float:
        """Seconds since the sampler started, on its clock."""
        return self._clock() - self._t0

    def snapshot(self) -> list[Sample]:
        """A copy of the samples so far (for live displays)."""
        with self._lock:
            return list(self._samples)

    def samples_since(self, start: int) -> list[Sample]:
        """Samples from position ``start`` on (for incremental saving while the run goes on)."""
        with self._lock:
            return self._samples[start:]

    # --- internals ----------------------------------------------------------------------------
    def _open(self) -> None:
        self._t0 = self._clock()
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
        stats = SamplerStats(self._ticks, self._overruns, self._cost_sum / n, self._cost_max, self._gpm_reads,
                             len(self._edges))
        with self._lock:
            samples = tuple(self._samples)
        return Trace(
            samples=samples,
            devices=tuple(d.info() for d in self._devices),
            system=self._backend.system(),
            edges=tuple(self._edges),
            xid_events=tuple(self._xids),
            interval_s=self.interval_s,
            stats=stats,
            meta=self._meta,
        )

    def _read_edges(self, label: str) -> None:
        t = self.now_s()
        for d in self._devices:
            self._edges.append(replace(d.edge_counters(t), label=label))

    def _loop(self, until_s: float | None = None) -> None:
        next_t = self.now_s()
        last_gpm = last_xid = next_t
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
            with self._lock:
                self._samples.extend(rows)
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

    def _account(self, cost_s: float) -> None:
        self._ticks += 1
        self._cost_sum += cost_s
        self._cost_max = max(self._cost_max, cost_s)
