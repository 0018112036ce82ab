"""Estimates and plans under the newest stored calibration of each card, never another card's.

``gpumatch estimate`` and ``gpumatch plan`` call these instead of :func:`gpumatch.estimate.query.run_estimate` and
:func:`gpumatch.plan.query.run_plan`: they look up the newest calibration ``gpumatch calibrate`` stored for the
card (:func:`gpumatch.calibrate.saved.newest`) and pass it as a value; the estimate's ``basis`` then reads
``calibrated from runs 1-2 on H200 GPU-071f8961...`` and its time uncertainty is the calibration's held-out error.

Rules:

- ``--calibration FILE`` wins; with ``--no-calibration`` the shipped defaults apply; a store file that does not
  exist (a fresh machine, no GPU anywhere) means the defaults, silently: planning needs no store; a store that
  cannot be read means the defaults with a note.
- A calibration applies to the card model it was fitted on only. ``estimate`` with several ``--gpu`` estimates
  each card under its own. A ``plan`` ranks every card under one Calibration, so a stored one applies only when the
  plan is limited (``--gpu``) to the one card it was fitted on; otherwise a note says which stored calibrations
  were not applied and how to use them.
- A calibration file fitted on another card than the one estimated is applied as asked, with a note saying so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpumatch.estimate import Calibration
from gpumatch.estimate.query import EstimateQuery, EstimateRun, distinct_gpus, run_estimate
from gpumatch.plan.query import PlanQuery, PlanRun, plan_request, run_plan


def _card(name: str) -> str:
    from gpumatch.catalog import get_gpu

    return get_gpu(name).name


def stored_for(card: str, store: Path | None) -> tuple[Calibration | None, tuple[str, ...]]:
    """The newest stored calibration of catalog card ``card`` (None: none, or no store yet) and a note when the
    store could not be read (the defaults then apply: an estimate never fails on the store)."""
    from gpumatch.calibrate.saved import newest
    from gpumatch.errors import StoreError

    try:
        found = newest(store, card)
    except StoreError as e:
        return None, (f"results store not read for calibrations ({e.message}): shipped defaults",)
    return (found.calibration if found else None), ()


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


def plan_calibrated(query: PlanQuery, progress: object = None, store: Path | None = None,
                    use_store: bool = True) -> PlanRun:
    """:func:`run_plan` under the stored calibration of the one card a plan is limited to (module docstring)."""
    req, _ = plan_request(query)
    allowed = sorted(set(req.gpus_allow or ()))
    cal = None
    notes: tuple[str, ...] = ()
    if use_store and len(allowed) == 1:
        cal, notes = stored_for(allowed[0], store)
    elif use_store:
        notes = _unapplied(store, allowed)
    run = run_plan(query, progress, calibration=cal)  # type: ignore[arg-type]
    return replace(run, notes=run.notes + notes)


def _unapplied(store: Path | None, allowed: list[str]) -> tuple[str, ...]:
    """A note naming the stored calibrations a multi-card plan leaves out."""
    from gpumatch.calibrate.saved import NAME_PREFIX
    from gpumatch.store.locate import locate_store

    path, _ = locate_store(store)
    if not path.exists():
        return ()
    from gpumatch.store import open_existing_store

    with open_existing_store(path) as st:
        names = sorted({r.name.removeprefix(NAME_PREFIX) for r in st.calibrations() if r.name.startswith(NAME_PREFIX)})
    names = [n for n in names if not allowed or n in allowed]
    if not names:
        return ()
    return (f"stored calibrations of {', '.join(names)} not applied: a plan ranks every card on one set of "
            f"efficiencies; 'gpumatch plan ... --gpu NAME' with one card uses its calibration",)
