"""Regenerate the serving residual table behind every serving estimate's TTFT and TPOT interval.

Usage: ``python benchmarks/serving_residual_table.py [--check]``. Writes
``src/gpumatch/estimate/data/serving_residuals.json`` from the published serving batches of
:data:`BATCHES` (``tests/data/published``: settings, frozen predictions, measured values;
:func:`gpumatch.calibrate.serving_residuals.serving_residual_table`); ``--check`` writes nothing and exits 1 when the
committed file differs from what calibrate computes now. A new blind batch is one more entry of :data:`BATCHES`
once its values are read (its frozen predictions stay what they were).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from residual_table import check_or_write

from gpumatch.calibrate.residuals import table_json
from gpumatch.calibrate.serving_residuals import serving_residual_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "published"
OUT = ROOT / "src" / "gpumatch" / "estimate" / "data" / "serving_residuals.json"
BATCHES = ("2026-12-06", "2026-12-07", "2026-12-07b", "2026-12-07c", "2026-12-07d", "2026-12-07e", "2026-12-07f",
           "2026-12-07g", "2026-12-07h", "2026-12-07i", "2026-12-07j",
           "2026-12-07k", "2026-12-07l",
           "2026-12-07m", "2026-12-07n", "2026-12-07o", "2026-12-08b")
"""The blind batches collected with their client settings (docs/estimators.md, 'Fourth batch' onward)."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed file; write nothing")
    args = ap.parse_args()
    table = serving_residual_table(DATA, BATCHES)
    for k in table["kinds"]:
        print(f"{k['figure']:<5} {k['loop']:<7} n={k['n']:<4} q05={k['q05']:+.3f} median={k['median']:+.3f} "
              f"q95={k['q95']:+.3f}")
    check_or_write(OUT, table_json(table), args.check, Path(__file__).name)


if __name__ == "__main__":
    main()
