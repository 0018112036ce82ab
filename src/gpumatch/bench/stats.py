"""Summaries of repeated timings (no torch): median and p10/p90 through :mod:`gpumatch.stats` (numpy's linear
percentile); the percentiles a result reports are :func:`gpumatch.stats.reported_percentiles`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.stats import percentile


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


def slope_per_min(times_s: Sequence[float], values: Sequence[float]) -> float | None:
    """Least-squares slope of ``values`` against ``times_s``, per minute; None with fewer than 2 points or no
    spread in time."""
    n = len(times_s)
    if n < 2 or n != len(values):
        return None
    mt, mv = sum(times_s) / n, sum(values) / n
    var = sum((t - mt) ** 2 for t in times_s)
    if var <= 0:
        return None
    return 60.0 * sum((t - mt) * (v - mv) for t, v in zip(times_s, values, strict=True)) / var


def thermal_steady(times_s: Sequence[float], temps_c: Sequence[float], window_s: float = 60.0,
                   max_slope_c_per_min: float = 1.0) -> bool:
    """Whether the temperature is steady: the samples span at least ``window_s`` and the least-squares slope of
    those in the last ``window_s`` is below ``max_slope_c_per_min`` in magnitude (the soak suite's rule)."""
    if not times_s or times_s[-1] - times_s[0] < window_s:
        return False
    start = times_s[-1] - window_s
    pts = [(t, c) for t, c in zip(times_s, temps_c, strict=True) if t >= start]
    slope = slope_per_min([p[0] for p in pts], [p[1] for p in pts])
    return slope is not None and abs(slope) < max_slope_c_per_min
