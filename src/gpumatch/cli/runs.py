"""``gpumatch runs list|show|export|check|migrate|recover``: what the results store holds (runs, results, failures,
samples), a stored run's telemetry back as a trace file, the store's health, and its schema upgrade.

Every command but ``migrate`` opens the store read-only (``open_store(mode="read")``): it never creates,
migrates or otherwise changes the file. ``migrate`` is the one writer of a store here; ``recover`` reads a
damaged one and writes a new one."""

from __future__ import annotations

from pathlib import Path

import typer

from gpumatch.cli.common import Format, FormatOption, emit, emit_object, emit_rows

app = typer.Typer(
    help="Runs in the results store ($GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite).", no_args_is_help=True
)

StoreOption = typer.Option(
    None, "--store", help="Results store file (default: $GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite)."
)


def _say(line: str) -> None:
    import sys

    sys.stderr.write(f"gpumatch: {line}\n")


@app.command("list", help="List runs, newest first. Example: gpumatch runs list --kind monitor --format json")
def list_runs(
    kind: str = typer.Option("", help="Only runs of this kind (bench, monitor, ...)."),
    limit: int = typer.Option(50, min=1, help="At most this many runs."),
    store: Path | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.report.runs import LIST_COLUMNS, list_rows, manifest_warnings
    from gpumatch.store import list_runs

    path, runs = list_runs(store, kind or None, limit)
    if not runs and not path.exists():  # the default store before the first measurement: nothing yet
        _say(f"no runs yet (no results store at {path}; 'gpumatch monitor' creates it)")
    for line in manifest_warnings(runs, path):
        _say(line)
    emit_rows(list_rows(runs, fmt.value), fmt, LIST_COLUMNS)


@app.command("show", help="Show one run with its results and failures. Example: gpumatch runs show 3")
def show_run(
    run_id: int = typer.Argument(..., help="Run id from 'gpumatch runs list'."),
    samples: bool = typer.Option(False, "--samples", help="Include the raw telemetry samples (JSON/CSV)."),
    store: Path | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.report.runs import show_csv, show_text
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        data = st.export_run(run_id, samples=samples)
    if fmt is Format.json:
        emit_object(data, fmt)
    else:  # CSV: the rows a spreadsheet wants
        emit(show_csv(data, samples) if fmt is Format.csv else show_text(data))


_EXPORT_HELP = (
    "Write a stored run's telemetry as a trace file (.csv or .parquet, plus a .json sidecar), the format "
    "'gpumatch monitor --output' writes and '--replay' reads.\n\n"
    "Example: gpumatch runs export 3 --output run3.csv && gpumatch monitor --replay run3.csv"
)


OutputOption = typer.Option(..., "--output", "-o", help="Trace file to write: .csv or .parquet (+ a .json sidecar).")


@app.command("export", help=_EXPORT_HELP)
def export_run(
    run_id: int = typer.Argument(..., help="Run id from 'gpumatch runs list'."),
    output: Path = OutputOption,
    store: Path | None = StoreOption,
    force: bool = typer.Option(False, "--force", help="Overwrite the trace file and its .json sidecar if they exist."),
) -> None:
    from gpumatch.store.export import export_trace

    written = export_trace(run_id, output, store=store, force=force)
    _say(f"run {run_id} written to {', '.join(str(p) for p in written)}")


@app.command("check", help="Check the whole store file (SQLite integrity_check) and every manifest's hash; "
             "read-only. Exit 2 when damaged. Example: gpumatch runs check")
def check_store(store: Path | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.report.runs import check_cells
    from gpumatch.store import check_store, damage

    report = check_store(store)
    emit_object(report, fmt, check_cells(report))
    error = damage(report)
    if error is not None:
        raise error


@app.command("migrate", help="Upgrade an older results store to this gpumatch's schema (the only runs command "
             "that writes). Example: gpumatch runs migrate --store old.sqlite")
def migrate_cmd(store: Path | None = StoreOption) -> None:
    from gpumatch.report.runs import migrated_line
    from gpumatch.store import locate_store, migrate_store

    path, _ = locate_store(store)
    before, after = migrate_store(path)
    _say(migrated_line(path, before, after))


_RecoverOutput = typer.Option(..., "--output", "-o", help="The new store file to write (must not exist).")


@app.command("recover", help="Copy what is still readable from a damaged results store into a new file; the "
             "damaged file is only read. Example: gpumatch runs recover --store results.sqlite --output fixed.sqlite")
def recover_cmd(
    output: Path = _RecoverOutput,
    store: Path | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.report.runs import RECOVER_COLUMNS, recovered_line
    from gpumatch.store import locate_store
    from gpumatch.store.recover import recover_store

    path, _ = locate_store(store)
    if not path.is_file():
        from gpumatch.errors import StoreError

        raise StoreError(f"no results store at {path}", hint="give the damaged file with --store")
    tables = recover_store(path, output)
    emit_rows([t.to_dict() for t in tables], fmt, RECOVER_COLUMNS)
    _say(recovered_line(sum(t.copied for t in tables), sum(t.unreadable_ids + t.dropped for t in tables), output))
