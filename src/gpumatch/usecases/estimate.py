"""``gpumatch estimate``: the estimate of each card under its newest stored calibration, never another card's
(the rules are :mod:`gpumatch.usecases.calibrated`'s)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpumatch.estimate.query import EstimateQuery, EstimateRun, distinct_gpus, run_estimate
from gpumatch.usecases.calibrated import stored_for


def _card(name: str) -> str:
    from gpumatch.catalog import get_gpu

    return get_gpu(name).name


def _file_note(query: EstimateQuery, cards: list[str]) -> tuple[str, ...]:
    from gpumatch.estimate.calibration import load_calibration_file

    if not query.calibration:
        return ()
    cal = load_calibration_file(query.calibration)
    other = [c for c in cards if cal.fitted_on and c not in cal.fitted_on]
    if not other:
        return ()
    return (f"calibration {query.calibration} was fitted on {', '.join(cal.fitted_on)}, applied to "
            f"{', '.join(other)} as asked (efficiencies differ between card models)",)


def estimate_calibrated(query: EstimateQuery, store: Path | None = None, use_store: bool = True) -> EstimateRun:
    """:func:`run_estimate` with each card's newest stored calibration (module docstring)."""
    cards = [_card(g) for g in distinct_gpus(query.gpus)]
    notes = _file_note(query, cards)
    if query.calibration or not use_store:
        run = run_estimate(query)
        return replace(run, notes=run.notes + notes)
    found = {c: stored_for(c, store) for c in cards}
    notes += tuple(dict.fromkeys(n for _, ns in found.values() for n in ns))
    if not any(cal for cal, _ in found.values()):
        run = run_estimate(query)
        return replace(run, notes=run.notes + notes)
    runs = [run_estimate(replace(query, gpus=(g,), calibration_value=found[c][0]))
            for g, c in zip(distinct_gpus(query.gpus), cards, strict=True)]
    first = runs[0]
    return EstimateRun(tuple(e for r in runs for e in r.estimates), first.curve, first.with_curve,
                       first.notes + notes)
