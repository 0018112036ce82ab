"""The ``serving`` class: an engine profile's per-pass costs fitted to ``bench serve`` runs, held out by load level.

A stored serve run (``gpumatch bench serve`` against a server, or ``gpumatch bench import`` of its ``--out``
file) holds one summary per load level (its ``level`` events, as :mod:`gpumatch.usecases.stored_serving` reads them
back): a closed-loop concurrency ``C`` or an open-loop Poisson rate ``λ``, with the measured mean TPOT and output
throughput (vLLM's definitions, docs/serve.md) and the engine profile it was predicted with (``config.engine``).
Each level is predicted as the load generator predicts it (:func:`gpumatch.loadgen.predict.predict_level`):
:func:`gpumatch.estimate.estimate` with ``task="serve"``, the engine, the nominal prompt and output lengths, and
``concurrency=C, num_prompts=n, length_low`` (the closed-loop replay) or ``request_rate=λ`` (the open-loop steady
state).

Fitted fields: the profile's ``host_pass_s`` and ``host_seq_s`` (``estimate/data/engines.toml``): a pass costs
``t_gpu + host_pass_s + host_seq_s × running sequences`` (docs/estimators.md, "Serving engines at steady state").
They are the profile's only per-pass terms, so fitted they take every per-pass cost the estimator does not
model for that server (its kernels as well as its host work); :class:`gpumatch.estimate.calibration.ServingFit`
carries them, and :func:`gpumatch.estimate.engine_profiles.profile_under` applies them to that engine on the card.

Fit on the closed-loop levels only: their estimate replays the same finite benchmark pass by pass (the same
requests, clients and lengths), so predicted and measured are the same quantity. An open-loop estimate is the
long-run Poisson steady state, while the measurement is a run of a few dozen requests; above the server's capacity
(the 32/s level of 2026-12-05 completed 19.7 requests/s) the steady state does not exist and the estimate says so
(TTFT without a mean) while the finite run still reports a TPOT. So open-loop levels are never fitted on; they are
scored before and after as a second, fully held-out set (class ``serving-open``).

Objective: least squares of log(predicted / measured) over the mean TPOT and output throughput of the closed-loop
levels, by ``scipy.optimize.least_squares`` within :data:`BOUNDS` from the profile's values.

Held out by load level: each closed-loop level in turn is left out, the fields refitted on the others and the level
predicted (leave-one-level-out); *before* is the shipped profile under the shipped defaults (what the run
recorded). Levels the client self-test flagged as client-bound are left out (their latencies are the client's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.estimate import Calibration
from gpumatch.estimate.calibration import ServingFit

BOUNDS: dict[str, tuple[float, float]] = {"host_pass_s": (0.0, 0.05), "host_seq_s": (0.0, 1e-3)}
"""Search ranges, seconds: up to 50 ms per pass and 1 ms per running sequence per pass (the shipped profile has
30 µs and 12.1 µs; a pass of an 8B model on an H200 takes 5-60 ms)."""
FIGURES = {"tpot_s": "mean TPOT", "output_tokens_per_s": "output throughput"}


@dataclass(frozen=True)
class ServeLevel:
    """One measured load level of a stored serve run, with what predicting it needs."""

    run_id: int
    label: str
    engine: str
    model: str
    mode: str
    """``concurrency`` (closed loop) or ``rate`` (open loop)."""
    value: float
    """Clients (closed loop) or requests per second (open loop)."""
    num_prompts: int
    prompt: int
    gen: int
    range_ratio: float
    measured: dict[str, float]
    """``tpot_s`` (s) and, closed loop, ``output_tokens_per_s``."""
    date: str = ""
    """The run's start (UTC, ISO 8601)."""

    def options(self) -> dict[str, Any]:
        """The :func:`gpumatch.estimate.estimate` keywords of this level (module docstring)."""
        opts: dict[str, Any] = {"task": "serve", "engine": self.engine, "prompt": self.prompt, "gen": self.gen}
        if self.mode == "concurrency":
            opts.update(concurrency=int(self.value), num_prompts=self.num_prompts, length_low=self.range_ratio)
        else:
            opts.update(request_rate=self.value)
        return opts


def _level(run_id: int, config: dict[str, Any], lv: dict[str, Any], date: str) -> ServeLevel | None:
    tpot_ms = lv.get("mean_tpot_ms")
    if lv.get("client_bound") or not isinstance(tpot_ms, int | float) or not tpot_ms > 0:
        return None
    mode = str(lv.get("mode"))
    value = lv.get("max_concurrency") if mode == "concurrency" else lv.get("request_rate")
    if not isinstance(value, int | float) or not value > 0:
        return None
    measured = {"tpot_s": float(tpot_ms) / 1000.0}
    tput = lv.get("output_throughput")
    if mode == "concurrency" and isinstance(tput, int | float) and tput > 0:
        measured["output_tokens_per_s"] = float(tput)
    n = int(lv.get("completed") or 0) + int(lv.get("failed") or 0) + int(lv.get("not_sent") or 0)
    return ServeLevel(run_id=run_id, label=str(lv.get("label")), engine=str(config.get("engine") or "vllm"),
                      model=str(config.get("arch") or config.get("model")), mode=mode, value=float(value),
                      num_prompts=n, prompt=int(config["prompt_tokens"]), gen=int(config["output_tokens"]),
                      range_ratio=float(config.get("range_ratio") or 1.0), measured=measured, date=date)


def load_levels(store: Path | None, card: str, run_ids: Sequence[int] = ()) -> list[ServeLevel]:
    """The load levels of the completed serve runs of ``card`` (catalog name) in the store (those of ``run_ids``
    when given; ids of other kinds are ignored here); none when the store has no serve run of the card."""
    from gpumatch.catalog import catalog_name
    from gpumatch.store import open_existing_store

    out: list[ServeLevel] = []
    with open_existing_store(store) as st:
        records = [r for r in st.runs("serve", limit=100_000) if r.status == "completed"
                   and (not run_ids or r.run_id in set(run_ids))]
        for r in sorted(records, key=lambda r: r.run_id):
            name = r.manifest.get("gpu.name") or (r.config or {}).get("gpu")
            if catalog_name(name) != card:
                continue
            config = dict(r.config or {})
            date = str((config.get("imported") or {}).get("started_at") or r.started_at)
            levels = [dict(e["data"]) for e in st.export_run(r.run_id)["events"] if e["kind"] == "level"]
            out += [x for lv in levels if (x := _level(r.run_id, config, lv, date)) is not None]
    return out


def predict(level: ServeLevel, cal: Calibration, card: str) -> dict[str, float]:
    """The level's predicted figures (``tpot_s``, ``output_tokens_per_s``) under ``cal`` on ``card``."""
    from gpumatch.estimate import Request, estimate

    est = estimate(level.model, card, Request(**level.options()), calibration=cal)
    return {k: float(est.metrics[k]) for k in FIGURES if k in est.metrics}


def _errors(levels: Sequence[ServeLevel], cal: Calibration, card: str) -> list[tuple[str, float, float]]:
    """(figure, predicted, measured) of every measured figure of ``levels``."""
    out = []
    for lv in levels:
        p = predict(lv, cal, card)
        out += [(k, p.get(k, math.nan), m) for k, m in lv.measured.items()]
    return out


def with_costs(cal: Calibration, engine: str, host_pass_s: float, host_seq_s: float, source: str = ""
               ) -> Calibration:
    """``cal`` with the engine's per-pass costs set (:class:`ServingFit`)."""
    return replace(cal, serving=ServingFit(engine, host_pass_s, host_seq_s, source))


def fit_costs(levels: Sequence[ServeLevel], cal: Calibration, card: str) -> tuple[float, float]:
    """(host_pass_s, host_seq_s) minimizing the log errors of ``levels`` (module docstring) under ``cal``
    (``cal.fitted_on`` must name ``card`` for the costs to apply)."""
    from scipy.optimize import least_squares

    from gpumatch.estimate.engine_profiles import engine_profile

    engine = levels[0].engine
    profile = engine_profile(engine)
    scale = (1e-3, 1e-6)  # search in ms and µs: both O(1)
    lo = [BOUNDS[k][0] / s for k, s in zip(BOUNDS, scale, strict=True)]
    hi = [BOUNDS[k][1] / s for k, s in zip(BOUNDS, scale, strict=True)]
    x0 = [min(max(profile.host_pass_s / scale[0], lo[0]), hi[0]),
          min(max(profile.host_seq_s / scale[1], lo[1]), hi[1])]

    def residuals(x: Any) -> list[float]:
        trial = with_costs(cal, engine, float(x[0]) * scale[0], float(x[1]) * scale[1])
        return [math.log(p / m) if p > 0 and m > 0 else 10.0 for _, p, m in _errors(levels, trial, card)]

    res = least_squares(residuals, x0, bounds=(lo, hi), diff_step=1e-3, x_scale=[1.0, 10.0], max_nfev=60)
    return float(res.x[0]) * scale[0], float(res.x[1]) * scale[1]


@dataclass(frozen=True)
class ServingResult:
    """The serving class: the fitted costs (on every level), and per level the errors before and held out."""

    engine: str
    host_pass_s: float
    host_seq_s: float
    levels: tuple[ServeLevel, ...]
    rows: tuple[dict[str, Any], ...]
    """Per level and figure: measured, predicted before, predicted held out (fitted without the level)."""

    def errors(self, which: str, cls: str = "serving", figure: str | None = None) -> list[float]:
        """|predicted / measured - 1| of ``which`` (``before`` / ``held``) over the rows of class ``cls``
        (``serving``: closed loop, ``serving-open``), of one figure or all."""
        return [abs(r[which] / r["measured"] - 1.0) for r in self.rows
                if r["class"] == cls and (figure is None or r["figure"] == figure)]


def _rows(lv: ServeLevel, cls: str, before: dict[str, float], held: dict[str, float]) -> list[dict[str, Any]]:
    return [{"run_id": lv.run_id, "level": lv.label, "class": cls, "figure": k, "measured": m,
             "before": before.get(k, math.nan), "held": held.get(k, math.nan)} for k, m in lv.measured.items()]


def fit_serving(levels: Sequence[ServeLevel], cal: Calibration, card: str) -> ServingResult:
    """Fit the engine's per-pass costs on the closed-loop ``levels`` and score them leave-one-level-out, and the
    open-loop levels under the fit on all closed-loop levels (module docstring). Levels of one engine only and at
    least two closed-loop levels (InputError otherwise)."""
    engines = sorted({lv.engine for lv in levels})
    if len(engines) != 1:
        raise InputError(f"the serve runs used {len(engines)} engine profiles ({', '.join(engines)})",
                         "a calibration fits one engine: give the serve runs of one engine with --runs")
    closed = [lv for lv in levels if lv.mode == "concurrency"]
    if len({lv.label for lv in closed}) < 2:
        raise InputError("fewer than two closed-loop load levels: none can be held out",
                         "measure a concurrency ladder: gpumatch bench serve --concurrency 1,4,16")
    engine = engines[0]
    cal = replace(cal, fitted_on=(card,))
    before = Calibration(fitted_on=(card,))
    rows: list[dict[str, Any]] = []
    for label in dict.fromkeys(lv.label for lv in closed):
        rest = [lv for lv in closed if lv.label != label]
        held_cal = with_costs(cal, engine, *fit_costs(rest, cal, card))
        for lv in (x for x in closed if x.label == label):
            rows += _rows(lv, "serving", predict(lv, before, card), predict(lv, held_cal, card))
    host_pass, host_seq = fit_costs(closed, cal, card)
    fitted = with_costs(cal, engine, host_pass, host_seq)
    for lv in (x for x in levels if x.mode != "concurrency"):
        rows += _rows(lv, "serving-open", predict(lv, before, card), predict(lv, fitted, card))
    return ServingResult(engine, host_pass, host_seq, tuple(levels), tuple(rows))
