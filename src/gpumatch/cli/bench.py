"""``gpumatch bench run|list|show|compare|export``: the fixed experiment package and its stored runs.

Each command parses, makes one library call (:mod:`gpumatch.lab`) and renders (:mod:`gpumatch.report.bench`)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpumatch.cli.common import Format, FormatOption, emit, emit_object, emit_rows

app = typer.Typer(help="The fixed experiment package: run a suite on this machine's GPU, list, show, compare and "
                       "export the stored runs.", no_args_is_help=True)

StoreOption = typer.Option(
    None, "--store", help="Results store file (default: $GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite).")

_HF = typer.Option(None, "--hf-config", help="A Hugging Face config.json instead.")
_PREC = typer.Option([], "--precision", help="GEMM precisions (repeat; default all five).")
_DB = typer.Option([], "--decode-batch", help="Also decode at this batch (repeat).")
_CASE = typer.Option([], "--case", help="Run only this case of the suite (repeat).")
_OUT = typer.Option(..., "--out", help="JSON file to write.")
_FILE = typer.Argument(..., help="A JSON file 'gpumatch bench export' wrote.")

_RUN_HELP = (
    "Run a suite (quick: at most 3 min on an H200; standard: 15 min; soak: --duration after thermal steady "
    "state), each case in a child process, and record it in the results store. Without CUDA (or with --tiny) "
    "a tiny model and small shapes run on the CPU in seconds.\n\n"
    "Example: gpumatch bench run --suite quick --store results.sqlite"
)


@app.command("run", help=_RUN_HELP)
def run_cmd(
    suite: str = typer.Option("quick", "--suite", help="quick, standard or soak."),
    model: str | None = typer.Option(None, "--model", help="Decode/prefill model preset (default llama-3.1-8b)."),
    hf_config: Path | None = _HF,
    precision: list[str] = _PREC,
    tiny: bool = typer.Option(False, "--tiny", help="Tiny model and shapes (CPU smoke test)."),
    duration: float = typer.Option(1800.0, "--duration", help="Soak: seconds after warm-up."),
    decode_batch: list[int] = _DB,
    case: list[str] = _CASE,
    seed: int = typer.Option(0, "--seed", help="Data seed."),
    store: Path | None = StoreOption,
) -> None:
    from gpumatch.lab.run import BenchRequest, run_bench
    from gpumatch.lab.suites import PRECISIONS
    from gpumatch.report.bench import BenchProgress, run_summary

    precisions = tuple(p.strip() for x in precision for p in x.split(",") if p.strip()) or PRECISIONS
    req = BenchRequest(suite=suite, model=model, hf_config=hf_config, precisions=precisions, tiny=tiny or None,
                       store=store, duration_s=duration, seed=seed, decode_batches=tuple(decode_batch),
                       only=tuple(case))
    with BenchProgress() as progress:
        run = run_bench(req, progress)
    emit(run_summary(run))


@app.command("list", help="List the bench runs, newest first. Example: gpumatch bench list")
def list_cmd(limit: int = typer.Option(50, min=1, help="At most this many runs."), store: Path | None = StoreOption,
             fmt: Format = FormatOption) -> None:
    from gpumatch.lab.results import list_bench_runs
    from gpumatch.report.bench import LIST_COLUMNS

    emit_rows(list_bench_runs(store, limit), fmt, LIST_COLUMNS)


@app.command("show", help="One bench run: each case measured, predicted, ratio, n and percentiles; failures with "
             "their reason. Example: gpumatch bench show 3 --format json")
def show_cmd(run_id: int = typer.Argument(..., help="Run id from 'gpumatch bench list'."),
             store: Path | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.lab.results import load_run
    from gpumatch.report.bench import show_csv, show_text

    data = load_run(store, run_id)
    if fmt is Format.json:
        emit_object(data, fmt)
    else:
        emit(show_csv(data) if fmt is Format.csv else show_text(data))


@app.command("compare", help="Two bench runs side by side with B/A per case. Refuses (exit 2) runs whose "
             "manifests differ in performance-relevant fields unless --force. Example: gpumatch bench compare 3 4")
def compare_cmd(run_a: int = typer.Argument(..., help="Run A."), run_b: int = typer.Argument(..., help="Run B."),
                force: bool = typer.Option(False, "--force", help="Compare even if the manifests differ (flagged)."),
                store: Path | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.lab.results import compare_runs
    from gpumatch.report.bench import compare_text

    cmp = compare_runs(store, run_a, run_b, force)
    if cmp["differing_fields"]:
        sys.stderr.write(f"gpumatch: warning: manifests differ in {', '.join(cmp['differing_fields'])}\n")
    if fmt is Format.table:
        emit(compare_text(cmp))
    elif fmt is Format.json:
        emit_object(cmp, fmt)
    else:
        emit_rows(cmp["rows"], fmt, ["key", "unit", "a", "b", "b_over_a", "n_a", "n_b"])


@app.command("export", help="Write a bench run (manifest, cases, results, failures) as JSON. "
             "Example: gpumatch bench export 3 --out h200-quick.json")
def export_cmd(run_id: int = typer.Argument(..., help="Run id."),
               out: Path = _OUT,
               force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists."),
               store: Path | None = StoreOption) -> None:
    from gpumatch.lab.results import export_run

    path = export_run(store, run_id, out, force)
    sys.stderr.write(f"gpumatch: run {run_id} written to {path}\n")


@app.command("import", help="Read a 'bench export' JSON file into the results store as a new bench run (so "
             "'bench show', 'bench compare' and 'gpumatch calibrate' see it). "
             "Example: gpumatch bench import h200-quick.json --store results.sqlite")
def import_cmd(file: Path = _FILE,
               store: Path | None = StoreOption) -> None:
    from gpumatch.lab.imports import import_run

    run_id = import_run(file, store)
    sys.stderr.write(f"gpumatch: {file} imported as bench run {run_id}\n")
    emit(str(run_id))
