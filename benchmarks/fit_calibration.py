"""Fit Calibration fields to the fit set of the committed H200 measurements (:mod:`gpumatch.calibrate.fit`).

Usage: ``python benchmarks/fit_calibration.py [--fields a,b,...] [--rounds N] [--kinds ...] [--out cal.json]``.
Prints the errors of the defaults and of the fit on the fit and held-out sets, and the fitted fields; with
``--out`` writes the fitted Calibration (provenance included) as JSON for ``gpumatch estimate --calibration``.
It changes no source file: new shipped defaults are copied into ``src/gpumatch/estimate/calibration.py`` by
hand, with the provenance this prints (docs/calibration.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpumatch.calibrate.fit import BOUNDS, KINDS, fit_calibration

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "measurements"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fields", default=",".join(BOUNDS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, help="write the fitted Calibration here as JSON")
    args = ap.parse_args()
    fit = fit_calibration(args.data, args.fields.split(","), args.rounds, args.kinds.split(","))
    print("defaults, {} | {}".format(*fit.errors(fit.start)))
    for name in fit.fields:
        print(f"{name} = {getattr(fit.calibration, name)!r}")
    print("fitted, {} | {}".format(*fit.errors()))
    for kind in args.kinds.split(","):
        print(f"  {kind}", "{} | {}".format(*fit.errors(kind=kind)))
    print(f"provenance: {fit.calibration.provenance}")
    if args.out:
        args.out.write_text(json.dumps(fit.calibration.to_dict(), indent=2) + "\n")


if __name__ == "__main__":
    main()
