"""The search for the highest open-loop request rate that meets the SLO.

A rate *meets the SLO* when no request failed and at least ``attainment`` of its requests met every objective given
(TTFT, TPOT, E2E; :class:`gpumatch.loadgen.metrics.Slo`). The search starts from what the ladder's rate levels
showed (the highest rate that met it, the lowest above that did not), else from the first ``--rate`` or 1
request/s; it doubles the rate while it meets the SLO (halves it while it does not, at most 4 times) until the
answer is bracketed, then bisects ``search_steps`` times. Each probe is a full level (``num_prompts`` requests) and
is recorded like any other (``phase: search``). When a probe's requests all arrive within one request's lifetime
(``(num_prompts − 1) / rate`` < mean E2E) a higher rate would only send the same burst, so the search stops there
and says so (``capped``: more ``--num-prompts`` probes higher). The answer is the highest rate that met the SLO
(None when none did, or when the server went away). A probe the client could not drive (client-bound) is marked in
the output: its verdict says more about the client than about the server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from gpumatch.loadgen.runner import Level

if TYPE_CHECKING:
    from gpumatch.loadgen.bench import LevelResult, ServeRequest

MAX_EXPAND = 12
MAX_SHRINK = 4
"""Halvings below the start rate at most (the start / 16): lower rates take long and rarely answer anything."""


class Search:
    """Bracket then bisect (module docstring). Feed every measured level to :meth:`observe`; iterate
    :meth:`probes` for the next rates to try."""

    def __init__(self, req: ServeRequest, ladder: Sequence[Level]) -> None:
        self.req = req
        self.lo: float | None = None
        self.hi: float | None = None
        self.stopped = False
        self.capped = False
        """A probe's requests all arrived within one request's lifetime: higher rates are a burst of the same
        requests, so the search stops there (more --num-prompts probes higher)."""
        self.start = req.rates[0] if req.rates else 1.0

    def observe(self, result: LevelResult) -> None:
        if result.level.mode != "rate":
            return
        if result.aborted:
            self.stopped = True
            return
        rate = result.level.value
        span = (len(result.records) - 1) / rate
        mean_e2el = (result.summary.get("mean_e2el_ms") or 0.0) / 1000.0
        if result.meets_slo(self.req.slo, self.req.attainment) and span < mean_e2el and self.hi is None:
            self.lo, self.capped = max(self.lo or 0.0, rate), True  # the requests all arrive within one request's life
            return
        if result.meets_slo(self.req.slo, self.req.attainment):
            self.lo = max(self.lo or 0.0, rate)
            if self.hi is not None and self.hi <= rate:
                self.hi = None
        elif self.lo is None or rate > self.lo:
            self.hi = rate if self.hi is None else min(self.hi, rate)

    @property
    def best(self) -> float | None:
        return None if self.stopped else self.lo

    def _next(self) -> float | None:
        if self.lo is None and self.hi is None:
            return self.start
        if self.hi is None:
            assert self.lo is not None
            return self.lo * 2.0
        if self.lo is None:
            return self.hi / 2.0
        return (self.lo + self.hi) / 2.0

    def probes(self, first_index: int) -> Iterator[Level]:
        """The probes, decided one by one from what the previous ones showed."""
        index, expand, bisect = first_index, 0, 0
        while not self.stopped and not self.capped:
            bracketed = self.lo is not None and self.hi is not None
            if bracketed:
                if bisect >= self.req.search_steps:
                    return
                bisect += 1
            else:
                if expand >= (MAX_EXPAND if self.lo is not None else MAX_SHRINK):
                    return
                expand += 1
            rate = self._next()
            if rate is None:
                return
            yield Level(index, "rate", float(f"{rate:.6g}"), self.req.arrival, "search", self.req.burstiness,
                        self.req.duration_s)
            index += 1
