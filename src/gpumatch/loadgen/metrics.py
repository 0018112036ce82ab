"""Serving metrics from raw per-request records, each with its formula (no HTTP here: pure, testable).

Every time is in seconds on the client's monotonic clock, relative to the start of the load level. A request
has a *scheduled* send time (open loop: the arrival process; closed loop: the moment a client slot became
free), the time it was *sent*, the arrival time of each streamed chunk that carried output text, and the time
its stream *ended*. Latencies are measured from the **scheduled** time, so a client that falls behind its
schedule shows up as latency and as ``client_lag`` instead of silently sending later (no coordinated omission;
MLPerf LoadGen measures from the scheduled issue time the same way).

Definitions (``../shared/notes/benchmark-method.md`` section 1 compares them across tools):

- ``ttft`` = first content chunk − scheduled (vLLM ``bench serve`` starts after its concurrency semaphore,
  which in closed loop is our scheduled time; ``ttft_sent`` = first content chunk − sent is kept too);
- ``e2el`` = end of stream − scheduled (vLLM's ``latency``);
- ``tpot`` per request = (e2el − ttft) / (output_tokens − 1), output tokens as the server's ``usage`` counts
  them, requests with more than one output token (vLLM ``calculate_metrics``; GenAI-Perf's ITL);
- ``itl`` = every gap between consecutive content chunks of a request, pooled over requests (vLLM). A chunk may
  carry several tokens (speculative decoding, server-side batching of the stream); the gap is then counted
  once, so ITL is per *chunk*; ``tokens_per_chunk`` = (output_tokens − 1) / (chunks − 1) says when that
  happened, and TPOT stays per token;
- ``client_lag`` = sent − scheduled;
- requests in flight: the time-weighted mean over the level, ``Σ (end − sent) / duration`` (the integral of the
  number in flight over time, divided by the time: Little's law L = λ W measured directly), and the maximum
  (a sweep over sends and ends, an end before a send at the same instant). Every request sent counts, failed and
  incomplete ones too: the server held them.

Throughput: ``duration`` = last end − 0 (the level's first scheduled time); ``request_throughput`` = completed /
duration; ``output_throughput`` = Σ output tokens / duration; ``total_token_throughput`` adds the prompt tokens;
``request_goodput`` = requests meeting every SLO given / duration (vLLM ``--goodput``). Summary keys use the
names ``vllm bench serve --save-result`` writes (vllm ``vllm/benchmarks/serve.py``, v0.31: ``mean_ttft_ms``,
``median_tpot_ms``, ``p99_itl_ms``, ``std_e2el_ms``, ``request_throughput``, ``output_throughput``,
``request_goodput``, ``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``, ``duration``).

Percentiles are :func:`gpumatch.stats.reported_percentile`: numpy's default (linear) interpolation, as vLLM
does, but only where the sample supports them (:func:`gpumatch.stats.min_samples`: ``p_q`` needs
n ≥ 1 / (1 − q/100) samples, p50: 2, p90: 10, p99: 100); below that the key is ``None`` and the summary's
``n_<metric>`` says how many there were.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gpumatch.stats import REPORTED_QUANTILES, percentile_name, reported_percentile

PERCENTILES = REPORTED_QUANTILES
METRICS = ("ttft", "tpot", "itl", "e2el")
"""The latency metrics summarised with mean, median, std and percentiles, as vLLM names them."""

FORMULAS = {
    "ttft": "first_chunk_s - scheduled_s (first chunk with output text)",
    "ttft_sent": "first_chunk_s - sent_s",
    "tpot": "(e2el - ttft) / (output_tokens - 1), per request with output_tokens > 1 (tokens from server usage)",
    "itl": "gaps between consecutive content chunks, pooled over requests (per chunk; see tokens_per_chunk)",
    "e2el": "end_s - scheduled_s",
    "client_lag": "sent_s - scheduled_s",
    "duration": "max(end_s) - 0 (level start = first scheduled time)",
    "request_throughput": "completed / duration",
    "output_throughput": "sum(output_tokens) / duration",
    "total_token_throughput": "sum(prompt_tokens + output_tokens) / duration",
    "request_goodput": "requests meeting every SLO given (ttft, tpot, e2el) / duration",
    "error_rate": "failed / (completed + failed)",
    "tokens_per_chunk": "(sum(output_tokens) - n) / (sum(chunks) - n) over completed requests",
    "percentile": "numpy.percentile (linear), only when n >= 1 / (1 - q/100)",
    "mean_in_flight_requests": "sum(end_s - sent_s) / duration over every request sent (time-weighted mean)",
    "max_in_flight_requests": "most requests between sent_s and end_s at one instant",
}


@dataclass
class RequestRecord:
    """One request as the client saw it (the raw record; every summary figure is computed from these).

    Times in seconds from the level start. ``prompt_tokens`` / ``output_tokens``: the server's ``usage`` counts
    (None when the server sent none); ``*_requested``: what the client asked for. ``chunk_s``: arrival time of
    every chunk that carried output text. ``status``: ``ok``, ``error`` (then ``error_class``, ``message``) or
    ``incomplete`` (cut off at a time-limited level's hard stop: neither completed nor failed)."""

    index: int
    scheduled_s: float
    prompt_tokens_requested: int
    output_tokens_requested: int
    sent_s: float = math.nan
    end_s: float = math.nan
    chunk_s: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    status: str = "ok"
    error_class: str = ""
    message: str = ""
    http_status: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tokens_out(self) -> int:
        """Output tokens: the server's count, else the number of content chunks (marked in the summary)."""
        return self.output_tokens if self.output_tokens is not None else len(self.chunk_s)

    @property
    def ttft_s(self) -> float:
        return self.chunk_s[0] - self.scheduled_s if self.chunk_s else math.nan

    @property
    def e2el_s(self) -> float:
        return self.end_s - self.scheduled_s

    @property
    def tpot_s(self) -> float:
        n = self.tokens_out
        return (self.e2el_s - self.ttft_s) / (n - 1) if n > 1 and self.chunk_s else math.nan

    @property
    def itl_s(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_s, self.chunk_s[1:], strict=False)]

    @property
    def length_mismatch(self) -> bool:
        """The server delivered (by its own count) another number of output tokens than was asked for."""
        return self.ok and self.output_tokens is not None and self.output_tokens != self.output_tokens_requested

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass(frozen=True)
class Slo:
    """Service-level objectives in seconds (None: not part of the SLO). A request is *good* when it succeeded
    and meets every one given (vLLM ``--goodput ttft:MS tpot:MS e2el:MS``)."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2el_s))

    def meets(self, r: RequestRecord) -> bool:
        if not r.ok:
            return False
        tpot = r.tpot_s if not math.isnan(r.tpot_s) else 0.0  # one output token: no decode interval
        return ((self.ttft_s is None or r.ttft_s <= self.ttft_s) and (self.tpot_s is None or tpot <= self.tpot_s)
                and (self.e2el_s is None or r.e2el_s <= self.e2el_s))

    def to_dict(self) -> dict[str, float | None]:
        return {"ttft_ms": _ms(self.ttft_s), "tpot_ms": _ms(self.tpot_s), "e2el_ms": _ms(self.e2el_s)}


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def describe(name: str, values_s: Sequence[float]) -> dict[str, Any]:
    """``mean_<name>_ms``, ``median_<name>_ms``, ``std_<name>_ms``, ``p50/p90/p99_<name>_ms`` (None where n is
    too small; mean and std need 1 sample) and ``n_<name>``; milliseconds as vLLM writes them."""
    v = np.asarray(values_s, dtype=float) * 1000.0
    n = len(v)
    out: dict[str, Any] = {f"n_{name}": n,
                           f"mean_{name}_ms": float(v.mean()) if n else None,
                           f"median_{name}_ms": reported_percentile(v.tolist(), 50.0),
                           f"std_{name}_ms": float(v.std()) if n else None}
    for q in PERCENTILES:
        out[f"{percentile_name(q)}_{name}_ms"] = reported_percentile(v.tolist(), q)
    return out


def samples(records: Sequence[RequestRecord], name: str) -> list[float]:
    """The samples of metric ``name`` (seconds) from the completed records (module docstring)."""
    ok = [r for r in records if r.ok]
    if name == "itl":
        return [g for r in ok for g in r.itl_s]
    if name == "client_lag":
        return [r.sent_s - r.scheduled_s for r in records if not math.isnan(r.sent_s)]
    if name == "ttft_sent":
        return [r.chunk_s[0] - r.sent_s for r in ok if r.chunk_s]
    values = [float(getattr(r, f"{name}_s")) for r in ok]
    return [x for x in values if not math.isnan(x)]


def summarize(records: Sequence[RequestRecord], slo: Slo | None = None) -> dict[str, Any]:
    """The level's summary (vLLM ``--save-result`` names plus gpumatch's own, module docstring)."""
    ok = [r for r in records if r.ok]
    failed = sum(r.status == "error" for r in records)
    incomplete = sum(r.status == "incomplete" for r in records)
    ends = [r.end_s for r in records if not math.isnan(r.end_s)]
    duration = max(ends) if ends else 0.0
    out_tokens = sum(r.tokens_out for r in ok)
    in_tokens = sum(r.prompt_tokens or 0 for r in ok)
    good = sum(1 for r in ok if slo is not None and slo.given and slo.meets(r))
    chunks = sum(len(r.chunk_s) for r in ok)
    per = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    out: dict[str, Any] = {
        "duration": duration, "completed": len(ok), "failed": failed, "incomplete": incomplete,
        "error_rate": failed / (len(ok) + failed) if len(ok) + failed else 0.0,
        "total_input_tokens": in_tokens, "total_output_tokens": out_tokens,
        "request_throughput": per(len(ok)), "output_throughput": per(out_tokens),
        "total_token_throughput": per(out_tokens + in_tokens),
        "request_goodput": per(good) if slo is not None and slo.given else None,
        "good_requests": good if slo is not None and slo.given else None,
        "output_len_mismatches": sum(r.length_mismatch for r in records),
        "usage_missing": sum(r.output_tokens is None for r in ok),
        "tokens_per_chunk": (out_tokens - len(ok)) / (chunks - len(ok)) if chunks > len(ok) else None,
    }
    for name in METRICS:
        out.update(describe(name, samples(records, name)))
    for name in ("ttft_sent", "client_lag"):
        d = describe(name, samples(records, name))
        out.update({k: d[k] for k in (f"mean_{name}_ms", f"p99_{name}_ms", f"n_{name}")})
        lags = samples(records, name)
        out[f"max_{name}_ms"] = max(lags) * 1000.0 if lags else None
    return {**out, **in_flight(records, duration)}


def in_flight(records: Sequence[RequestRecord], duration_s: float) -> dict[str, Any]:
    """``mean_in_flight_requests`` (time-weighted over ``[0, duration_s]``) and ``max_in_flight_requests``
    (module docstring) from the send and end times of every request sent."""
    spans = [(r.sent_s, r.end_s) for r in records if math.isfinite(r.sent_s) and math.isfinite(r.end_s)]
    if not spans:
        return {"mean_in_flight_requests": None, "max_in_flight_requests": None}
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    mean = sum(e - s for s, e in spans) / duration_s if duration_s > 0 else None
    return {"mean_in_flight_requests": mean, "max_in_flight_requests": peak}


def error_counts(records: Sequence[RequestRecord]) -> dict[str, int]:
    """Failed requests per error class (incomplete ones are not failures)."""
    counts: dict[str, int] = {}
    for r in records:
        if r.status == "error":
            counts[r.error_class] = counts.get(r.error_class, 0) + 1
    return counts
