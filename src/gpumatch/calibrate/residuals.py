"""Residuals of the measured cases: the table behind every estimate's interval, and its coverage.

:func:`residual_table` reads the measured cases (:mod:`gpumatch.calibrate.cases`), predicts each FIT case with
the shipped defaults and groups r = measured / predicted - 1 by kind (operator class, card, precision, task),
with n, the median, the empirical 5th and 95th percentiles (linear interpolation) and the ranges of model size
and context the cases span. Only the fit set is used: the held-out cases stay free to measure how often the
intervals hold (:func:`coverage`). The table reaches the estimators as a value, the JSON file
``src/gpumatch/estimate/data/residuals.json`` that ``benchmarks/residual_table.py`` writes and
:mod:`gpumatch.estimate.intervals` reads; a test checks the committed file equals what this module computes.

Kinds: ``decode`` (the compiled decode step, ``tpot_s``), ``prefill`` (``prefill_s``), ``train-step``
(``step_s``) and ``memory`` (training peak: the measured ``max_memory_reserved`` plus the CUDA context and
communication buffers gpumatch adds, against ``total_bytes``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.calibrate.cases import GPU, MeasuredCase, arch_of, load_cases
from gpumatch.catalog import get_gpu
from gpumatch.estimate import Calibration, Estimate, Request, estimate
from gpumatch.estimate.intervals import Residuals, Where, figure_bands, parse_residuals
from gpumatch.stats import percentile

KIND_OF_CASE = {"decode": "decode", "prefill": "prefill", "train-time": "train-step", "train-step": "train-step",
                "train-memory": "memory"}
"""Measured case kind (:mod:`.cases`; ``train-step`` of :mod:`.runs`) -> operator class of the residual table."""
FIGURE = {"decode": "tpot_s", "prefill": "prefill_s", "train-step": "step_s", "memory": "total_bytes"}
"""The estimate figure each operator class is compared on."""
PRECISION = "bf16"
"""Weights of every measured case (the bench's random bf16 weights)."""
STATISTIC = "measured / predicted - 1"


@dataclass(frozen=True)
class Residual:
    """One measured case against its estimate: the figure, predicted and measured values, r, and where it is."""

    case: MeasuredCase
    kind: str
    figure: str
    predicted: float
    measured: float
    where: Where
    est: Estimate

    @property
    def r(self) -> float:
        return self.measured / self.predicted - 1.0


def _context(c: MeasuredCase) -> float:
    o = c.options
    return float(o["seq"]) if "seq" in o else float(o["prompt"] + o["gen"])


def residual(c: MeasuredCase, calibration: Calibration | None = None, gpu: str = GPU) -> Residual:
    """Predict case ``c`` on catalog card ``gpu`` under ``calibration`` (the shipped defaults when None) and pair
    it with its measurement."""
    kind = KIND_OF_CASE[c.kind]
    arch = arch_of(c.shape)
    est = estimate(arch, gpu, Request(**c.options), calibration=calibration, with_scaling=False)
    figure = FIGURE[kind]
    if kind == "memory":
        items = est.memory.items
        predicted = float(items["total_bytes"])
        measured = c.measured + float(items["cuda_context_bytes"] + items["comm_buffer_bytes"])
    else:
        predicted, measured = float(est.metrics[figure]), c.measured
    where = Where(card=est.gpu, precision=PRECISION, task=str(c.options["task"]), params=float(arch.params_total),
                  context=_context(c), count=1)
    return Residual(c, kind, figure, predicted, measured, where, est)


def residuals(cases: Iterable[MeasuredCase]) -> list[Residual]:
    """The residual of every timed or memory case (out-of-memory cases have none)."""
    return [residual(c) for c in cases if c.kind in KIND_OF_CASE]


def quantile(values: Sequence[float], q: float) -> float:
    """Empirical quantile, ``q`` in 0..1: :func:`gpumatch.stats.percentile` at ``100 q`` (linear interpolation
    between order statistics, numpy's default, type 7). No minimum-sample rule: the table keeps ``n`` beside
    it, and :mod:`gpumatch.estimate.intervals` widens a small ``n``'s interval."""
    return percentile(values, 100.0 * q)


def _kind_row(kind: str, rs: list[Residual]) -> dict[str, Any]:
    values = [x.r for x in rs]
    return {
        "kind": kind, "card": rs[0].where.card, "precision": PRECISION, "task": rs[0].where.task, "n": len(rs),
        "q05": round(quantile(values, 0.05), 5), "median": round(quantile(values, 0.5), 5),
        "q95": round(quantile(values, 0.95), 5),
        "params_range": [min(x.where.params for x in rs), max(x.where.params for x in rs)],
        "context_range": [min(x.where.context for x in rs), max(x.where.context for x in rs)],
        "cases": sorted(x.case.case_id for x in rs),
    }


def residual_table(directory: Path) -> dict[str, Any]:
    """The residual table of the fit cases in ``directory`` as the JSON object of ``estimate/data/residuals.json``.

    Deterministic (no clock): ``date`` is the latest measurement date of the files used."""
    fit = residuals(c for c in load_cases(directory) if c.fit)
    files = sorted({x.case.source for x in fit})
    kinds = [_kind_row(k, [x for x in fit if x.kind == k]) for k in FIGURE if any(x.kind == k for x in fit)]
    card = get_gpu(GPU).name
    return {
        "schema": 1, "statistic": STATISTIC, "set": "fit",
        "provenance": (f"gpumatch.calibrate.residuals.residual_table: fit cases of {', '.join(files)} on one "
                       f"{card}, predicted with the shipped Calibration defaults; the held-out cases are not used"),
        "files": files, "date": max(f[:10] for f in files), "kinds": kinds,
    }


def calibration_residuals(cases: Iterable[MeasuredCase], calibration: Calibration, card: str, run_ids: Sequence[int],
                          dates: Sequence[str]) -> dict[str, Any]:
    """The residual table of a stored calibration (``gpumatch calibrate``): r over its HELD-OUT cases of
    ``card``'s runs ``run_ids``, each predicted under the fitted ``calibration`` (the same statistics as
    :func:`residual_table`; a kind needs 2 cases to be listed). The JSON object
    :class:`gpumatch.estimate.intervals.Residuals` reads; it travels in the calibration's ``residuals`` field."""
    held = residuals_under([c for c in cases if not c.fit], calibration, card)
    kinds = [_kind_row(k, rows) for k in FIGURE if len(rows := [x for x in held if x.kind == k]) >= 2]
    runs = ", ".join(str(i) for i in run_ids)
    return {
        "schema": 1, "statistic": STATISTIC, "set": "held-out",
        "provenance": (f"gpumatch.calibrate.residuals.calibration_residuals: held-out cases (split by shape) of "
                       f"bench runs {runs} on {card}, predicted with the calibration fitted on the other shapes"),
        "files": [f"run {i}" for i in run_ids], "date": max(dates) if dates else "", "kinds": kinds,
    }


def residuals_under(cases: Iterable[MeasuredCase], calibration: Calibration, card: str) -> list[Residual]:
    """:func:`residual` of every timed or memory case under ``calibration`` on ``card``."""
    return [residual(c, calibration, card) for c in cases if c.kind in KIND_OF_CASE]


def table_json(table: dict[str, Any]) -> str:
    """The file's text: the table, indented, one trailing newline (what the test compares)."""
    return json.dumps(table, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Coverage:
    """How many of ``n`` cases of one kind measured inside their interval; the widths seen."""

    kind: str
    n: int
    inside: int
    mean_half_width: float

    @property
    def share(self) -> float:
        return self.inside / self.n if self.n else math.nan


def coverage(directory: Path, table: Residuals | None = None, held_out: bool = True) -> list[Coverage]:
    """Share of the (held-out) measurements inside the interval their estimate carries, per kind.

    ``table`` defaults to the table this module computes from the fit cases of ``directory`` (never from the
    cases being scored)."""
    res = table or parse_residuals(residual_table(directory))
    scored = residuals(c for c in load_cases(directory) if c.fit != held_out)
    out = []
    for kind in FIGURE:
        rows = [x for x in scored if x.kind == kind]
        inside, widths = 0, []
        for x in rows:
            b = figure_bands({x.figure: x.predicted}, x.where, x.kind == "train-step", res)[x.figure]
            lo, hi = b.apply(x.predicted)
            inside += lo <= x.measured <= hi
            widths.append((b.high - b.low) / 2.0)
        out.append(Coverage(kind, len(rows), inside, sum(widths) / len(widths) if widths else math.nan))
    return out
