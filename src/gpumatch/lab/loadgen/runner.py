"""One load level: closed loop (a fixed number of clients) or open loop (arrivals at a rate), over aiohttp.

- **Closed loop**, concurrency ``C``: ``C`` clients each send a request, wait for its stream to end and send the
  next (``vllm bench serve --max-concurrency C --request-rate inf``). A request is scheduled the moment its client
  became free, so ``client_lag`` is the client's own delay between two requests.
- **Open loop**, rate ``λ``: request ``i`` is scheduled at its arrival time (Poisson or constant,
  :func:`gpumatch.lab.loadgen.workload.arrivals`) whatever happened to the others; if the client cannot send it
  on time the delay is in its latency (measured from the scheduled time) and in ``client_lag``.

When a request finds nothing listening (``connection_refused``) the server is gone: no new request is sent
(the rest are counted as ``not_sent``), the ones in flight end with their errors, and the level reports
``aborted``. Ctrl-C cancels the level; the records finished so far stay in the list handed in.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpumatch.errors import InputError
from gpumatch.lab.loadgen.client import Target, send
from gpumatch.lab.loadgen.metrics import RequestRecord
from gpumatch.lab.loadgen.workload import RequestSpec, arrivals

MAX_CONCURRENCY = 10_000
OnRecord = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class Level:
    """A load level: ``mode`` ``concurrency`` (closed loop, ``value`` clients) or ``rate`` (open loop, ``value``
    requests/s, ``arrival`` poisson or constant); ``phase`` ``ladder`` or ``search``."""

    index: int
    mode: str
    value: float
    arrival: str = "poisson"
    phase: str = "ladder"

    @property
    def label(self) -> str:
        return f"c={int(self.value)}" if self.mode == "concurrency" else f"{self.value:g}/s {self.arrival}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"level": self.index, "mode": self.mode, "phase": self.phase, "label": self.label}
        if self.mode == "concurrency":
            d["max_concurrency"] = int(self.value)
        else:
            d.update({"request_rate": self.value, "arrival": self.arrival,
                      "burstiness": 1.0 if self.arrival == "poisson" else None})
        return d


@dataclass
class LevelRun:
    """What a level did: every request's record, the requests never sent after an abort, the wall time."""

    level: Level
    records: list[RequestRecord] = field(default_factory=list)
    not_sent: int = 0
    aborted: str = ""
    wall_s: float = 0.0
    t0: float = 0.0
    """``time.perf_counter()`` at the level's start (its time 0)."""


def check_level(level: Level) -> None:
    if level.mode == "concurrency" and not 1 <= level.value <= MAX_CONCURRENCY:
        raise InputError(f"concurrency must be 1 to {MAX_CONCURRENCY}, got {level.value:g}")
    if level.mode == "rate" and not level.value > 0:
        raise InputError(f"request rate must be positive, got {level.value:g}")


def run_level(target: Target, level: Level, specs: Sequence[RequestSpec], seed: int, max_in_flight: int,
              on_record: OnRecord | None = None) -> LevelRun:
    """Run one level to its end (module docstring); blocking (its own event loop)."""
    check_level(level)
    out = LevelRun(level)
    t_start = time.perf_counter()
    try:
        asyncio.run(_level(target, level, specs, seed, max_in_flight, out, on_record))
    finally:
        out.wall_s = time.perf_counter() - t_start
    return out


async def _level(target: Target, level: Level, specs: Sequence[RequestSpec], seed: int, max_in_flight: int,
                 out: LevelRun, on_record: OnRecord | None) -> None:
    import aiohttp

    limit = int(level.value) if level.mode == "concurrency" else max_in_flight
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        t0 = out.t0 = time.perf_counter()
        if level.mode == "concurrency":
            await _closed(session, target, int(level.value), specs, t0, out, on_record)
        else:
            when = arrivals(len(specs), level.value, level.arrival, seed)
            await _open(session, target, when, specs, t0, out, on_record)


def _keep(out: LevelRun, rec: RequestRecord, on_record: OnRecord | None) -> None:
    out.records.append(rec)
    if rec.error_class == "connection_refused" and not out.aborted:
        out.aborted = f"connection refused: {rec.message}"
    if on_record is not None:
        on_record(rec)


async def _closed(session: Any, target: Target, clients: int, specs: Sequence[RequestSpec], t0: float,
                  out: LevelRun, on_record: OnRecord | None) -> None:
    queue = iter(specs)

    async def client() -> None:
        for spec in queue:
            if out.aborted:
                out.not_sent += 1
                continue
            rec = await send(session, target, spec, time.perf_counter() - t0, t0)
            _keep(out, rec, on_record)

    await asyncio.gather(*(client() for _ in range(min(clients, len(specs)))))


async def _open(session: Any, target: Target, when: Sequence[float], specs: Sequence[RequestSpec], t0: float,
                out: LevelRun, on_record: OnRecord | None) -> None:
    tasks: list[asyncio.Task[None]] = []

    async def one(spec: RequestSpec, scheduled: float) -> None:
        _keep(out, await send(session, target, spec, scheduled, t0), on_record)

    for spec, at in zip(specs, when, strict=True):
        if out.aborted:
            out.not_sent += 1
            continue
        delay = at - (time.perf_counter() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(spec, at)))
    await asyncio.gather(*tasks)
