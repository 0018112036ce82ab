"""The client self-test: can this client generate the planned load, measured against a server that costs nothing?

Before the measurement, each planned level runs against the built-in loopback server
(:mod:`gpumatch.loadgen.loopback`, in its own process, streaming at a fixed inter-token interval with no
service time) at the same concurrency or rate, with the same request lengths. Any delay it shows is the
client's. A level is **client-bound** when one of these holds (and then its measurement says so, and no figure
of it is blamed on the GPU; ``../shared/notes/benchmark-method.md`` section 4.11, vllm-project/vllm#21104):

- ``lag``: the client sent late: p99 of ``client_lag`` = sent − scheduled (the maximum when fewer than 100
  requests) above ``max_lag_s``;
- ``itl``: the client read the streams slower than they came: mean ITL on the loopback above the server's
  interval by more than ``max_itl_overhead`` (a fraction);
- ``e2el``: requests took longer end to end than the loopback's schedule, ``(n − 1) · itl`` for ``n`` output
  tokens, by more than ``max_itl_overhead`` (the client was slow to connect, send or read).

The same lag check runs on the measurement itself (``in_run``): a client that fell behind while measuring the
real server is flagged even if it passed the self-test.

Size: closed loop ``max(2 C, 20)`` requests, open loop ``max(20, rate × seconds)`` (``seconds`` default 5),
never more than the level itself sends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpumatch.loadgen.client import Target, target_url
from gpumatch.loadgen.loopback import MODEL, Loopback, LoopbackConfig
from gpumatch.loadgen.metrics import RequestRecord, samples
from gpumatch.loadgen.runner import Level, run_level
from gpumatch.loadgen.workload import RequestSpec
from gpumatch.stats import reported_percentile


@dataclass(frozen=True)
class Limits:
    """When a level counts as client-bound (module docstring)."""

    max_lag_s: float = 0.010
    max_itl_overhead: float = 0.25
    seconds: float = 5.0


@dataclass(frozen=True)
class ClientCheck:
    """The self-test of one level: what the client achieved against the loopback, and the verdict."""

    level: int
    label: str
    requests: int
    loopback_itl_s: float
    lag_s: float | None
    """p99 of client_lag (the maximum below 100 requests)."""
    itl_overhead: float | None
    """(mean ITL measured − loopback interval) / loopback interval."""
    e2el_overhead: float | None
    """(mean E2E measured − (n − 1) · itl) / ((n − 1) · itl), n the mean output tokens."""
    failed: int
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def client_bound(self) -> bool:
        return bool(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["reasons"] = list(self.reasons)
        d["client_bound"] = self.client_bound
        return d


def lag_statistic(records: Sequence[RequestRecord]) -> float | None:
    """p99 of client_lag in seconds (:func:`gpumatch.stats.reported_percentile`; the maximum when fewer than
    :func:`gpumatch.stats.min_samples` ``(99)`` = 100 requests were sent)."""
    lags = samples(records, "client_lag")
    if not lags:
        return None
    p99 = reported_percentile(lags, 99.0)
    return max(lags) if p99 is None else p99


def lag_reason(records: Sequence[RequestRecord], limits: Limits) -> str:
    lag = lag_statistic(records)
    if lag is not None and lag > limits.max_lag_s:
        return f"lag: client sent {lag * 1000:.1f} ms late (limit {limits.max_lag_s * 1000:g} ms)"
    return ""


def self_test_size(level: Level, planned: int, limits: Limits) -> int:
    if level.mode == "concurrency":
        return min(planned, max(2 * int(level.value), 20))
    return min(planned, max(20, math.ceil(level.value * limits.seconds)))


def check_level(url: str, target: Target, level: Level, specs: Sequence[RequestSpec], itl_s: float, seed: int,
                max_in_flight: int, limits: Limits) -> ClientCheck:
    """Run ``level`` against the loopback at ``url`` and judge it (module docstring)."""
    loop_target = replace(target, url=target_url(url, target.api), model=MODEL, api_key=None)
    level = replace(level, duration_s=None)  # the self-test is count-limited (module docstring)
    n = self_test_size(level, len(specs), limits)
    run = run_level(loop_target, level, specs[:n], seed, max_in_flight)
    ok = [r for r in run.records if r.ok]
    reasons = [lag_reason(run.records, limits)]
    itls = samples(run.records, "itl")
    overhead = (sum(itls) / len(itls) - itl_s) / itl_s if itls else None
    if overhead is not None and overhead > limits.max_itl_overhead:
        reasons.append(f"itl: streams read {overhead:.0%} slower than sent")
    ratio = None
    if ok:
        ideal = itl_s * max(sum(r.tokens_out - 1 for r in ok) / len(ok), 1.0)
        ratio = (sum(r.e2el_s for r in ok) / len(ok) - ideal) / ideal
        if ratio > limits.max_itl_overhead:
            reasons.append(f"e2el: requests took {ratio:.0%} longer than the loopback's schedule")
    if len(ok) < len(run.records):
        reasons.append(f"errors: {len(run.records) - len(ok)} of {len(run.records)} failed against the loopback")
    return ClientCheck(level.index, level.label, len(run.records), itl_s, lag_statistic(run.records), overhead,
                       ratio, len(run.records) - len(ok), tuple(r for r in reasons if r))


def self_test(target: Target, levels: Sequence[Level], specs: Sequence[RequestSpec], itl_s: Sequence[float],
              seed: int, max_in_flight: int, limits: Limits) -> list[ClientCheck]:
    """Every level's self-test, against one loopback server per distinct interval."""
    out: list[ClientCheck] = []
    for itl in sorted(set(itl_s)):
        with Loopback(LoopbackConfig(itl_s=itl)) as url:
            out += [check_level(url, target, lv, specs, itl, seed, max_in_flight, limits)
                    for lv, i in zip(levels, itl_s, strict=True) if i == itl]
    return sorted(out, key=lambda c: c.level)
