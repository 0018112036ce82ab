"""Fit a :class:`Calibration` to the fit set of the measured cases: where a calibration fit goes.

:func:`fit_calibration` reads the measurement files of a directory (:mod:`gpumatch.calibrate.cases`), searches
the fields of :data:`BOUNDS` on the fit set, and returns a :class:`Fit`: the fitted value (basis
``calibrated``, ``fitted_on`` the card, a provenance naming the files, the card, the fit set and the date)
with its errors on the fit and held-out sets before and after. The value leaves this package as a value:
``Calibration.to_dict()`` written as JSON is what ``gpumatch estimate --calibration FILE.json`` reads, and the
shipped defaults of the fields ``gpumatch calibrate`` does not fit (``DEFAULT_CALIBRATION`` in
:mod:`gpumatch.estimate.calibration`) were copied from such a fit, rounded, with their provenance; the fields it
fits come from the shipped refit through the store (:mod:`gpumatch.usecases.shipped`).
``benchmarks/fit_calibration.py`` runs it on ``tests/data/measurements``.

Objective: mean squared log error (predicted/measured) over the fit cases, plus the square of the largest log
error so no fit case is sacrificed. Each field is searched in turn over a multiplicative grid around its current
value, within :data:`BOUNDS`, for a few rounds (coordinate search; deterministic).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpumatch.calibrate.cases import GPU, MeasuredCase, load_cases
from gpumatch.calibrate.compare import predict
from gpumatch.catalog import get_gpu
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration

BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_efficiency_max": (0.4, 0.9),
    "gemm_half_flops": (1e8, 1e11),
    "attention_efficiency_max": (0.15, 0.9),
    "attention_backward_efficiency_ratio": (0.3, 1.5),
    "memory_efficiency_max": (0.5, 0.95),
    "elementwise_bytes_per_token_hidden": (10.0, 400.0),
    "elementwise_bytes_per_token_ffn": (2.0, 40.0),
    "kernel_overhead_s": (0.0, 3e-5),
    "train_step_overhead_s": (0.0, 0.05),
    "optimizer_traffic_factor": (1.0, 5.0),
    "fragmentation_fraction": (0.0, 0.3),
    "logits_bytes_per_element": (4.0, 20.0),
    "decode_step_overhead_s": (0.0, 1e-3),
    "eager_launch_s": (1e-6, 5e-5),
    "eager_kernels_per_layer": (5.0, 120.0),
    "norm_saved_bytes_per_element": (2.0, 12.0),
    "prefill_overhead_s": (0.0, 5e-3),
}
"""The fields a fit may move, each with the range it is searched in."""
KINDS = ("decode", "prefill", "train-time", "train-memory")
"""Case kinds a fit scores by default (``train-fit``, the out-of-memory cases, has no error to fit)."""
_STEPS = (0.5, 0.7, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2.0)


@dataclass(frozen=True)
class Errors:
    """Absolute relative errors of one calibration on a set of cases."""

    label: str
    n: int
    max_abs: float
    mean_abs: float

    def __str__(self) -> str:
        return f"{self.label}: n={self.n} max {self.max_abs * 100:.1f}% mean {self.mean_abs * 100:.1f}%"


@dataclass(frozen=True)
class Fit:
    """A fitted calibration, what it started from, and the cases it was fitted and checked on."""

    calibration: Calibration
    start: Calibration
    fields: tuple[str, ...]
    fit_cases: tuple[MeasuredCase, ...]
    held_out: tuple[MeasuredCase, ...]

    def errors(self, calibration: Calibration | None = None, kind: str | None = None) -> tuple[Errors, Errors]:
        """(fit set, held-out set) errors of ``calibration`` (the fitted one when None), of one kind or all."""
        cal = self.calibration if calibration is None else calibration
        fit = [c for c in self.fit_cases if kind is None or c.kind == kind]
        held = [c for c in self.held_out if kind is None or c.kind == kind]
        return errors(cal, fit, "fit set"), errors(cal, held, "held-out")


def objective(cal: Calibration, cases: Sequence[MeasuredCase], gpu: str = GPU) -> float:
    """Mean squared log error over ``cases`` on catalog card ``gpu`` plus the squared largest one (smaller is
    better)."""
    errs = [math.log(predict(c, cal, gpu) / c.measured) for c in cases]
    return sum(e * e for e in errs) / len(errs) + max(abs(e) for e in errs) ** 2


def search(cal: Calibration, cases: Sequence[MeasuredCase], names: Iterable[str], rounds: int,
           bounds: dict[str, tuple[float, float]] | None = None, gpu: str = GPU, prior: float = 0.0) -> Calibration:
    """Coordinate search from ``cal``: each field of ``names`` in turn, over :data:`_STEPS` × its value, within
    ``bounds`` (default :data:`BOUNDS`), on catalog card ``gpu``.

    ``prior`` > 0 adds ``prior × Σ log(value / start value)²`` over the moved fields to the objective: a
    Gaussian prior in log space centred on the starting value (ridge regression), so a handful of fit cases moves
    a field only as far as they clearly ask for."""
    names = list(names)
    bounds = BOUNDS if bounds is None else bounds
    origin = {n: float(getattr(cal, n)) for n in names}

    def penalty(c: Calibration) -> float:
        return prior * sum(math.log(float(getattr(c, n)) / origin[n]) ** 2 for n in names
                           if origin[n] > 0 and float(getattr(c, n)) > 0)

    best = objective(cal, cases, gpu)
    for _ in range(rounds):
        for name in names:
            lo, hi = bounds[name]
            cur = float(getattr(cal, name))
            grid = {min(max(cur * f, lo), hi) for f in _STEPS}
            if cur == 0.0:
                grid |= {lo + (hi - lo) * f for f in (0.05, 0.1, 0.2, 0.4)}
            for value in sorted(grid):
                change: dict[str, Any] = {name: value}
                trial = replace(cal, **change)
                score = objective(trial, cases, gpu) + penalty(trial)
                if score < best:
                    best, cal = score, trial
    return cal


def errors(cal: Calibration, cases: Sequence[MeasuredCase], label: str) -> Errors:
    """|predicted / measured - 1| over ``cases`` (zeros when there are none)."""
    errs = [abs(predict(c, cal) / c.measured - 1.0) for c in cases]
    if not errs:
        return Errors(label, 0, 0.0, 0.0)
    return Errors(label, len(errs), max(errs), sum(errs) / len(errs))


def fit_calibration(directory: Path, fields: Sequence[str] | None = None, rounds: int = 3,
                    kinds: Sequence[str] = KINDS, start: Calibration | None = None,
                    date: dt.date | None = None) -> Fit:
    """Fit ``fields`` (all of :data:`BOUNDS` when None) from ``start`` (the defaults when None) to the fit set of
    the measurement files in ``directory``; ``date`` (today when None) goes into the provenance.

    An unknown field or kind, or a directory without fit cases, is an :class:`InputError`.
    """
    names = tuple(BOUNDS if fields is None else fields)
    unknown = [n for n in names if n not in BOUNDS] + [k for k in kinds if k not in KINDS]
    if unknown:
        raise InputError(f"cannot fit '{unknown[0]}'", f"fields: {', '.join(BOUNDS)}; kinds: {', '.join(KINDS)}")
    cases = [c for c in load_cases(directory) if c.kind in kinds and c.metric != "fits"]
    fit_cases = tuple(c for c in cases if c.fit)
    if not fit_cases:
        raise InputError(f"no fit cases of kinds {', '.join(kinds)} in {directory}",
                         "give the directory of the *-h200-*.json measurement files")
    start = Calibration() if start is None else start
    fitted = search(start, fit_cases, names, rounds)
    card = get_gpu(GPU).name
    files = sorted({c.source for c in fit_cases})
    what = "the fields of gpumatch.calibrate.fit.BOUNDS" if names == tuple(BOUNDS) else ", ".join(names)
    provenance = (f"fitted {(date or dt.date.today()).isoformat()} by gpumatch.calibrate.fit on one {card}: "
                  f"{what} ({rounds} rounds), on {len(fit_cases)} fit cases ({', '.join(kinds)}) of "
                  f"{', '.join(files)} in {directory.name}; other fields as given")
    calibration = replace(fitted, basis="calibrated", provenance=provenance, fitted_on=(card,))
    return Fit(calibration, start, names, fit_cases, tuple(c for c in cases if not c.fit))
