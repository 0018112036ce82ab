"""The serving residual table: how far published engines ran from gpumatch's serving estimates, as predicted.

A published serving batch (``tests/data/published``) is three files: the settings of each row
(``engine-rows-DATE.toml``), the predictions frozen before any value was read (``engine-predictions-DATE.json``)
and the measured values (``engine-measured-DATE.toml``). Over the batches named, per figure (mean TPOT, mean TTFT)
and loop (``closed``: a client keeping C requests in flight, and the open bursts gpumatch replays as one; ``open``:
Poisson arrivals at a rate), this computes r = measured / predicted - 1 with n, the median and the empirical 5th and
95th percentiles (:func:`gpumatch.calibrate.residuals.quantile`). These are out-of-sample errors of the estimator
as it stood when each batch was frozen, over engines, versions, cards and models -- what a user who knows no more
than gpumatch's inputs should expect -- and they set the interval of every serving estimate's TTFT and TPOT
(:mod:`gpumatch.estimate.intervals`; ``benchmarks/serving_residual_table.py`` writes the shipped file).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpumatch.calibrate.published import EngineCase, batch_settings, load_engine_cases
from gpumatch.calibrate.residuals import quantile

LOOPS = {"closed": "closed", "open-burst": "closed", "open-poisson": "open"}
"""The batches' loop kinds and the estimate they were predicted as: a closed loop or a burst (replayed at
``--concurrency``), or an open loop (``--request-rate``)."""
MIN_ROWS = 10
"""Least rows of one (figure, loop) for a table entry; fewer leave that figure to the extrapolated band."""


def _loops(directory: Path, dates: Sequence[str]) -> dict[str, str]:
    return {i: LOOPS[r.get("loop", "closed")] for i, r in batch_settings(directory, dates).items()}


def _ratios(cases: Sequence[EngineCase], loops: dict[str, str], loop: str, figure: str) -> list[float]:
    out = []
    for c in cases:
        if loops[c.case_id] != loop:
            continue
        measured, predicted = (c.tpot_s, c.predicted_tpot_s) if figure == "tpot" else (c.ttft_s, c.predicted_ttft_s)
        if measured is not None and predicted is not None and predicted > 0 and measured > 0:
            out.append(measured / predicted - 1.0)
    return out


def serving_residual_table(directory: Path, dates: Sequence[str]) -> dict[str, Any]:
    """The table (a JSON-ready dict) over the published batches ``dates`` in ``directory`` (module docstring)."""
    measured = [directory / f"engine-measured-{d}.toml" for d in dates]
    frozen = [directory / f"engine-predictions-{d}.json" for d in dates]
    cases, _, _ = load_engine_cases(measured, frozen)
    loops = _loops(directory, dates)
    kinds = []
    for loop in ("closed", "open"):
        for figure in ("tpot", "ttft"):
            rs = _ratios(cases, loops, loop, figure)
            if len(rs) < MIN_ROWS:
                continue
            kinds.append({"figure": figure, "loop": loop, "n": len(rs), "q05": round(quantile(rs, 0.05), 5),
                          "median": round(quantile(rs, 0.5), 5), "q95": round(quantile(rs, 0.95), 5)})
    return {
        "schema": 1,
        "statistic": "measured / predicted - 1 (mean TPOT, mean TTFT), as predicted",
        "set": "blind",
        "provenance": ("gpumatch.calibrate.serving_residuals.serving_residual_table: published serving rows "
                       "predicted by the estimator of each batch's frozen_at_commit before its values were read"),
        "files": [p.name for p in frozen],
        "date": max(d[:10] for d in dates),
        "kinds": kinds,
    }
