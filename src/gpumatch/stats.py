"""The one home of gpumatch's sample statistics: percentiles and the rule of how many samples each needs.

Method. Every percentile is :func:`numpy.percentile` with its default ``method="linear"`` (Hyndman & Fan type 7:
the value at rank ``(n - 1) * q / 100``, interpolated between the two closest order statistics). It is what vLLM's
``benchmarks/benchmark_serving.py`` (``np.percentile``), GuideLLM and numpy's users report, so our figures read
the same as the field's.

Minimum samples. A reported ``q``-th percentile needs ``n >= ceil(1 / (1 - q/100))`` samples
(:func:`min_samples`: p50 from 2, p90 from 10, p99 from 100): with fewer, the linear p99 is an interpolation
between the two largest samples, a maximum in all but name (``../shared/notes/benchmark-method.md`` section 4.9;
docs/serving-bench.md). Below that, a reported percentile is ``None`` (:func:`reported_percentile`) or its key
is left out (:func:`reported_percentiles`). A plain :func:`percentile` (a median of idle power, a residual
quantile) has no such rule: it only needs one sample.

This module sits in the bottom layer (numpy only), so every layer may import it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np

METHOD: Final = "linear"
"""The :func:`numpy.percentile` method every percentile uses (numpy's default, type 7)."""

REPORTED_QUANTILES = (50.0, 90.0, 99.0)
"""The percentiles a summary reports (p50, p90, p99), each only when :func:`min_samples` allows it."""


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (``q`` in 0..100) of ``values``, in their unit: ``np.percentile(values, q)``,
    linear interpolation (module docstring). ValueError when ``values`` is empty."""
    xs = np.asarray(list(values), dtype=float)
    if xs.size == 0:
        raise ValueError("no values")
    return float(np.percentile(xs, q, method=METHOD))


def median(values: Iterable[float]) -> float:
    """The median of ``values`` (the 50th :func:`percentile`), in their unit. ValueError when empty."""
    return percentile(values, 50.0)


def min_samples(q: float) -> int:
    """Samples a reported ``q``-th percentile needs: ``ceil(1 / (1 - q/100))`` (p50: 2, p90: 10, p99: 100).

    The rounding to 9 digits keeps p90 at 10 (1 / 0.1 is 10.000000000000002 in binary floating point)."""
    return math.ceil(round(1.0 / (1.0 - q / 100.0), 9))


def reported_percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th :func:`percentile`, or None when ``values`` has fewer than :func:`min_samples` ``(q)``."""
    if len(values) < min_samples(q):
        return None
    return percentile(values, q)


def percentile_name(q: float) -> str:
    """The field's short name of a percentile: ``p50``, ``p99``, ``p99_9`` (a dot written ``_``)."""
    return f"p{q:g}".replace(".", "_")


def reported_percentiles(values: Sequence[float], suffix: str = "_s",
                         quantiles: Sequence[float] = REPORTED_QUANTILES) -> dict[str, Any]:
    """``{"n": n, "p50<suffix>": ..., ...}``: the count and each of ``quantiles`` that ``n`` supports
    (:func:`min_samples`); a percentile it does not support is left out, not None."""
    raw = [float(v) for v in values]
    out: dict[str, Any] = {"n": len(raw)}
    for q in quantiles:
        value = reported_percentile(raw, q)
        if value is not None:
            out[f"{percentile_name(q)}{suffix}"] = value
    return out


BOOTSTRAP_RESAMPLES = 2000
"""Resamples of every bootstrap interval."""


def ratio_bootstrap(a: Sequence[float], b: Sequence[float], ratio: Any, *, seed: int = 0,
                    methods: Sequence[str] = ("BCa",), confidence: float = 0.95) -> tuple[float, float] | None:
    """The ``confidence`` bootstrap interval of ``ratio(a, b, axis)`` (a vectorised statistic of two samples,
    e.g. median(b) / median(a)), each sample resampled on its own (:func:`scipy.stats.bootstrap`,
    :data:`BOOTSTRAP_RESAMPLES` resamples, seeded). ``methods`` are tried in order until one gives finite bounds
    (BCa gives NaN on tied samples: a caller may fall back to ``"percentile"``); None when none does, or without
    scipy (the ``report`` extra)."""
    try:
        import warnings

        from scipy.stats import bootstrap
    except ImportError:
        return None
    data = (np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    for method in methods:
        with warnings.catch_warnings():  # a degenerate BCa warns before giving NaN bounds
            warnings.simplefilter("ignore")
            res = bootstrap(data, ratio, n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=confidence,
                            method=method, vectorized=True, rng=np.random.default_rng(seed))
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    return None
