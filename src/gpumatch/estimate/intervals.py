"""An interval (low, high) on every time and memory figure, from the residuals of measured cases.

The residuals reach this module as a VALUE (:class:`Residuals`, read from ``estimate/data/residuals.json``):
:func:`gpumatch.calibrate.residuals.residual_table` computes that file from the fit set of the measured cases
(``benchmarks/residual_table.py`` writes it; a test checks the committed file equals what calibrate computes).
Nothing here imports calibrate. The rule, with its reasoning, is in docs/estimators.md ("Intervals"):

1. A figure belongs to an operator class (:data:`FIGURE_KIND`): ``decode`` (TPOT, ITL), ``prefill`` (prefill
   time, TTFT), ``train-step`` (step time) or ``memory`` (peak bytes per GPU). Each class has a measured kind
   in the table: residual r = measured / predicted - 1 over its fit cases, with n, the median and the empirical
   5th and 95th percentiles, on one card, one precision, a range of model sizes and of contexts.
2. Same card, same precision, size and context inside the measured range: the band is the kind's 5th..95th
   percentile, stretched about the median by the small-sample factor :func:`small_sample_factor` (a Student-t
   prediction interval over a normal one: 1.22 at n=8, 1.0 as n grows), and at least :data:`TIME_FLOOR`
   (:data:`MEMORY_FLOOR` for memory) on each side.
3. Outside, each thing never measured widens the band (factors below, multiplied):
   size or context beyond the measured range by ``1 + EXTRAPOLATION_PER_OCTAVE`` per octave (factor of 2)
   beyond its edge, summed over both; another precision, another task (serving, fine-tuning; inference memory,
   as only training memory was measured) or more than one GPU, each by :data:`UNMEASURED_FACTOR` with a floor of
   :data:`UNMEASURED_FLOOR`; another card: times at least ``Calibration.extrapolated_error_fraction`` (0.30,
   efficiencies differ by architecture), memory by :data:`UNMEASURED_FACTOR` alone (the bytes do not depend on
   the card; its allocator and runtime may).
4. A calibration of the card (``gpumatch calibrate``) carries its own residuals (:attr:`Calibration.residuals
   <gpumatch.estimate.calibration.Calibration.residuals>`): r over ITS held-out cases, predicted under the fitted
   calibration. A figure's kind takes them instead of the shipped table's when they are of the estimate's card and
   have at least :data:`MIN_CALIBRATION_N` cases; otherwise that kind falls back to the shipped table, and the
   basis says which source each figure used (``residuals of calibration #7, held-out n=4`` or ``shipped residual
   table``, with why the calibration's were not used).
5. Figures that follow from a time carry its band: a throughput its inverse (tokens/s, MFU); energy and cost per
   token or per run its own (they are power or price × time). ``e2e_s`` combines the TTFT and TPOT bands.
6. A serving estimate (task ``serve``) takes its mean TTFT and TPOT band from the serving residual table instead
   (``estimate/data/serving_residuals.json``, :class:`ServingResiduals`, written by
   ``benchmarks/serving_residual_table.py`` from :mod:`gpumatch.calibrate.serving_residuals`): r over the blind
   published serving rows of its loop (closed: a concurrency; open: a request rate), each predicted by the
   estimator of its batch before the values were read. The micro-benchmark residuals above measure gpumatch's own
   kernels; a serving engine adds its scheduler, front end and kernels, and the blind rows show how much more
   that spreads the result. Its TPOT's band carries to ITL, decode throughput and the e2e band. A calibration of
   the card whose held-out residuals apply (rule 4) keeps setting its kind instead: measured on the user's card.

Intervals are fractions applied to the figure: ``[x × (1 + low), x × (1 + high)]`` with ``low < 0 < high``, so
``low ≤ x ≤ high`` always holds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpumatch.errors import DataFileError

TIME_FLOOR = 0.03
"""Least half-width of a time band on a measured kind: three different H200 cards ran the three suite runs
(docs/accuracy.md) and the same configuration's median varies by a few percent between machines of one kind
(host dispatch, clocks at the power cap)."""
MEMORY_FLOOR = 0.02
"""Least half-width of a memory band: the caching allocator reserves in blocks (2 MiB small, 20 MiB and up for
large requests) and its fragmentation varies with the order of allocations."""
EXTRAPOLATION_PER_OCTAVE = 0.5
"""Widening per octave of model size or context beyond the measured range (assumed: the efficiency curves are
saturating in the operator size, so the error grows with distance from the measured sizes)."""
MAX_EXTRAPOLATION = 4.0
"""Cap on the size/context widening factor (four octaves beyond the edge and more)."""
UNMEASURED_FACTOR = 1.5
"""Widening for a precision, task variant or operator class never measured (assumed)."""
UNMEASURED_FLOOR = 0.10
"""Least half-width then: issue 3's goal for a fitted card (``Calibration.fitted_error_fraction``)."""
MIN_CALIBRATION_N = 4
"""Least held-out cases of one kind for a calibration's residuals to set that kind's band (else the shipped
table's kind applies). Below 4 the empirical 5th and 95th percentiles are the two extreme residuals and the
small-sample factor exceeds 2 (:func:`small_sample_factor`: 2.05 at n=3, 1.60 at n=4); assumed."""
SHIPPED = "shipped residual table"
MEASURED_PRECISIONS = ("bf16", "fp16")
"""Weights in 16 bits run the same kernels as the measured bf16 cases (fp16 and bf16 share the tensor path)."""

FIGURE_KIND: dict[str, str] = {"tpot_s": "decode", "itl_s": "decode", "prefill_s": "prefill", "ttft_s": "prefill",
                               "step_s": "train-step", "total_bytes": "memory"}
"""The operator class each directly estimated figure belongs to."""
INVERSE = ("tokens_per_s", "tokens_per_s_per_replica", "output_tokens_per_s", "mfu")
"""Figures inversely proportional to the run's time (they take the inverse band)."""
PROPORTIONAL = ("energy_j_per_token", "energy_j_per_token_facility", "usd_per_million_tokens", "run_hours",
                "energy_kwh_per_run", "gpu_energy_kwh_per_run", "usd_per_run")
"""Figures proportional to the run's time (power or price × time)."""
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
        1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697)
"""Student t 95th percentile for 1..30 degrees of freedom (one-sided; the two-sided 90% interval)."""
_Z95 = 1.645


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResidualKind(_Strict):
    """Residuals r = measured / predicted - 1 of one measured kind (fit cases only)."""

    kind: str = Field(pattern=r"^(decode|prefill|train-step|memory)$")
    card: str = Field(min_length=1)
    precision: str = Field(min_length=1)
    task: str = Field(min_length=1)
    n: int = Field(ge=2)
    q05: float = Field(ge=-1.0, le=10.0)
    median: float = Field(ge=-1.0, le=10.0)
    q95: float = Field(ge=-1.0, le=10.0)
    params_range: tuple[float, float]
    context_range: tuple[float, float]
    cases: tuple[str, ...]


class _Table(_Strict):
    """What a residual table says of itself: its statistic, the set and files it comes from, and when."""

    schema_version: int = Field(1, alias="schema")
    statistic: str
    set: str
    provenance: str
    files: tuple[str, ...]
    date: str


_T = TypeVar("_T", bound=_Table)


class Residuals(_Table):
    """The residual table (``estimate/data/residuals.json``), with where it comes from."""

    kinds: tuple[ResidualKind, ...]
    source: str | None = None
    """What the table is, as a basis says it: None for the shipped table, ``calibration #7`` for the held-out
    residuals of a stored calibration (set when the calibration is read back)."""

    @property
    def label(self) -> str:
        return self.source or SHIPPED

    def kind(self, name: str) -> ResidualKind | None:
        return next((k for k in self.kinds if k.kind == name), None)


class ServingResidualKind(_Strict):
    """Residuals r = measured / predicted - 1 of one serving figure over blind published rows, as predicted."""

    figure: str = Field(pattern=r"^(tpot|ttft)$")
    loop: str = Field(pattern=r"^(closed|open)$")
    n: int = Field(ge=2)
    q05: float = Field(ge=-1.0)
    median: float = Field(ge=-1.0)
    q95: float = Field(ge=-1.0)


class ServingResiduals(_Table):
    """The serving residual table (``estimate/data/serving_residuals.json``; module docstring, rule 6)."""

    kinds: tuple[ServingResidualKind, ...]

    def kind(self, figure: str, loop: str) -> ServingResidualKind | None:
        return next((k for k in self.kinds if k.figure == figure and k.loop == loop), None)


def _validated(table: type[_T], data: Any, label: str, script: str) -> _T:
    """``data`` (a JSON object) as a ``table``; every problem is a :class:`DataFileError` naming the field and the
    script that regenerates the file."""
    try:
        return table.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise DataFileError(f"{label}: {where}: {err['msg']}", f"regenerate it: python benchmarks/{script}") from e


def parse_residuals(data: Any, label: str = "residuals") -> Residuals:
    """Validate a residual table (a JSON object); every problem is a :class:`DataFileError` naming the field."""
    return _validated(Residuals, data, label, "residual_table.py")


@functools.cache
def default_residuals() -> Residuals:
    """The shipped residual table (``gpumatch/estimate/data/residuals.json``)."""
    import json

    text = (resources.files("gpumatch.estimate") / "data" / "residuals.json").read_text(encoding="utf-8")
    return parse_residuals(json.loads(text), "estimate/data/residuals.json")


@functools.cache
def default_serving_residuals() -> ServingResiduals:
    """The shipped serving residual table (``gpumatch/estimate/data/serving_residuals.json``)."""
    import json

    text = (resources.files("gpumatch.estimate") / "data" / "serving_residuals.json").read_text(encoding="utf-8")
    return _validated(ServingResiduals, json.loads(text), "estimate/data/serving_residuals.json",
                      "serving_residual_table.py")


def small_sample_factor(n: int) -> float:
    """How much wider a 90% band from ``n`` residuals is than from many: t(0.95, n-1)·√(1 + 1/n) / z(0.95).

    The Student-t prediction interval for one new case from ``n`` normal samples, over the normal one; decreasing
    in ``n`` toward 1 (1.22 at n=8, 1.07 at n=30)."""
    if n < 2:
        return math.inf
    t = _T95[n - 2] if n - 1 <= len(_T95) else _Z95 + (_T95[-1] - _Z95) * 30.0 / (n - 1)
    return t * math.sqrt(1.0 + 1.0 / n) / _Z95


@dataclass(frozen=True)
class Band:
    """A relative interval: the figure × (1 + low) .. × (1 + high), ``low < 0 < high``; ``basis`` says why."""

    low: float
    high: float
    basis: str

    def apply(self, x: float) -> tuple[float, float]:
        return x * (1.0 + self.low), x * (1.0 + self.high)

    def inverse(self) -> Band:
        """The band of 1/figure (a throughput from a time)."""
        return Band(1.0 / (1.0 + self.high) - 1.0, 1.0 / (1.0 + self.low) - 1.0, self.basis)

    @property
    def text(self) -> str:
        return f"{self.low * 100:+.0f}%/{self.high * 100:+.0f}%"


@dataclass(frozen=True)
class Where:
    """What an estimate is, for matching it to a measured kind: card (catalog name), weight precision, task,
    model parameters, context tokens (training: sequence; inference: prompt + generated) and GPU count."""

    card: str
    precision: str
    task: str
    params: float
    context: float
    count: int
    loop: str = "closed"
    """Task ``serve``: ``closed`` (clients at a concurrency, a replayed benchmark) or ``open`` (a request rate)."""


def _octaves(x: float, lo: float, hi: float) -> float:
    if x <= 0 or lo <= 0:
        return 0.0
    return max(0.0, math.log2(lo / x), math.log2(x / hi))


def _widenings(k: ResidualKind, kind: str, where: Where, other_card_floor: float
               ) -> tuple[float, float, list[str]]:
    """(factor, floor, reasons) for what ``where`` has that kind ``k`` never measured."""
    factor, floor, why = 1.0, 0.0, []
    octaves = _octaves(where.params, *k.params_range) + _octaves(where.context, *k.context_range)
    if octaves > 0:
        factor *= min(MAX_EXTRAPOLATION, 1.0 + EXTRAPOLATION_PER_OCTAVE * octaves)
        why.append(f"{octaves:.1f} octaves beyond the measured size/context" if octaves >= 0.05 else
                   "just beyond the measured size/context (under 0.05 octave)")
    unmeasured = []
    if where.precision != k.precision and not {where.precision, k.precision} <= set(MEASURED_PRECISIONS):
        unmeasured.append(f"precision {where.precision} never measured")
    if where.task != k.task:
        unmeasured.append(f"task {where.task} never measured")
    if where.count > 1:
        unmeasured.append(f"{where.count} GPUs never measured")
    for reason in unmeasured:
        factor *= UNMEASURED_FACTOR
        floor = max(floor, UNMEASURED_FLOOR)
        why.append(reason)
    if where.card != k.card and k.kind == "memory":
        factor *= UNMEASURED_FACTOR  # the bytes a model holds do not depend on the card; its runtime may
        why.insert(0, f"card never measured (memory measured on {k.card})")
    elif where.card != k.card:
        floor = max(floor, other_card_floor)
        why.insert(0, f"card never measured (efficiencies from {k.card})")
    return factor, floor, why


def band(residuals: Residuals, kind: str, where: Where, other_card_floor: float = 0.30, note: str = "") -> Band:
    """The relative band of a figure of operator class ``kind`` for an estimate at ``where`` (module docstring);
    ``note`` is appended to its basis."""
    k = residuals.kind(kind)
    if k is None:
        f = max(other_card_floor, UNMEASURED_FLOOR)
        return Band(-f, f, f"extrapolated: {kind} never measured, ±{f * 100:.0f}%{note}")
    base_floor = MEMORY_FLOOR if kind == "memory" else TIME_FLOOR
    w = small_sample_factor(k.n)
    factor, floor, why = _widenings(k, kind, where, other_card_floor)
    low = k.median - (k.median - k.q05) * w * factor
    high = k.median + (k.q95 - k.median) * w * factor
    floor = max(floor, base_floor)
    low, high = max(min(low, -floor), -0.9), max(high, floor)
    b = Band(low, high, "")
    head = (f"{SHIPPED}: {k.card} {k.kind}, n={k.n}" if residuals.source is None
            else f"residuals of {residuals.source}, held-out n={k.n}: {k.card} {k.kind}")
    basis = f"{head}, {b.text}" if not why else f"extrapolated from {head}: {'; '.join(why)}, {b.text}"
    return Band(low, high, basis + note)


def _unused(calibrated: Residuals, kind: str, card: str) -> str | None:
    """Why the calibration's residuals of ``kind`` do not set the band for ``card`` (None: they do)."""
    k = calibrated.kind(kind)
    if k is None:
        return f"no held-out {kind} case"
    if k.card != card:
        return f"fitted on {k.card}"
    if k.n < MIN_CALIBRATION_N:
        return f"n={k.n} < {MIN_CALIBRATION_N} held-out {kind} cases"
    return None


def kind_band(kind: str, where: Where, shipped: Residuals, calibrated: Residuals | None = None,
              other_card_floor: float = 0.30) -> Band:
    """The band of operator class ``kind``: from the calibration's residuals when they apply (same card, at least
    :data:`MIN_CALIBRATION_N` held-out cases), else from ``shipped``, saying why (module docstring, rule 4)."""
    if calibrated is None:
        return band(shipped, kind, where, other_card_floor)
    why = _unused(calibrated, kind, where.card)
    if why is None:
        return band(calibrated, kind, where, other_card_floor)
    return band(shipped, kind, where, other_card_floor, note=f"; {calibrated.label} not used: {why}")


def serving_band(table: ServingResiduals, figure: str, loop: str) -> Band | None:
    """The band of a serving estimate's mean ``figure`` (``tpot`` or ``ttft``) from the blind published rows of
    its loop (module docstring, rule 6): their 5th..95th percentile of measured / predicted - 1, stretched about
    the median by :func:`small_sample_factor`; None when the table has no such rows."""
    k = table.kind(figure, loop)
    if k is None:
        return None
    w = small_sample_factor(k.n)
    low = max(min(k.median - (k.median - k.q05) * w, -TIME_FLOOR), -0.9)
    high = max(k.median + (k.q95 - k.median) * w, TIME_FLOOR)
    b = Band(low, high, "")
    return Band(low, high, f"blind published serving rows ({loop} loop, n={k.n}, {len(table.files)} batches, as "
                           f"predicted; median {k.median * 100:+.0f}%): measured/predicted {b.text}")


def _e2e_band(metrics: dict[str, float], pre: Band, dec: Band) -> Band:
    """TTFT + decode steps: each part with its own band, added (the bands move together, the wider case)."""
    e2e, ttft = metrics.get("e2e_s", math.nan), metrics.get("ttft_s", math.nan)
    if not (math.isfinite(e2e) and math.isfinite(ttft)) or e2e <= 0:
        return dec
    share = min(1.0, max(0.0, ttft / e2e))
    b = Band(share * pre.low + (1 - share) * dec.low, share * pre.high + (1 - share) * dec.high, "")
    return Band(b.low, b.high, f"the TTFT band ({share * 100:.0f}% of the time) and the decode band, {b.text}")


def figure_bands(metrics: dict[str, float], where: Where, training: bool, residuals: Residuals | None = None,
                 other_card_floor: float = 0.30, calibrated: Residuals | None = None,
                 serving: ServingResiduals | None = None) -> dict[str, Band]:
    """The band of every time, memory, throughput, energy and cost figure of an estimate's ``metrics``;
    ``calibrated``: the residuals of the calibration in use, taken per kind where they apply (:func:`kind_band`);
    ``serving``: the serving residual table that sets a serving estimate's TTFT and TPOT (rule 6; None: none)."""
    res = residuals or default_residuals()
    by_kind = {kind: kind_band(kind, where, res, calibrated, other_card_floor)
               for kind in ("decode", "prefill", "train-step", "memory")}
    out = {name: by_kind[kind] for name, kind in FIGURE_KIND.items() if name in metrics}
    dec, ttft = by_kind["decode"], by_kind["prefill"]
    if where.task == "serve" and serving is not None:  # rule 6, unless the card's own calibration applies (rule 4)
        if calibrated is None or _unused(calibrated, "decode", where.card) is not None:
            dec = serving_band(serving, "tpot", where.loop) or dec
            out.update({name: dec for name in ("tpot_s", "itl_s") if name in metrics})
        if (calibrated is None or _unused(calibrated, "prefill", where.card) is not None) and "ttft_s" in metrics:
            ttft = serving_band(serving, "ttft", where.loop) or ttft
            out["ttft_s"] = ttft
    if training:
        run = by_kind["train-step"]
    else:
        run = _e2e_band(metrics, ttft, dec)
        if "e2e_s" in metrics:
            out["e2e_s"] = run
        if "decode_tokens_per_s" in metrics:
            out["decode_tokens_per_s"] = dec.inverse()
        if "prefill_tokens_per_s" in metrics:
            out["prefill_tokens_per_s"] = by_kind["prefill"].inverse()
    out.update({name: run.inverse() for name in INVERSE if name in metrics})
    out.update({name: run for name in PROPORTIONAL if name in metrics})
    return out


def intervals(metrics: dict[str, float], bands: dict[str, Band]) -> dict[str, tuple[float, float]]:
    """``{figure: (low, high)}`` in the figure's SI unit, for the finite figures that have a band."""
    out = {}
    for name, b in bands.items():
        x = metrics.get(name, math.nan)
        if math.isfinite(x):
            out[name] = b.apply(x)
    return out


def where_of(card: str, task: str, precision: str, params: float, seq: float | None, prompt: float | None,
             gen: float | None, count: int, open_loop: bool = False) -> Where:
    """The :class:`Where` of a request: context = the training sequence, else prompt + generated tokens;
    ``open_loop``: a serving estimate at a request rate."""
    context = float(seq) if seq is not None else float(prompt or 0) + float(gen or 0)
    return Where(card=card, precision=precision, task=task, params=float(params), context=context, count=int(count),
                 loop="open" if open_loop else "closed")


def estimate_intervals(metrics: dict[str, float], where: Where, training: bool, extrapolated_error_fraction: float,
                       residuals: Residuals | None = None, calibrated: Residuals | None = None
                       ) -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """(``{figure: (low, high)}``, ``{figure: basis}``) for an estimate's metrics (SI; see the module docstring);
    ``calibrated``: the residuals the calibration in use carries (rule 4)."""
    bands = figure_bands(metrics, where, training, residuals, extrapolated_error_fraction, calibrated,
                         default_serving_residuals())
    return intervals(metrics, bands), {k: b.basis for k, b in bands.items()}
