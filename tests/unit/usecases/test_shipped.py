"""The shipped calibration defaults are the product's own refit of the committed bench exports (issue 26, item 3).

bench export files -> ``bench import`` (usecases.import_bench) -> a temporary store -> ``gpumatch calibrate``
(calibrate.stored.calibrate_runs) -> Calibration value -> ``estimate/data/calibration.json`` -> the defaults.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpumatch.errors import InputError
from gpumatch.estimate import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.calibration import shipped_fit_document
from gpumatch.usecases.shipped import FIELDS, check_shipped, refit_from, refit_shipped

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def shipped() -> dict:  # type: ignore[type-arg]
    return shipped_fit_document()


def test_the_shipped_file_equals_a_refit_of_its_committed_inputs(shipped: dict) -> None:  # type: ignore[type-arg]
    refit = refit_from(shipped, ROOT)
    assert check_shipped(shipped, refit) == []
    assert refit["card"] == "H200 SXM 141GB" and set(refit["fitted"]) == set(FIELDS)


def test_the_defaults_are_the_shipped_fitted_values(shipped: dict) -> None:  # type: ignore[type-arg]
    for name in FIELDS:
        assert getattr(Calibration(), name) == shipped["fitted"][name]
        assert getattr(DEFAULT_CALIBRATION, name) == shipped["fitted"][name]
    assert "estimate/data/calibration.json" in DEFAULT_CALIBRATION.provenance


def test_a_changed_shipped_value_is_named(shipped: dict) -> None:  # type: ignore[type-arg]
    edited = {**shipped, "fitted": {**shipped["fitted"], "prefill_overhead_s": 1e-3}}
    assert check_shipped(edited, shipped) == [f"prefill_overhead_s: shipped 0.001, refit "
                                              f"{shipped['fitted']['prefill_overhead_s']!r}"]
    assert math.isclose(shipped["fitted"]["prefill_overhead_s"], 237.5e-6)


def test_a_refit_needs_every_start_value(tmp_path: Path) -> None:
    import datetime as dt

    with pytest.raises(InputError, match="no start value"):
        refit_shipped([], {"memory_efficiency_max": 0.88}, dt.date(2026, 12, 7))
    with pytest.raises(InputError, match="no measurement file"):
        refit_from({"inputs": ["absent.json"], "start": {}, "fitted_at": "2026-12-07"}, tmp_path)
