"""``gpumatch runs list|show|export|check|migrate|recover``: what the results store holds (runs, results, failures,
samples), a stored run's telemetry back as a trace file, the store's health, and its schema upgrade.

Every command but ``migrate`` opens the store read-only (``open_store(mode="read")``): it never creates,
migrates or otherwise changes the file. ``migrate`` is the one writer of a store here; ``recover`` reads a
damaged one and writes a new one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit, emit_object, emit_rows
from gpumatch.report.runs import LIST_COLUMNS as _LIST_COLUMNS

app = typer.Typer(
    help="Runs in the results store ($GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite).", no_args_is_help=True
)

StoreOption = typer.Option(
    None, "--store", help="Results store file (default: $GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite)."
)

_NAME_WIDTH = 60


def _row(run: Any, table: bool) -> dict[str, Any]:
    d: dict[str, Any] = run.to_dict()
    d["manifest"] = run.manifest_sha256[:12]
    if table:  # a `python -c` script spans lines: one short line in a table, whole in CSV/JSON
        name = " ".join(str(d.get("name") or "").split())
        d["name"] = name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"
    d["started_at"] = run.started_at[:19].replace("T", " ")
    return d


def _cell(value: Any) -> Any:
    """A table cell: nested objects (manifest, config, summary) as one line that fits the width."""
    from gpumatch.report.runs import nested_cell

    return nested_cell(value)


@app.command("list", help="List runs, newest first. Example: gpumatch runs list --kind monitor --format json")
def list_runs(
    kind: str = typer.Option("", help="Only runs of this kind (bench, monitor, ...)."),
    limit: int = typer.Option(50, min=1, help="At most this many runs."),
    store: Path | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    import sys

    from gpumatch.store import locate_store, open_existing_store

    path, named = locate_store(store)
    if not named and not path.exists():  # the default store before the first measurement: nothing yet
        sys.stderr.write(f"gpumatch: no runs yet (no results store at {path}; 'gpumatch monitor' creates it)\n")
        runs = []
    else:
        with open_existing_store(path) as st:
            runs = st.runs(kind or None, limit)
    for r in runs:
        if not r.manifest_ok:  # listed, but 'runs show' refuses to serve it
            sys.stderr.write(f"gpumatch: warning: run {r.run_id}: manifest hash mismatch (the store file was changed "
                             f"or damaged; 'gpumatch runs check --store {path}' checks the whole file)\n")
    if fmt is Format.json:
        emit_rows([r.to_dict() for r in runs], fmt)
    else:
        emit_rows([_row(r, fmt is Format.table) for r in runs], fmt, _LIST_COLUMNS)


@app.command("show", help="Show one run with its results and failures. Example: gpumatch runs show 3")
def show_run(
    run_id: int = typer.Argument(..., help="Run id from 'gpumatch runs list'."),
    samples: bool = typer.Option(False, "--samples", help="Include the raw telemetry samples (JSON/CSV)."),
    store: Path | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.store import open_existing_store

    with open_existing_store(store) as st:
        data = st.export_run(run_id, samples=samples)
    if fmt is Format.json:
        emit_object(data, fmt)
    elif fmt is Format.csv:  # CSV: the rows a spreadsheet wants
        emit_rows(
            data["samples"] if samples else data["results"],
            fmt,
            None if samples else ["result_id", "metric", "value", "unit", "config", "extra"],
        )
    else:
        run = dict(data["run"])
        for key in ("writer", "started_unix_s"):
            run.pop(key, None)
        emit_object({k: _cell(v) for k, v in run.items()}, fmt)
        if data["results"]:
            emit("")
            emit_rows(data["results"], fmt, ["result_id", "metric", "value", "unit", "config"], title="Results")
        if data["failures"]:
            emit("")
            emit_rows(data["failures"], fmt, ["failure_id", "error_class", "message", "config"], title="Failures")


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
    import sys

    from gpumatch.errors import InputError
    from gpumatch.store import open_existing_store
    from gpumatch.telemetry.stored import trace_from_run
    from gpumatch.telemetry.trace import write_trace

    if output.suffix.lower() not in (".csv", ".parquet"):
        raise InputError(
            f"--output must end in .csv or .parquet, not '{output.suffix or output.name}'", "e.g. --output trace.csv"
        )
    _check_target(output, force)
    with open_existing_store(store) as st:
        data = st.export_run(run_id, samples=True)
    if not data["samples"]:
        raise InputError(
            f"run {run_id} has no telemetry samples", "export a monitor run (gpumatch runs list --kind monitor)"
        )
    written = write_trace(trace_from_run(data), output)
    sys.stderr.write(f"gpumatch: run {run_id} written to {', '.join(str(p) for p in written)}\n")


def _check_target(output: Path, force: bool) -> None:
    """Refuse before reading the store: a missing folder, a folder as target, or files that exist."""
    from gpumatch.errors import InputError
    from gpumatch.telemetry.trace import sidecar_path

    folder = output.parent
    if not folder.is_dir():
        why = f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist"
        raise InputError(f"cannot write {output}: {why}", "create the folder first, or choose another --output")
    for p in (output, sidecar_path(output)):
        if p.is_dir():
            raise InputError(f"cannot write {p}: it is a directory", "choose another --output")
        if p.exists() and not force:
            raise InputError(f"{p} already exists", "pass --force to overwrite it, or choose another --output")


@app.command("check", help="Check the whole store file (SQLite integrity_check) and every manifest's hash; "
             "read-only. Exit 2 when damaged. Example: gpumatch runs check")
def check_store(store: Path | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.errors import StoreError
    from gpumatch.store import open_existing_store
    from gpumatch.store.db import recover_hint

    with open_existing_store(store) as st:
        report = {"store": str(st.path), "schema": st.schema[-1], "journal_mode": st.journal_mode, **st.verify()}
        path = st.path
    emit_object(report, fmt, {k: _cell(v) for k, v in report.items()})
    bad = report["manifest_mismatches"]
    if report["integrity"] != "ok" or bad:
        what = report["integrity"] if report["integrity"] != "ok" else f"{len(bad)} manifest hash mismatch(es)"
        raise StoreError(f"results store {path} is damaged ({what[:200]})", hint=recover_hint(path))


@app.command("migrate", help="Upgrade an older results store to this gpumatch's schema (the only runs command "
             "that writes). Example: gpumatch runs migrate --store old.sqlite")
def migrate_cmd(store: Path | None = StoreOption) -> None:
    import sys

    from gpumatch.store import locate_store, migrate_store

    path, _ = locate_store(store)
    before, after = migrate_store(path)
    if before == after:
        sys.stderr.write(f"gpumatch: results store {path} is up to date (schema {after[-1]})\n")
    else:
        sys.stderr.write(f"gpumatch: results store {path} upgraded from {before[-1] if before else 'empty'} to "
                         f"{after[-1]} ({len(after) - len(before)} migration(s))\n")


_RecoverOutput = typer.Option(..., "--output", "-o", help="The new store file to write (must not exist).")


@app.command("recover", help="Copy what is still readable from a damaged results store into a new file; the "
             "damaged file is only read. Example: gpumatch runs recover --store results.sqlite --output fixed.sqlite")
def recover_cmd(
    output: Path = _RecoverOutput,
    store: Path | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    import sys

    from gpumatch.store import locate_store
    from gpumatch.store.recover import recover_store

    path, _ = locate_store(store)
    if not path.is_file():
        from gpumatch.errors import StoreError

        raise StoreError(f"no results store at {path}", hint="give the damaged file with --store")
    tables = recover_store(path, output)
    emit_rows([t.to_dict() for t in tables], fmt, ["table", "copied", "unreadable_ids", "dropped"])
    lost = sum(t.unreadable_ids + t.dropped for t in tables)
    sys.stderr.write(f"gpumatch: {sum(t.copied for t in tables)} rows copied into {output}"
                     f"{f'; up to {lost} lost to the damage' if lost else ''}\n")
