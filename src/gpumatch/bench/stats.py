"""Summaries of repeated timings (no torch): median and p10/p90 by linear interpolation (numpy's default)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy 'linear')."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(times_s: Sequence[float]) -> dict[str, Any]:
    """Median, p10, p90, mean, min, max and the raw list, all in seconds."""
    raw = [float(t) for t in times_s]
    return {
        "median_s": percentile(raw, 50),
        "p10_s": percentile(raw, 10),
        "p90_s": percentile(raw, 90),
        "mean_s": sum(raw) / len(raw),
        "min_s": min(raw),
        "max_s": max(raw),
        "n": len(raw),
        "raw_s": raw,
    }
