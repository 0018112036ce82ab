"""A calibration's own held-out residuals set the intervals of estimates on its card (intervals.py, rule 4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpumatch.errors import DataFileError, InputError
from gpumatch.estimate import Calibration, Request, estimate
from gpumatch.estimate.calibration import load_calibration_file
from gpumatch.estimate.intervals import MIN_CALIBRATION_N, Residuals, default_residuals, parse_residuals

H200 = "H200 SXM 141GB"
OPTS = {"task": "infer", "concurrency": 8, "prompt": 2047, "gen": 1}


def _held(n: int, spread: float, card: str = H200, source: str | None = "calibration #5") -> Residuals:
    """Residuals of decode and prefill over the 8B shape at context 2048 (where the estimate below is)."""
    shipped = default_residuals()
    kinds = []
    for name in ("decode", "prefill"):
        k = shipped.kind(name)
        assert k is not None
        kinds.append(k.model_copy(update={"card": card, "n": n, "q05": -spread, "median": 0.0, "q95": spread,
                                          "params_range": (1e9, 1e11), "context_range": (512.0, 8192.0)}))
    return shipped.model_copy(update={"kinds": tuple(kinds), "set": "held-out", "source": source})


def _tpot(cal: Calibration, gpu: str = "h200") -> tuple[tuple[float, float], str, float]:
    d = estimate("llama-3.1-8b", gpu, Request(**OPTS), calibration=cal).to_dict()
    return tuple(d["intervals"]["tpot_s"]), d["interval_basis"]["tpot_s"], d["tpot_s"]  # type: ignore[return-value]


def _rel_width(span: tuple[float, float], x: float) -> float:
    return (span[1] - span[0]) / x


def test_tight_calibration_residuals_narrow_the_interval_and_say_so() -> None:
    plain = Calibration()
    tight = replace(plain, residuals=_held(n=30, spread=0.004))
    wide = replace(plain, residuals=_held(n=30, spread=0.20))
    span0, basis0, x0 = _tpot(plain)
    span1, basis1, x1 = _tpot(tight)
    span2, _, x2 = _tpot(wide)
    assert x0 == x1 == x2  # the residuals move the interval, never the figure
    assert basis0.startswith("shipped residual table: ") or "shipped residual table" in basis0
    assert basis1.startswith("residuals of calibration #5, held-out n=30: H200 SXM 141GB decode")
    assert _rel_width(span1, x1) < _rel_width(span0, x0)
    assert _rel_width(span1, x1) == pytest.approx(0.06, abs=1e-9)  # the ±3% time floor
    assert _rel_width(span2, x2) > _rel_width(span0, x0)  # honest: wide residuals widen it


def test_too_few_calibration_cases_fall_back_to_the_shipped_table_per_figure() -> None:
    plain = Calibration()
    few = _held(n=MIN_CALIBRATION_N - 1, spread=0.004)
    mixed = few.model_copy(update={"kinds": (few.kinds[0].model_copy(update={"n": 30}), few.kinds[1])})
    d0 = estimate("llama-3.1-8b", "h200", Request(**OPTS), calibration=plain).to_dict()
    d1 = estimate("llama-3.1-8b", "h200", Request(**OPTS), calibration=replace(plain, residuals=few)).to_dict()
    assert d1["intervals"]["tpot_s"] == d0["intervals"]["tpot_s"]
    assert "shipped residual table" in d1["interval_basis"]["tpot_s"]
    assert (f"calibration #5 not used: n={MIN_CALIBRATION_N - 1} < {MIN_CALIBRATION_N} held-out decode cases"
            in d1["interval_basis"]["tpot_s"])
    d2 = estimate("llama-3.1-8b", "h200", Request(**OPTS), calibration=replace(plain, residuals=mixed)).to_dict()
    assert d2["interval_basis"]["tpot_s"].startswith("residuals of calibration #5, held-out n=30")
    assert "shipped residual table" in d2["interval_basis"]["prefill_s"]
    assert d2["intervals"]["prefill_s"] == d0["intervals"]["prefill_s"]
    assert "no held-out memory case" in d2["interval_basis"]["total_bytes"]


def test_another_card_model_never_gets_the_calibration_residuals() -> None:
    tight = replace(Calibration(), residuals=_held(n=30, spread=0.004))
    for gpu in ("H100 SXM", "L4"):
        span, basis, _ = _tpot(tight, gpu)
        span0, _, _ = _tpot(Calibration(), gpu)
        assert "residuals of calibration" not in basis
        assert span == span0
    # residuals that name another card are not applied on the H200 either
    other = replace(Calibration(), residuals=_held(n=30, spread=0.004, card="H100 SXM5 80GB"))
    span, basis, _ = _tpot(other)
    assert "calibration #5 not used: fitted on H100 SXM5 80GB" in basis
    assert span == _tpot(Calibration())[0]


def test_residuals_travel_with_the_calibration_as_json(tmp_path: pytest.TempPathFactory) -> None:
    import json
    from pathlib import Path

    cal = replace(Calibration(), residuals=_held(n=12, spread=0.01, source=None))
    d = cal.to_dict()
    assert d["residuals"]["schema"] == 1 and "source" not in d["residuals"]
    assert "residuals" not in Calibration().to_dict()
    back = Calibration.from_dict(d)
    assert back.residuals is not None and back.residuals.kinds == cal.residuals.kinds  # type: ignore[union-attr]
    path = Path(str(tmp_path)) / "cal.json"
    path.write_text(json.dumps({"calibration": d}))
    loaded = load_calibration_file(path)
    assert loaded.residuals is not None and loaded.residuals.label == f"calibration file {path}"
    _, basis, _ = _tpot(loaded)
    assert basis.startswith(f"residuals of calibration file {path}, held-out n=12")
    with pytest.raises(InputError, match="calibration field 'residuals'"):
        Calibration.from_dict({**d, "residuals": {"schema": 1}})
    with pytest.raises(DataFileError):
        parse_residuals({"schema": 1})
