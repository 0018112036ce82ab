"""One load level: closed loop (a fixed number of clients) or open loop (arrivals at a rate), over aiohttp.

- **Closed loop**, concurrency ``C``: ``C`` clients each send a request, wait for its stream to end and send the
  next (``vllm bench serve --max-concurrency C --request-rate inf``). A request is scheduled the moment its client
  became free, so ``client_lag`` is the client's own delay between two requests.
- **Open loop**, rate ``λ``: request ``i`` is scheduled at its arrival time (Poisson, gamma with burstiness ``B``
  or constant, :func:`gpumatch.loadgen.workload.arrival_times`) whatever happened to the others; if the client
  cannot send it on time the delay is in its latency (measured from the scheduled time) and in ``client_lag``.

A level is **count-limited** (its list of requests) or **time-limited** (``duration_s``: requests are sent until
that many seconds after the level's start, from an endless supply). At the end of a time-limited level nothing new
is sent and the requests in flight are let finish, as AIPerf's ``--benchmark-duration`` does, for at most
``grace_s`` more seconds (AIPerf's grace period, 30 s by default there too); a request still running then is cut off
and recorded ``incomplete`` (neither completed nor failed; GuideLLM's ``--max-seconds`` cancels every request in
flight at the deadline and counts it incomplete, which drops the longest requests from the statistics).

**Warm-up**: the level's warm-up requests, if any, run first at the same concurrency or rate, over the same
connection pool; every one of them ends before the measurement starts (its time 0), and their records are kept
apart (:attr:`LevelRun.warmup`), never in the level's figures (vLLM ``bench serve --num-warmups``).

When a request finds nothing listening (``connection_refused``) the server is gone: no new request is sent
(the rest are counted as ``not_sent``), the ones in flight end with their errors, and the level reports
``aborted``. Ctrl-C cancels the level; the records finished so far stay in the list handed in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any

from gpumatch.errors import InputError
from gpumatch.loadgen.client import Target, send
from gpumatch.loadgen.metrics import RequestRecord
from gpumatch.loadgen.workload import RequestSpec, arrival_times, check_arrival

MAX_CONCURRENCY = 10_000
OnRecord = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class Level:
    """A load level: ``mode`` ``concurrency`` (closed loop, ``value`` clients) or ``rate`` (open loop, ``value``
    requests/s, ``arrival`` poisson or constant, gamma-shaped by ``burstiness``); ``phase`` ``ladder`` or
    ``search``; ``duration_s``: time-limited (None: as many requests as it is given)."""

    index: int
    mode: str
    value: float
    arrival: str = "poisson"
    phase: str = "ladder"
    burstiness: float = 1.0
    duration_s: float | None = None

    @property
    def label(self) -> str:
        if self.mode == "concurrency":
            return f"c={int(self.value)}"
        if self.arrival == "poisson" and self.burstiness != 1.0:
            return f"{self.value:g}/s gamma B={self.burstiness:g}"
        return f"{self.value:g}/s {self.arrival}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"level": self.index, "mode": self.mode, "phase": self.phase, "label": self.label}
        if self.mode == "concurrency":
            d["max_concurrency"] = int(self.value)
        else:
            d.update({"request_rate": self.value, "arrival": self.arrival,
                      "burstiness": self.burstiness if self.arrival == "poisson" else None})
        if self.duration_s is not None:
            d["duration_limit_s"] = self.duration_s
        return d


@dataclass
class LevelRun:
    """What a level did: every request's record, the warm-up's records, the requests never sent after an abort,
    the wall time."""

    level: Level
    records: list[RequestRecord] = field(default_factory=list)
    not_sent: int = 0
    aborted: str = ""
    wall_s: float = 0.0
    t0: float = 0.0
    """``time.perf_counter()`` at the level's start (its time 0, after the warm-up)."""
    warmup: list[RequestRecord] = field(default_factory=list)
    """The warm-up's records (times from the warm-up's own start); never in the level's figures."""
    warmup_s: float = 0.0


@dataclass(frozen=True)
class Drive:
    """How one batch of requests is sent: the seed of the arrivals, the connection cap, the time limit."""

    seed: int
    max_in_flight: int = 0
    duration_s: float | None = None
    grace_s: float = 30.0


def check_level(level: Level) -> None:
    if level.mode == "concurrency" and not 1 <= level.value <= MAX_CONCURRENCY:
        raise InputError(f"concurrency must be 1 to {MAX_CONCURRENCY}, got {level.value:g}")
    if level.mode == "rate":
        check_arrival(level.value, level.arrival, level.burstiness)
    if level.duration_s is not None and not level.duration_s > 0:
        raise InputError(f"--duration must be positive, got {level.duration_s:g}")


def run_level(target: Target, level: Level, specs: Iterable[RequestSpec], seed: int, max_in_flight: int,
              on_record: OnRecord | None = None, warmup: Sequence[RequestSpec] = (), grace_s: float = 30.0,
              on_warmup: OnRecord | None = None) -> LevelRun:
    """Run one level to its end (module docstring); blocking (its own event loop). ``specs`` may be endless
    only for a time-limited level."""
    check_level(level)
    if level.duration_s is None and not isinstance(specs, Sized):
        raise InputError("a level without --duration needs a finite list of requests")
    out = LevelRun(level)
    t_start = time.perf_counter()
    drive = Drive(seed, max_in_flight, level.duration_s, grace_s)
    try:
        asyncio.run(_level(target, level, specs, drive, warmup, out, on_record, on_warmup))
    finally:
        out.wall_s = time.perf_counter() - t_start
    return out


async def _level(target: Target, level: Level, specs: Iterable[RequestSpec], drive: Drive,
                 warmup: Sequence[RequestSpec], out: LevelRun, on_record: OnRecord | None,
                 on_warmup: OnRecord | None) -> None:
    import aiohttp

    limit = int(level.value) if level.mode == "concurrency" else drive.max_in_flight
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        if warmup:
            t_w = time.perf_counter()
            sink = LevelRun(level)
            await _batch(session, target, level, warmup, Drive(drive.seed + 7919, drive.max_in_flight), t_w, sink,
                         on_warmup)
            out.warmup, out.warmup_s, out.aborted = sink.records, time.perf_counter() - t_w, sink.aborted
        if out.aborted:
            out.not_sent = len(specs) if isinstance(specs, Sized) else 0
            return
        out.t0 = time.perf_counter()
        await _batch(session, target, level, specs, drive, out.t0, out, on_record)
        if out.aborted and isinstance(specs, Sized):
            out.not_sent = len(specs) - len(out.records)


async def _batch(session: Any, target: Target, level: Level, specs: Iterable[RequestSpec], drive: Drive,
                 t0: float, out: LevelRun, on_record: OnRecord | None) -> None:
    hard_stop = None if drive.duration_s is None else drive.duration_s + drive.grace_s
    if level.mode == "concurrency":
        await _closed(session, target, int(level.value), specs, t0, drive.duration_s, hard_stop, out, on_record)
    else:
        when = arrival_times(level.value, level.arrival, drive.seed, level.burstiness)
        await _open(session, target, zip(specs, when, strict=False), t0, drive.duration_s, hard_stop, out, on_record)


def _keep(out: LevelRun, rec: RequestRecord, on_record: OnRecord | None) -> None:
    out.records.append(rec)
    if rec.error_class == "connection_refused" and not out.aborted:
        out.aborted = f"connection refused: {rec.message}"
    if on_record is not None:
        on_record(rec)


async def _closed(session: Any, target: Target, clients: int, specs: Iterable[RequestSpec], t0: float,
                  deadline: float | None, hard_stop: float | None, out: LevelRun,
                  on_record: OnRecord | None) -> None:
    queue = iter(specs)
    if isinstance(specs, Sized):
        clients = min(clients, len(specs))

    async def client() -> None:
        for spec in queue:
            now = time.perf_counter() - t0
            if out.aborted or (deadline is not None and now >= deadline):
                return
            _keep(out, await send(session, target, spec, now, t0, hard_stop), on_record)

    await asyncio.gather(*(client() for _ in range(clients)))


async def _open(session: Any, target: Target, plan: Iterable[tuple[RequestSpec, float]], t0: float,
                deadline: float | None, hard_stop: float | None, out: LevelRun,
                on_record: OnRecord | None) -> None:
    tasks: list[asyncio.Task[None]] = []

    async def one(spec: RequestSpec, scheduled: float) -> None:
        _keep(out, await send(session, target, spec, scheduled, t0, hard_stop), on_record)

    for spec, at in plan:
        if out.aborted or (deadline is not None and at >= deadline):
            break
        delay = at - (time.perf_counter() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(spec, at)))
    await asyncio.gather(*tasks)
