"""The calibration loop as a value: calibrate.fit returns a Calibration with its provenance, which the estimators
read back as JSON; the measured cases keep their fit / held-out split."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from gpumatch.calibrate.cases import load_cases
from gpumatch.calibrate.compare import predict
from gpumatch.calibrate.fit import BOUNDS, fit_calibration
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration
from gpumatch.estimate.calibration import load_calibration_file

DATA = Path(__file__).resolve().parents[2] / "data" / "measurements"


def test_cases_split_into_fit_and_held_out() -> None:
    cases = load_cases(DATA)
    fit = [c for c in cases if c.fit]
    assert {c.source for c in fit} == {"2026-12-02-h200-decode.json", "2026-12-02-h200-prefill.json",
                                       "2026-12-02-h200-train.json"}
    assert (len(fit), len(cases)) == (29, 243)  # held-out of 2026-12-04: 21 long-context, 16 training, 16 LoRA/QLoRA


def test_fit_returns_a_calibrated_value_with_provenance(tmp_path: Path) -> None:
    fit = fit_calibration(DATA, ["gemm_efficiency_max"], rounds=1, kinds=["prefill"], date=dt.date(2026, 12, 4))
    cal = fit.calibration
    assert cal.basis == "calibrated" and cal.fitted_on == ("H200 SXM 141GB",)
    assert cal.provenance.startswith("fitted 2026-12-04 by gpumatch.calibrate.fit on one H200 SXM 141GB: "
                                     "gemm_efficiency_max (1 rounds), on 3 fit cases (prefill) of "
                                     "2026-12-02-h200-prefill.json")
    assert [c.kind for c in fit.fit_cases] == ["prefill"] * 3
    before, after = fit.errors(fit.start)[0], fit.errors()[0]
    assert after.max_abs <= before.max_abs
    # every other field is the start's
    assert {k: v for k, v in cal.to_dict().items() if k not in ("gemm_efficiency_max", "basis", "provenance",
            "fitted_on")} == {k: v for k, v in Calibration().to_dict().items() if k not in (
            "gemm_efficiency_max", "basis", "provenance", "fitted_on")}
    # the value goes back to the estimators as JSON, unchanged
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(cal.to_dict()))
    back = load_calibration_file(path)
    assert back.gemm_efficiency_max == cal.gemm_efficiency_max and back.fitted_on == cal.fitted_on
    case = fit.fit_cases[0]
    assert predict(case, back) == predict(case, cal)


def test_fit_refuses_unknown_fields_and_empty_directories(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot fit 'gemm_eff'"):
        fit_calibration(DATA, ["gemm_eff"])
    with pytest.raises(InputError, match="no fit cases"):
        fit_calibration(tmp_path, list(BOUNDS)[:1])
