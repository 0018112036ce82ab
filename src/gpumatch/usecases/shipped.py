"""The shipped calibration defaults, refitted through the product's own measuring path.

The path (docs/calibration.md, "The shipped defaults"): the committed ``bench export`` files of one card
(:data:`INPUTS`, under ``tests/data/measurements/bench/``) are imported into a temporary results store with the
import of ``gpumatch bench import`` (:func:`gpumatch.usecases.import_bench.import_file`), fitted by the fit of
``gpumatch calibrate`` (:func:`gpumatch.calibrate.stored.calibrate_runs`), and the fields that fit may move
(:data:`FIELDS`) are written to ``src/gpumatch/estimate/data/calibration.json`` (:func:`shipped_document`), which
:mod:`gpumatch.estimate.calibration` reads as the defaults of those fields. The search starts from (and its prior
pulls towards) the file's ``start`` values: the defaults the refit replaced, so a refit is reproducible from the
file alone (:func:`check_shipped`, ``benchmarks/refit_shipped.py --check`` and a unit test).

The other Calibration fields (GEMM, elementwise, eager launch, logits, norm bytes, power, links...) are not fitted
by ``gpumatch calibrate`` (its GEMM and copy curves are kept beside the value, not in it) and keep the values and
provenance stated in :mod:`gpumatch.estimate.calibration`.
"""

from __future__ import annotations

import datetime as dt
import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpumatch.calibrate.stored import PHASES, calibrate_runs
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration

SCHEMA = "gpumatch.shipped-calibration/1"
INPUTS: tuple[str, ...] = ("2026-12-04-h200-quick.json", "2026-12-04-h200-standard.json",
                           "2026-12-05-h200-quick.json", "2026-12-05-h200-soak.json")
"""The committed bench exports of the H200 the shipped defaults are fitted on (one card: a calibration never mixes
cards; the serve runs are left out: the serving profiles are ``estimate/data/engines.toml``'s)."""
FIELDS: tuple[str, ...] = tuple(n for _, names in PHASES for n in names)
"""The Calibration fields ``gpumatch calibrate`` may move (its end-to-end phases), the fields the file holds."""
MEASUREMENTS = Path("tests") / "data" / "measurements" / "bench"
"""Where :data:`INPUTS` are committed, relative to the repository root."""


def refit_shipped(inputs: Sequence[Path], start: Mapping[str, float], fitted_at: dt.date) -> dict[str, Any]:
    """Import ``inputs`` (bench export files) into a temporary store, fit them from ``start`` (values of
    :data:`FIELDS`; the other fields at their defaults) and return the shipped document (:func:`shipped_document`).
    The temporary store is removed afterwards."""
    from gpumatch.usecases.import_bench import import_file

    missing = sorted(set(FIELDS) - set(start))
    if missing:
        raise InputError(f"no start value of {missing[0]}", f"give every field of {', '.join(FIELDS)}")
    with tempfile.TemporaryDirectory(prefix="gpumatch-refit-") as tmp:
        store = Path(tmp) / "refit.sqlite"
        for path in inputs:
            import_file(path, store)
        values: dict[str, Any] = {n: float(start[n]) for n in FIELDS}
        fit = calibrate_runs(store, today=fitted_at, start=replace(Calibration(), **values))
    return shipped_document(fit, [p.name for p in inputs], start, fitted_at)


def shipped_document(fit: Any, inputs: Sequence[str], start: Mapping[str, float],
                     fitted_at: dt.date) -> dict[str, Any]:
    """The JSON object of ``estimate/data/calibration.json``: the inputs, card, ``start`` and ``fitted`` values of
    :data:`FIELDS`, the fields the fit moved, its held-out scores per class and a provenance sentence."""
    cal, prov = fit.calibration, fit.provenance
    moved = [n for n in FIELDS if getattr(cal, n) != start[n]]
    text = (f"refitted {fitted_at.isoformat()} by gpumatch calibrate (calibrate.stored.calibrate_runs) from the "
            f"bench exports {', '.join(inputs)} imported into a temporary store (gpumatch.usecases.shipped); "
            f"{fit.card}, {', '.join(prov['card_uuids'])}, measured {', '.join(prov['dates'])}; moved "
            f"{', '.join(moved) or 'nothing'}")
    return {"schema": SCHEMA, "inputs": list(inputs), "card": fit.card, "fitted_at": fitted_at.isoformat(),
            "start": {n: float(start[n]) for n in FIELDS}, "fitted": {n: float(getattr(cal, n)) for n in FIELDS},
            "moved": moved, "provenance": text,
            "held_out": {s.cls: {"before_mean": _round(s.held_before_mean), "after_mean": _round(s.held_after_mean),
                                 "n": s.n_held} for s in fit.scores}}


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def refit_from(document: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """:func:`refit_shipped` with the inputs, start values and date a shipped document names (files under
    ``root``/:data:`MEASUREMENTS`)."""
    paths = [root / MEASUREMENTS / name for name in document["inputs"]]
    absent = [p for p in paths if not p.is_file()]
    if absent:
        raise InputError(f"no measurement file {absent[0]}", "run from the repository root of a checkout")
    return refit_shipped(paths, document["start"], dt.date.fromisoformat(document["fitted_at"]))


def check_shipped(shipped: Mapping[str, Any], refit: Mapping[str, Any], rel: float = 1e-9) -> list[str]:
    """The fields whose shipped value differs from the refit's (relative tolerance ``rel``), as lines."""
    out = [f"{n}: shipped {shipped['fitted'].get(n)!r}, refit {v!r}" for n, v in refit["fitted"].items()
           if not isinstance(shipped["fitted"].get(n), int | float)
           or not math.isclose(shipped["fitted"][n], v, rel_tol=rel, abs_tol=0.0)]
    return out + [f"{k} differs" for k in ("inputs", "card", "start", "moved") if shipped.get(k) != refit.get(k)]
