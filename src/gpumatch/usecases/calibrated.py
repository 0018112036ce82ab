"""Estimates and plans under the newest stored calibration of each card, never another card's.

``gpumatch estimate`` and ``gpumatch plan`` call :func:`gpumatch.usecases.estimate.estimate_calibrated` and
:func:`gpumatch.usecases.plan.plan_calibrated` instead of :func:`gpumatch.estimate.query.run_estimate` and
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

from pathlib import Path

from gpumatch.estimate import Calibration


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
