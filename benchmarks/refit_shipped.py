"""Refit the shipped calibration defaults through bench import -> store -> calibrate (:mod:`gpumatch.usecases.shipped`).

Usage (from the repository root): ``python benchmarks/refit_shipped.py [--check] [--restart] [--date YYYY-MM-DD]``.

- default: refit from the inputs, start values and date that ``src/gpumatch/estimate/data/calibration.json``
  names, and write the file (the same values unless an estimator changed);
- ``--check``: refit and compare with the file, exit 1 naming each field that differs (the unit test does this);
- ``--restart``: a new refit that starts from the file's fitted values (dated ``--date``, default today): new
  shipped defaults; then rerun ``benchmarks/residual_table.py`` and the accuracy tables (docs/calibration.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from gpumatch.estimate.calibration import SHIPPED_FIT_FILE, shipped_fit_document
from gpumatch.usecases.shipped import check_shipped, refit_from

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--restart", action="store_true")
    ap.add_argument("--date", type=dt.date.fromisoformat, default=dt.date.today())
    args = ap.parse_args()
    current = shipped_fit_document()
    source = dict(current, start=current["fitted"], fitted_at=args.date.isoformat()) if args.restart else current
    refit = refit_from(source, ROOT)
    if args.check:
        bad = check_shipped(current, refit)
        print("\n".join(bad) or "the shipped calibration is the refit of its inputs")
        return 1 if bad else 0
    Path(str(SHIPPED_FIT_FILE)).write_text(json.dumps(refit, indent=1) + "\n", encoding="utf-8")
    for name in refit["fitted"]:
        print(f"{name}: {current['fitted'].get(name)!r} -> {refit['fitted'][name]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
