"""``gpumatch calibrate``: fit a card's Calibration from the bench (and serve) runs in the results store.

Parse, call :func:`gpumatch.calibrate.saved.run_calibrate`, render with :mod:`gpumatch.report.calibration`."""

from __future__ import annotations

from pathlib import Path

import typer

from gpumatch.cli.common import RUN_ID_MAX, Format, FormatOption, emit, emit_object

HELP = """Fit a card's efficiency curves and overheads from the bench and serve runs in the results store.

\b
Examples:
  gpumatch bench import tests/data/measurements/bench/2026-12-04-h200-standard.json --store h200.sqlite
  gpumatch calibrate --store h200.sqlite
  gpumatch calibrate --run 3 --run 4 --gpu h200 --out h200-calibration.json

Per operator class (GEMM per precision, device copies, decode, prefill, attention, training step, training
memory; serving per load level when the store holds 'bench serve' runs of the card; collectives from 'bench
scale' runs and imported nccl-tests files) it prints the error on held-out shapes (collectives: held-out message
sizes) before (shipped defaults) and after, and the leave-one-shape-out error. The calibration is stored
(unless --no-save) with the residuals of its held-out cases; 'gpumatch estimate' and 'gpumatch plan --gpu' then
use the newest one of that card by default and say so in their basis and intervals. One card model per
calibration: runs on several need --gpu.
"""


_RUN = typer.Option([], "--run", min=1, max=RUN_ID_MAX,
                    help="Use this bench or serve run (repeat; default: all completed runs).")
_OUT = typer.Option(None, "--out", help="Also write it as JSON (estimate --calibration reads it).")
_STORE = typer.Option(None, "--store", help="Results store file (default: $GPUMATCH_STORE or "
                      "$GPUMATCH_HOME/results.sqlite).")


def calibrate_cmd(
    run: list[int] = _RUN,
    gpu: str | None = typer.Option(None, "--gpu", "-g", help="Card model (needed when runs span several)."),
    out: Path | None = _OUT,
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
    no_save: bool = typer.Option(False, "--no-save", help="Fit and show, store nothing."),
    store: Path | None = _STORE,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.calibrate.saved import run_calibrate
    from gpumatch.report.calibration import calibrate_text

    fit = run_calibrate(store, tuple(run), gpu, keep=not no_save, out=out, force=force)
    if fmt is Format.table:
        emit(calibrate_text(fit))
    elif fmt is Format.json:
        emit_object(fit, fmt)
    else:
        from gpumatch.cli.common import emit_rows

        emit_rows(fit["classes"], fmt)
