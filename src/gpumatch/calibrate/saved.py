"""Calibrations kept in the results store: ``gpumatch calibrate`` as one call (:func:`run_calibrate`: fit, store,
write JSON), and the newest calibration of a card read back (:func:`newest`) for ``estimate`` and ``plan``.

A calibration is stored under the name ``calibration:<catalog card>`` with the Calibration's fields, its basis
text, the fitted curves and the per-class scores; its provenance names the runs, card UUIDs and dates
(:attr:`gpumatch.calibrate.stored.StoredFit.provenance`). One read back is refused when the record's ``fitted_on``
names another card, so a calibration never silently applies to another card model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpumatch.calibrate.stored import StoredFit, calibrate_runs, export_fields
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration

NAME_PREFIX = "calibration:"


def export_json(fit: StoredFit) -> dict[str, Any]:
    """What ``--out`` writes: ``{"calibration": {fields}}``, the form ``gpumatch estimate --calibration`` reads."""
    return {"calibration": export_fields(fit.calibration)}


def save(store: Path | None, fit: StoredFit) -> int:
    """Store the fit as calibration ``calibration:<card>`` (values: the Calibration fields, its basis text, the
    curves and the class scores; provenance as :attr:`StoredFit.provenance`). Returns its calibration id."""
    from gpumatch.store import open_store
    from gpumatch.store.locate import locate_store

    path, _ = locate_store(store)
    values = {"calibration": export_fields(fit.calibration), "basis": fit.calibration.basis,
              "curves": {k: c.to_dict() for k, c in fit.curves.items()},
              "classes": [s.to_dict() for s in fit.scores]}
    with open_store(path, mode="write") as st:
        return int(st.add_calibration(NAME_PREFIX + fit.card, values, fit.provenance,
                                      run_ids=list(fit.provenance["run_ids"])))


@dataclass(frozen=True)
class Found:
    """The newest stored calibration of a card: its id, the value, and the record's values and provenance."""

    calibration_id: int
    calibration: Calibration
    values: dict[str, Any]
    provenance: dict[str, Any]


def newest(store: Path | None, card: str) -> Found | None:
    """The newest calibration stored for catalog card ``card``, or None: no store file (yet), or none for that
    card. A record whose ``fitted_on`` is another card is refused (StoreError)."""
    from gpumatch.errors import StoreError
    from gpumatch.store import open_existing_store
    from gpumatch.store.locate import locate_store

    path, _ = locate_store(store)
    if not path.exists():
        return None
    with open_existing_store(path) as st:
        rec = st.latest_calibration(NAME_PREFIX + card)
    if rec is None:
        return None
    fields = dict(rec.values.get("calibration") or {})
    cal = Calibration.from_dict(fields)
    if tuple(cal.fitted_on) != (card,):
        raise StoreError(f"stored calibration {rec.calibration_id} is named for {card} but fitted on "
                         f"{', '.join(cal.fitted_on) or 'no card'}", hint="refit it: gpumatch calibrate --gpu CARD")
    basis = str(rec.values.get("basis") or cal.basis)
    provenance = f"stored calibration {rec.calibration_id}: {cal.provenance.removeprefix(basis + '; ')}"
    held = cal.residuals.model_copy(update={"source": f"calibration #{rec.calibration_id}"}) if cal.residuals else None
    return Found(rec.calibration_id, replace(cal, basis=basis, provenance=provenance, residuals=held),
                 dict(rec.values), dict(rec.provenance))


def run_calibrate(store: Path | None, run_ids: Sequence[int] = (), gpu: str | None = None, *, keep: bool = True,
                  out: Path | None = None, force: bool = False) -> dict[str, Any]:
    """``gpumatch calibrate``: fit (:func:`calibrate_runs`), store it unless ``keep`` is False, write the JSON of
    :func:`export_json` to ``out`` when given (an existing file only with ``force``). The fit as a dict with
    ``calibration_id`` (None when not stored) and ``out``."""
    if out is not None:
        if out.exists() and not force:
            raise InputError(f"{out} exists", "give another --out or add --force to overwrite it")
        if not out.parent.is_dir():
            raise InputError(f"no folder {out.parent}", "create it first")
    fit = calibrate_runs(store, run_ids, gpu)
    cid = save(store, fit) if keep else None
    if out is not None:
        import json

        from gpumatch.outfiles import write_file

        write_file(out, json.dumps(export_json(fit), indent=1) + "\n", force=force,
                   hint="give another --out or add --force to overwrite it")
    return {**fit.to_dict(), "calibration_id": cid, "out": str(out) if out else None}
