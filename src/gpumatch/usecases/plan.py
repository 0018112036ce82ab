"""``gpumatch plan``: the plan under the stored calibration of the one card it is limited to (the rules are
:mod:`gpumatch.usecases.calibrated`'s)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpumatch.plan.query import PlanQuery, PlanRun, plan_request, run_plan
from gpumatch.usecases.calibrated import stored_for


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
