"""``gpumatch bench run`` without the command line's dependencies (typer; pydantic, which typer imports): the same
library calls, for a GPU machine that has torch but not those.

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/lab_run.py --suite quick --store $OUT/results.sqlite
--export $OUT/h200-quick.json``. Without pydantic the run measures but has no predictions (the catalog needs it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

from gpumatch.lab.run import BenchRequest, run_bench
from gpumatch.lab.suites import PRECISIONS, SUITES
from gpumatch.report.bench import BenchProgress, run_summary, show_text
from gpumatch.usecases.stored_bench import export_run, load_run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--suite", default="quick", choices=SUITES)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--export", type=Path, default=None, help="also write the run as JSON here")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--precision", default=",".join(PRECISIONS))
    ap.add_argument("--decode-batch", type=int, action="append", default=[])
    ap.add_argument("--weights", type=Path, default=None, help="a local Hugging Face folder (bench run --weights)")
    ap.add_argument("--text", type=Path, default=None, help="the quality check's text (bench run --text)")
    ap.add_argument("--only", default="", help="comma-separated case ids to run (e.g. quality)")
    args = ap.parse_args(argv)
    req = BenchRequest(suite=args.suite, store=args.store, tiny=args.tiny or None, duration_s=args.duration,
                       precisions=tuple(args.precision.split(",")), decode_batches=tuple(args.decode_batch),
                       weights=args.weights, text=args.text, only=tuple(o for o in args.only.split(",") if o))
    with BenchProgress() as progress:
        run = run_bench(req, progress)
    print(run_summary(run))
    assert run.run_id is not None
    print(show_text(load_run(args.store, run.run_id)))
    if args.export is not None:
        export_run(args.store, run.run_id, args.export, force=True)
        print(f"exported to {args.export} ({dt.date.today().isoformat()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
