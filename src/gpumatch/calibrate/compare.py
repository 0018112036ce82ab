"""Predicted against measured: gpumatch's estimate of each measured case, its error, and a table of rows.

The measured side is :mod:`gpumatch.calibrate.cases`; the predicted side is :func:`gpumatch.estimate.estimate`
run on the same configuration with a given :class:`Calibration` (the defaults when None), so the same
function scores the defaults, a candidate during a fit (:mod:`gpumatch.calibrate.fit`) and a fitted value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from gpumatch.calibrate.cases import GPU, MeasuredCase, arch_of
from gpumatch.estimate import Calibration, Request, estimate


def predict(case: MeasuredCase, calibration: Calibration | None = None, gpu: str = GPU) -> float:
    """gpumatch's value for ``case.metric`` (seconds, bytes, or 1.0/0.0 for fits) on catalog card ``gpu``; for a
    case with ``extra["base_options"]`` (the attention class, :mod:`gpumatch.calibrate.attention`) the ratio of the
    value at ``options`` to the value at the base options."""
    base = case.extra.get("base_options")
    if base is not None:
        at = predict(replace(case, extra={}), calibration, gpu)
        return at / predict(replace(case, options=dict(base), extra={}), calibration, gpu)
    est = estimate(arch_of(case.shape), gpu, Request(**case.options), calibration=calibration, with_scaling=False)
    if case.metric == "reserved_bytes":
        items = est.memory.items
        return float(items["total_bytes"] - items["cuda_context_bytes"] - items["comm_buffer_bytes"])
    if case.metric == "fits":
        return 1.0 if est.memory.fits else 0.0
    return float(est.metrics[case.metric])


def rel_error(predicted: float, measured: float) -> float:
    """(predicted - measured) / measured."""
    return (predicted - measured) / measured if measured else math.nan


def rows(cases: Iterable[MeasuredCase], calibration: Calibration | None = None,
         other: Callable[[MeasuredCase], float | None] | None = None) -> list[dict[str, Any]]:
    """One row per case: measured, gpumatch, error, and optionally another estimator's value and error."""
    out = []
    for c in cases:
        p = predict(c, calibration)
        row: dict[str, Any] = {"case": c.case_id, "kind": c.kind, "metric": c.metric,
                               "set": "fit" if c.fit else "held-out", "measured": c.measured, "gpumatch": p,
                               "gpumatch_error": rel_error(p, c.measured) if c.metric != "fits" else math.nan,
                               "source": c.source, **c.extra}
        if other is not None:
            q = other(c)
            row["llm_analysis"] = q
            row["llm_analysis_error"] = math.nan if q is None or c.metric == "fits" else rel_error(q, c.measured)
        out.append(row)
    return out
