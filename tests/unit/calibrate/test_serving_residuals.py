"""The shipped serving residual table is what calibrate computes from the blind published batches (it cannot go
stale), and its entries are the batches' own rows: r = measured / predicted - 1 of the frozen predictions."""

from __future__ import annotations

import sys
from pathlib import Path

from gpumatch.calibrate.published import load_engine_cases
from gpumatch.calibrate.residuals import table_json
from gpumatch.calibrate.serving_residuals import serving_residual_table
from gpumatch.estimate.intervals import default_serving_residuals

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "published"
COMMITTED = ROOT / "src" / "gpumatch" / "estimate" / "data" / "serving_residuals.json"


def _batches() -> tuple[str, ...]:
    """The batches ``benchmarks/serving_residual_table.py`` reads (a script beside its sibling residual_table.py)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from serving_residual_table import BATCHES
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return tuple(BATCHES)


def test_the_committed_table_equals_what_calibrate_computes() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == table_json(serving_residual_table(DATA, _batches())), (
        "stale: run python benchmarks/serving_residual_table.py and commit "
        "src/gpumatch/estimate/data/serving_residuals.json")


def test_every_blind_batch_with_client_settings_is_in_the_table() -> None:
    dates = {p.name.removeprefix("engine-rows-").removesuffix(".toml") for p in DATA.glob("engine-rows-2026-12-*.toml")}
    settled = {d for d in dates if (DATA / f"engine-measured-{d}.toml").exists()
               and (DATA / f"engine-predictions-{d}.json").exists() and d >= "2026-12-06"}
    assert settled == set(_batches())


def test_the_closed_loop_tpot_entry_is_the_rows_own_ratio() -> None:
    dates = _batches()
    cases, _, _ = load_engine_cases([DATA / f"engine-measured-{d}.toml" for d in dates],
                                    [DATA / f"engine-predictions-{d}.json" for d in dates])
    table = default_serving_residuals()
    tpot = table.kind("tpot", "closed")
    open_tpot = table.kind("tpot", "open")
    assert tpot is not None and open_tpot is not None
    assert tpot.n + open_tpot.n == len([c for c in cases if c.predicted_tpot_s])
    assert tpot.q05 <= tpot.median <= tpot.q95
    every = [c.tpot_s / c.predicted_tpot_s - 1 for c in cases if c.predicted_tpot_s]
    assert min(every) <= tpot.q05 and tpot.q95 <= max(every)
    assert table.files == tuple(f"engine-predictions-{d}.json" for d in dates)
