"""The committed residual table is what calibrate computes now (it cannot go stale), from fit cases only."""

from __future__ import annotations

from pathlib import Path

from gpumatch.calibrate.cases import load_cases
from gpumatch.calibrate.residuals import quantile, residual_table, table_json
from gpumatch.estimate.intervals import default_residuals, parse_residuals

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "measurements"
COMMITTED = ROOT / "src" / "gpumatch" / "estimate" / "data" / "residuals.json"


def test_the_committed_residual_table_equals_what_calibrate_computes() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == table_json(residual_table(DATA)), (
        "stale: run python benchmarks/residual_table.py and commit src/gpumatch/estimate/data/residuals.json")


def test_the_table_uses_fit_cases_only_and_validates() -> None:
    table = residual_table(DATA)
    fit_ids = {c.case_id for c in load_cases(DATA) if c.fit}
    used = {case for k in table["kinds"] for case in k["cases"]}
    assert used and used <= fit_ids
    res = parse_residuals(table)
    assert res == default_residuals()
    assert {k.kind for k in res.kinds} == {"decode", "prefill", "train-step", "memory"}
    for k in res.kinds:
        assert k.q05 <= k.median <= k.q95 and k.n >= 2


def test_quantile_interpolates_like_numpy() -> None:
    xs = [0.3, -0.1, 0.0, 0.2, 0.1]
    assert quantile(xs, 0.5) == 0.1
    assert abs(quantile(xs, 0.05) - (-0.08)) < 1e-12
    assert quantile(xs, 1.0) == 0.3
