"""What ``gpumatch runs import`` refuses to store: values no benchmark can have measured.

An imported file is another program's output, sometimes edited by hand or cut short: a negative throughput, 1e30
requests or a TTFT of 1e308 ms is a broken file, not a measurement, and once stored it would flow into every
comparison and calibration. Each converted result (SI units, :mod:`.formats`) must be a finite number inside a
plausible range for its unit (:data:`PLAUSIBLE`); a metric key that holds a string, a list or an object instead of a
number (the format readers skip those) is refused too. Refused values are named, never stored, and kept in the run's
``manifest.source.refused``; a file where nothing is left is refused whole (:func:`check_results`).

The ranges are sanity limits, not expectations: far above what any GPU or cluster can produce, so they refuse only
what cannot be a measurement.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

PLAUSIBLE: dict[str, tuple[float, float]] = {
    "s": (0.0, 1e7),          # latencies and durations: up to 116 days
    "1": (0.0, 1e12),         # counts of requests
    "token": (0.0, 1e15),     # counts of tokens
    "1/s": (0.0, 1e9),        # requests per second
    "token/s": (0.0, 1e12),   # tokens per second
    "B/s": (0.0, 1e16),       # bytes per second (10 PB/s)
    "B": (0.0, 1e18),         # bytes
}
"""(lowest, highest) a stored value in this SI unit may take; a unit not listed must only be finite."""


@dataclass(frozen=True)
class Refused:
    """One value not stored: the source's key, gpumatch's metric name ("" when it never became one), why."""

    source_key: str
    metric: str
    value: Any
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"source_key": self.source_key, "metric": self.metric, "value": _jsonable(self.value), "why": self.why}


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, int | float | str | bool) or value is None else json.dumps(value)[:80]


def refusal(metric: str, value: Any, unit: str) -> str | None:
    """Why ``value`` (in ``unit``) cannot be stored as ``metric``, or None when it can."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"a {type(value).__name__}, not a number"
    if not math.isfinite(value):
        return "not finite"
    low, high = PLAUSIBLE.get(unit, (-math.inf, math.inf))
    if value < low:
        return f"negative ({value:g} {unit})"
    if value > high:
        return f"implausibly large ({value:g} {unit} > {high:g})"
    return None


def mistyped_metric_keys(data: Any, is_metric: Any) -> list[Refused]:
    """Keys of a flat result object (vLLM's) that name a metric (``is_metric(key)``) but hold a string, list or
    object: the reader skips them, so they are listed here instead of vanishing."""
    if not isinstance(data, dict):
        return []
    return [Refused(str(k), "", v, f"a {type(v).__name__}, not a number") for k, v in data.items()
            if is_metric(str(k)) and v is not None and (isinstance(v, bool) or not isinstance(v, int | float))]


def describe(refused: list[Refused], limit: int = 6) -> str:
    """One line naming the refused keys: ``mean_ttft_ms (implausibly large ...), request_throughput (...)``."""
    parts = [f"{r.source_key or r.metric} ({r.why})" for r in refused[:limit]]
    more = f" and {len(refused) - limit} more" if len(refused) > limit else ""
    return ", ".join(parts) + more
