"""``gpumatch calibrate``: a Calibration of one card model fitted from the bench runs in the results store.

Steps (:func:`calibrate_runs`):

1. Read the completed bench runs (all, or those named) measured on ONE catalog card model
   (:func:`load_runs`); runs on several models without ``--gpu`` are refused: a calibration never mixes cards.
2. Turn their results into measured cases by operator class and split each class by shape into a fit set and a
   held-out set (:mod:`gpumatch.calibrate.runs`).
3. Microbenchmark classes: fit one efficiency curve per GEMM precision and one for device copies
   (:mod:`gpumatch.calibrate.curves`) on the fit shapes.
4. End-to-end classes, in :data:`PHASES` order: a coordinate search (:func:`gpumatch.calibrate.fit.search`) of the
   class's own Calibration fields on its fit shapes, starting from the shipped defaults, each phase starting from
   the previous one's result (decode first: its weight streaming sets the memory efficiency the others use).
5. The collective class (:mod:`gpumatch.calibrate.collectives`): ``nvlink_efficiency`` (or ``pcie_efficiency``)
   and ``collective_latency_s`` from the collectives of ``bench scale`` runs and imported nccl-tests runs of the
   same card, held out by message size.
6. Score every class on its held-out shapes before (shipped defaults) and after, and by leave-one-shape-out on
   its fit shapes: each fit shape in turn is dropped, the class's fields (or curve) refitted without it, and the
   dropped shape predicted.
6. When the store holds ``bench serve`` runs of the card (``--runs`` may name them), the ``serving`` class: the
   engine profile's per-pass costs fitted to the measured TPOT and throughput per load level, held out level by
   level (:mod:`gpumatch.calibrate.serving`); stored in the Calibration's ``serving`` field.
7. The residuals r = measured / predicted - 1 of the held-out decode, prefill, train-step and memory cases under
   the fitted value (:func:`gpumatch.calibrate.residuals.calibration_residuals`) go into the Calibration's
   ``residuals`` field: estimates on this card take their intervals from them where they have enough cases
   (:mod:`gpumatch.estimate.intervals`, rule 4).

The result (:class:`StoredFit`) goes into the store as a calibration named ``calibration:<card>``
(:func:`save`) with its provenance (run ids, card UUIDs, dates) and can be written as the JSON that
``gpumatch estimate --calibration FILE`` reads (:func:`export_json`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpumatch.calibrate.attention import BOUNDS as ATTENTION_BOUNDS
from gpumatch.calibrate.attention import FIELDS as ATTENTION_FIELDS
from gpumatch.calibrate.attention import IDENTIFY_MIN, attention_cases, identified, measures_attention
from gpumatch.calibrate.cases import MeasuredCase
from gpumatch.calibrate.compare import predict as predict_estimate
from gpumatch.calibrate.curves import Curve
from gpumatch.calibrate.fit import BOUNDS, search
from gpumatch.calibrate.micro import curve_key, default_rate, fit_curves, size
from gpumatch.calibrate.residuals import calibration_residuals
from gpumatch.calibrate.runs import CLASSES, NOT_MEASURED, StoredRun, cases_of_runs, split_by_shape
from gpumatch.calibrate.serving import ServingResult, fit_serving, load_levels, with_costs
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration
from gpumatch.estimate.intervals import parse_residuals

PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("decode", ("memory_efficiency_max", "decode_step_overhead_s")),
    ("attention", ATTENTION_FIELDS),
    ("prefill", ("prefill_overhead_s",)),
    ("train-step", ("train_step_overhead_s", "optimizer_traffic_factor")),
    ("train-memory", ("fragmentation_fraction",)),
)
"""End-to-end classes and the Calibration fields each one's fit may move (each field belongs to one class); the
attention class moves only the fields its fit cases identify (:func:`gpumatch.calibrate.attention.identified`)."""
FIELD_BOUNDS = {**BOUNDS, "prefill_overhead_s": (0.0, 5e-3), **ATTENTION_BOUNDS}
ROUNDS = 2
PRIOR = 0.05
"""Weight of the log-space prior towards the shipped defaults (:func:`gpumatch.calibrate.fit.search`). Chosen by
leave-one-shape-out error on the fit shapes of the committed H200 runs (the held-out shapes were not used): the
summed mean LOO error of decode, prefill, train-step and train-memory was 0.41 at 0, 0.34 at 0.01, 0.23 at 0.05
and 0.25 at 0.2 (2026-12-05)."""
TIME_ERROR_FLOOR = 0.03
"""Least ``fitted_error_fraction`` a stored calibration claims (run-to-run spread between cards of one model,
:data:`gpumatch.estimate.intervals.TIME_FLOOR`)."""


@dataclass(frozen=True)
class ClassScore:
    """Errors of one operator class: |predicted / measured - 1|, mean and max, on each set."""

    cls: str
    fit_shapes: int
    held_shapes: int
    n_fit: int
    n_held: int
    held_before_mean: float
    held_before_max: float
    held_after_mean: float
    held_after_max: float
    loo_mean: float
    loo_max: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class StoredFit:
    """A calibration fitted from stored runs, its curves, the cases and the per-class scores."""

    card: str
    calibration: Calibration
    curves: dict[str, Curve]
    runs: tuple[StoredRun, ...]
    cases: tuple[MeasuredCase, ...]
    scores: tuple[ClassScore, ...]
    provenance: dict[str, Any]
    not_identified: dict[str, float] = field(default_factory=dict)
    """Fields of a class's phase its fit cases could not tell (kept at their value), with their sensitivity:
    the largest |log| change of a fit case's prediction when the field is halved or doubled."""
    serving: ServingResult | None = None
    """The serving class, when the store holds serve runs of the card."""

    def to_dict(self) -> dict[str, Any]:
        return {"card": self.card, "basis": self.calibration.basis, "provenance": self.provenance,
                "not_identified": dict(self.not_identified),
                "classes": [s.to_dict() for s in self.scores],
                "not_measured": list(NOT_MEASURED) if self.serving is None else [],
                "serving": None if self.serving is None else {
                    "engine": self.serving.engine, "host_pass_s": self.serving.host_pass_s,
                    "host_seq_s": self.serving.host_seq_s, "levels": list(self.serving.rows)},
                "curves": {k: c.to_dict() for k, c in self.curves.items()},
                "calibration": export_fields(self.calibration), "residuals": residual_counts(self.calibration)}


def export_fields(cal: Calibration) -> dict[str, Any]:
    """The Calibration as the fields :meth:`Calibration.from_dict` accepts (basis ``calibrated``; the basis
    text is kept at the front of the provenance)."""
    d = cal.to_dict()
    if d["basis"] not in ("assumed", "calibrated"):
        d["provenance"] = f"{d['basis']}; {d['provenance']}"
        d["basis"] = "calibrated"
    return d


def residual_counts(cal: Calibration) -> dict[str, int]:
    """Held-out cases per interval kind in the calibration's residuals (kinds with fewer than 2 are absent)."""
    return {k.kind: k.n for k in cal.residuals.kinds} if cal.residuals else {}


def _stored(st: Any, record: Any) -> StoredRun:
    data = st.export_run(record.run_id)
    started = str(((record.config or {}).get("imported") or {}).get("started_at") or record.started_at)
    return StoredRun(run_id=record.run_id, gpu_name=str(record.manifest.get("gpu.name")),
                     gpu_uuid=str(record.manifest.get("gpu.uuid") or ""), started_at=started,
                     manifest=dict(record.manifest), results=tuple(data["results"]))


def load_runs(store: Path | None, run_ids: Sequence[int] = (), gpu: str | None = None) -> tuple[str, list[StoredRun]]:
    """(catalog card, its runs): the completed CUDA bench runs of the store, those of ``run_ids`` when given (ids
    of serve runs are accepted and left to :func:`gpumatch.calibrate.serving.load_levels`), on the card ``gpu``
    when given. InputError when none is left or they span card models without ``gpu``."""
    from gpumatch.catalog import catalog_name, get_gpu
    from gpumatch.store import open_existing_store

    want = get_gpu(gpu).name if gpu else None
    with open_existing_store(store) as st:
        records = [r for r in st.runs("bench", limit=100_000) if r.status == "completed"]
        if run_ids:
            serve = {r.run_id for r in st.runs("serve", limit=100_000) if r.status == "completed"}
            missing = sorted(set(run_ids) - {r.run_id for r in records} - serve)
            if missing:
                raise InputError(f"no completed bench or serve run {missing[0]} in the store",
                                 "'gpumatch bench list' lists them")
            records = [r for r in records if r.run_id in set(run_ids)]
        by_card = {r.run_id: catalog_name(r.manifest.get("gpu.name")) for r in records
                   if r.manifest.get("device.kind") == "cuda"}
        cards = sorted({c for c in by_card.values() if c and (want is None or c == want)})
        if not cards:
            where = f" on {want}" if want else ""
            raise InputError(f"no completed bench run measured on a catalog GPU{where} in the store",
                             "run 'gpumatch bench run' on the card, or 'gpumatch bench import FILE'")
        if len(cards) > 1:
            raise InputError(f"the runs were measured on {len(cards)} card models ({', '.join(cards)})",
                             "a calibration is for one card model: add --gpu NAME")
        runs = [_stored(st, r) for r in sorted(records, key=lambda r: r.run_id) if by_card.get(r.run_id) == cards[0]]
    return cards[0], runs


def _err(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1.0) if measured and predicted == predicted else math.nan


def _stats(errs: Sequence[float]) -> tuple[float, float]:
    xs = [e for e in errs if not math.isnan(e)]
    return (sum(xs) / len(xs), max(xs)) if xs else (math.nan, math.nan)


Predictor = Callable[[MeasuredCase], float]


Phases = dict[str, tuple[str, ...]]


def _fit_e2e(card: str, cases: Sequence[MeasuredCase], start: Calibration
             ) -> tuple[Calibration, Phases, dict[str, float]]:
    """The end-to-end phases in order (module docstring, step 4): (fitted value, the fields each class moved,
    {field: sensitivity} of the attention fields the fit cases do not identify)."""
    cal = start
    moved: Phases = {}
    unknown: dict[str, float] = {}
    for cls, names in PHASES:
        fit = [c for c in cases if c.kind == cls and c.fit]
        if cls == "attention" and fit:
            sens = identified(card, cal, fit)
            unknown = {n: v for n, v in sens.items() if v <= IDENTIFY_MIN}
            names = tuple(n for n in names if n not in unknown)
        moved[cls] = names if fit else ()
        if fit and names:
            cal = _search(card, cal, fit, names)
    return cal, moved, unknown


def _search(card: str, cal: Calibration, fit: Sequence[MeasuredCase], names: Sequence[str]) -> Calibration:
    return search(cal, fit, names, ROUNDS, FIELD_BOUNDS, gpu=card, prior=PRIOR)


def _predictor(card: str, cal: Calibration, curves: dict[str, Curve] | None) -> Predictor:
    """Predict any case: microbenchmarks by ``curves`` (the Calibration's own curves when None), the rest by
    the estimator under ``cal``."""
    def one(c: MeasuredCase) -> float:
        if c.kind in ("gemm", "copy"):
            if curves is None:
                return default_rate(card, c, cal)
            curve, copy = curves.get(curve_key(c)), curves.get("copy")
            if curve is None:
                return math.nan
            if c.kind == "copy" or copy is None:
                return curve.rate(size(c))
            return curve.gemm_rate(size(c), float(c.options["bytes"]), copy)
        return predict_estimate(c, cal, gpu=card)
    return one


def _loo(card: str, cls: str, cases: Sequence[MeasuredCase], fitted: Calibration, moved: Phases) -> list[float]:
    """Leave-one-shape-out errors of class ``cls`` over its fit shapes (module docstring, step 5)."""
    fit = [c for c in cases if c.kind == cls and c.fit]
    errs: list[float] = []
    for shape in sorted({c.extra["shape"] for c in fit}):
        rest = [c for c in fit if c.extra["shape"] != shape]
        out = [c for c in fit if c.extra["shape"] == shape]
        if cls in ("gemm", "copy"):
            micro = [c for c in cases if c.fit and c.kind in ("gemm", "copy") and c.extra["shape"] != shape]
            pred = _predictor(card, fitted, fit_curves(card, micro))
        else:
            names = moved.get(cls, ())
            pred = _predictor(card, _search(card, fitted, rest, names) if rest and names else fitted, None)
        errs += [_err(pred(c), c.measured) for c in out]
    return errs


def _score(card: str, cls: str, cases: Sequence[MeasuredCase], before: Predictor, after: Predictor,
           fitted: Calibration, moved: Phases) -> ClassScore:
    mine = [c for c in cases if c.kind == cls]
    fit, held = [c for c in mine if c.fit], [c for c in mine if not c.fit]
    b_mean, b_max = _stats([_err(before(c), c.measured) for c in held])
    a_mean, a_max = _stats([_err(after(c), c.measured) for c in held])
    l_mean, l_max = _stats(_loo(card, cls, cases, fitted, moved))
    return ClassScore(cls, len({c.extra["shape"] for c in fit}), len({c.extra["shape"] for c in held}), len(fit),
                      len(held), b_mean, b_max, a_mean, a_max, l_mean, l_max)


def _spans(ids: Sequence[int]) -> str:
    """``1-3, 7``: run ids as ranges."""
    out: list[str] = []
    for i in sorted(ids):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


def basis_text(run_ids: Sequence[int], gpu_name: str, uuids: Sequence[str]) -> str:
    """``calibrated from runs 1-2 on H200 GPU-071f8961...``: what an estimate's basis says."""
    word = "run" if len(run_ids) == 1 else "runs"
    cards = sorted(set(uuids))
    more = f" (+{len(cards) - 1} more)" if len(cards) > 1 else ""
    short = gpu_name.removeprefix("NVIDIA ").strip()
    return f"calibrated from {word} {_spans(run_ids)} on {short} {cards[0][:12]}...{more}"


def _bench_part(store: Path | None, run_ids: Sequence[int], gpu: str | None,
                coll: Any) -> tuple[str, list[StoredRun]]:
    """The bench runs of the fit: those of ``run_ids`` that are not collective runs; none when every named run
    is one, or when the store has collective runs only (then their card)."""
    coll_ids = set(coll.run_ids) if coll is not None else set()
    bench_ids = [i for i in run_ids if i not in coll_ids]
    if coll is not None and run_ids and not bench_ids:
        return coll.card, []
    try:
        return load_runs(store, bench_ids, gpu or (coll.card if coll is not None else None))
    except InputError:
        if coll is None or bench_ids:
            raise
        return coll.card, []


def calibrate_runs(store: Path | None, run_ids: Sequence[int] = (), gpu: str | None = None,
                   today: dt.date | None = None, start: Calibration | None = None) -> StoredFit:
    """Fit a calibration from stored bench runs (module docstring) and, where the store holds them, the collective
    class from ``bench scale`` collectives and imported nccl-tests runs of the same card
    (:mod:`gpumatch.calibrate.collectives`). ``today`` goes into the provenance. ``start``: the value the search
    starts from and its prior pulls towards (default the shipped defaults; the refit of the shipped defaults
    themselves starts from the values they replace, :mod:`gpumatch.usecases.shipped`)."""
    from gpumatch.calibrate.collectives import fit_collectives, load_collective_points

    coll = load_collective_points(store, run_ids, gpu)
    card, runs = _bench_part(store, run_ids, gpu, coll)
    if coll is not None and coll.card != card:
        coll = load_collective_points(store, run_ids, card)
    cases = cases_of_runs(runs)
    start = Calibration() if start is None else start
    cases += split_by_shape([c for c in attention_cases(cases) if measures_attention(card, start, c)])
    if not any(c.fit for c in cases) and coll is None:
        raise InputError(f"the runs {_spans([r.run_id for r in runs])} hold no result a calibration can use",
                         "run 'gpumatch bench run --suite standard' on the card")
    curves = fit_curves(card, [c for c in cases if c.fit])
    e2e, moved, unknown = _fit_e2e(card, cases, start)
    serve = _serving(store, card, run_ids, e2e)
    if serve is not None:
        e2e = with_costs(e2e, serve.engine, serve.host_pass_s, serve.host_seq_s,
                         f"{sum(lv.mode == 'concurrency' for lv in serve.levels)} closed-loop load levels of serve "
                         f"runs {_spans(_serve_ids(serve))} on {card}")
        moved["serving"] = ("serving.host_pass_s", "serving.host_seq_s")
    ids = sorted({r.run_id for r in runs} | set(_serve_ids(serve)))
    uuids = [r.gpu_uuid for r in runs if r.gpu_uuid]
    before, after = _predictor(card, start, None), _predictor(card, e2e, curves)
    present = [cls for cls in CLASSES if any(c.kind == cls for c in cases)]
    scores = tuple(_score(card, cls, cases, before, after, e2e, moved) for cls in present)
    scores += _serving_scores(serve)
    if coll is not None:
        cf = fit_collectives(coll.points, card, coll.pcie, e2e)
        e2e = replace(e2e, **cf.fields())
        scores += (ClassScore(**cf.score()),)
        moved["collective"] = tuple(cf.fields())
        ids = sorted({*ids, *coll.run_ids})
    held_time = [s.held_after_max for s in scores if s.cls in ("decode", "prefill", "train-step")
                 and not math.isnan(s.held_after_max)]
    err = max([TIME_ERROR_FLOOR, *held_time])
    card_uuids = sorted(set(uuids))
    dates = sorted({r.started_at[:10] for r in runs} | {lv.date[:10] for lv in (serve.levels if serve else ())}
                   | set(coll.dates if coll is not None else ()))
    fitted_at, names = (today or dt.date.today()).isoformat(), [n for ns in moved.values() for n in ns]
    gpu_names = sorted({r.gpu_name for r in runs} | set(coll.gpu_names if coll is not None else ()))
    prov: dict[str, Any] = {"run_ids": ids, "card": card, "gpu_names": gpu_names,
                            "card_uuids": card_uuids, "dates": dates, "fitted_at": fitted_at,
                            "split": "by shape within each class: even positions by size fit, odd held out "
                                     "(collectives: by message size)", "fields": names}
    if serve is not None:
        prov["serve_run_ids"] = _serve_ids(serve)
        prov["serving_split"] = ("leave-one-level-out over the closed-loop levels; open-loop levels never fitted "
                                 "(class serving-open)")
    text = (f"fitted {fitted_at} by gpumatch calibrate from runs {_spans(ids)} on {card} "
            f"({', '.join(card_uuids) or 'no UUID'}; measured {', '.join(dates)}); fields "
            f"{', '.join(names)}; other fields the shipped defaults")
    held = parse_residuals(calibration_residuals(cases, e2e, card, ids, dates))
    cal = replace(e2e, basis=basis_text(ids, gpu_names[0] if gpu_names else card, uuids or ["GPU-?"]),
                  provenance=text,
                  fitted_on=(card,), fitted_error_fraction=math.ceil(err * 100) / 100, residuals=held)
    return StoredFit(card, cal, curves, tuple(runs), tuple(cases), scores, prov, unknown, serve)


def _serve_ids(serve: ServingResult | None) -> list[int]:
    return sorted({lv.run_id for lv in serve.levels}) if serve is not None else []


def _serving(store: Path | None, card: str, run_ids: Sequence[int], cal: Calibration) -> ServingResult | None:
    """The serving class (:mod:`gpumatch.calibrate.serving`) when the store holds serve runs of ``card``."""
    levels = load_levels(store, card, run_ids)
    return fit_serving(levels, cal, card) if levels else None


def _serving_scores(serve: ServingResult | None) -> tuple[ClassScore, ...]:
    """``serving`` (closed loop, held out level by level: its held-out error is its leave-one-out error) and
    ``serving-open`` (never fitted: held out as a whole)."""
    if serve is None:
        return ()
    out = []
    for cls in ("serving", "serving-open"):
        rows = [r for r in serve.rows if r["class"] == cls]
        if not rows:
            continue
        b_mean, b_max = _stats(serve.errors("before", cls))
        a_mean, a_max = _stats(serve.errors("held", cls))
        levels = len({r["level"] for r in rows})
        loo = (a_mean, a_max) if cls == "serving" else (math.nan, math.nan)
        out.append(ClassScore(cls, levels if cls == "serving" else 0, levels, len(rows) if cls == "serving" else 0,
                              len(rows), b_mean, b_max, a_mean, a_max, *loo))
    return tuple(out)
