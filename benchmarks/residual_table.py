"""Regenerate the residual table behind every estimate's interval, and print the intervals' held-out coverage.

Usage: ``python benchmarks/residual_table.py [--check]``. Writes ``src/gpumatch/estimate/data/residuals.json`` from
the FIT cases of ``tests/data/measurements`` (:func:`gpumatch.calibrate.residuals.residual_table`); ``--check``
writes nothing and exits 1 when the committed file differs from what calibrate computes now. Either way it prints
the table and the share of held-out measurements inside their interval (docs/accuracy.md, "Intervals").
Regenerate after changing the Calibration defaults, the estimators or the measurements.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpumatch.calibrate.residuals import coverage, residual_table, table_json

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "measurements"
OUT = ROOT / "src" / "gpumatch" / "estimate" / "data" / "residuals.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true", help="compare with the committed file; write nothing")
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    table = residual_table(args.data)
    for k in table["kinds"]:
        print(f"{k['kind']:<11} {k['card']} {k['precision']} {k['task']:<6} n={k['n']:<3} q05={k['q05']:+.3f} "
              f"median={k['median']:+.3f} q95={k['q95']:+.3f}")
    total = inside = 0
    for c in coverage(args.data):
        total, inside = total + c.n, inside + c.inside
        print(f"held-out {c.kind:<11} {c.inside}/{c.n} inside ({c.share * 100:.0f}%), mean half-width "
              f"{c.mean_half_width * 100:.1f}%")
    print(f"held-out all         {inside}/{total} inside ({inside / total * 100:.0f}%)")
    check_or_write(OUT, table_json(table), args.check, Path(__file__).name)


def check_or_write(out: Path, text: str, check: bool, script: str) -> None:
    """Write ``text`` to ``out``; with ``check``, write nothing and exit 1 when ``out`` differs from it."""
    if check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out.relative_to(ROOT)}: {'up to date' if same else f'STALE: run python benchmarks/{script}'}")
        sys.exit(0 if same else 1)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
