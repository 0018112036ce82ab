"""Calibration.FIELD_BOUNDS: every numeric field has a bound, the defaults sit inside, the edges are exact."""

from __future__ import annotations

import contextlib
import math
from dataclasses import fields

import pytest

from gpumatch.errors import InputError
from gpumatch.estimate.calibration import FIELD_BOUNDS, Calibration

NUMERIC = [f.name for f in fields(Calibration) if f.name not in ("basis", "provenance", "fitted_on", "residuals",
                                                                         "serving")]


def test_every_numeric_field_is_bounded_and_its_default_is_inside() -> None:
    assert sorted(FIELD_BOUNDS) == sorted(NUMERIC)
    default = Calibration()
    assert Calibration.from_dict({k: getattr(default, k) for k in NUMERIC}) == default


@pytest.mark.parametrize("name", NUMERIC)
def test_bounds_are_enforced_at_the_edges(name: str) -> None:
    lo, hi, lo_open, _ = FIELD_BOUNDS[name]
    if name == "low_precision_gemm_efficiency_ratio":  # its product with gemm_efficiency_max is checked too
        base = {"gemm_efficiency_max": 0.5}
    elif name == "gemm_efficiency_max":
        base = {"low_precision_gemm_efficiency_ratio": 0.5}
    else:
        base = {}
    assert getattr(Calibration.from_dict({**base, name: hi}), name) == hi
    for bad in (hi * 1.001 + 1e-9, math.nan, math.inf, -math.inf, lo - 1e-9 - abs(lo) * 0.001):
        with pytest.raises(InputError, match=f"'{name}'"):
            Calibration.from_dict({**base, name: bad})
    with pytest.raises(InputError, match=f"'{name}'") if lo_open else contextlib.nullcontext():
        Calibration.from_dict({**base, name: lo})
