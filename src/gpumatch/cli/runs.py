"""``gpumatch runs list|show|export|check|migrate|recover``: what the results store holds (runs, results, failures,
samples), a stored run's telemetry back as a trace file, the store's health, and its schema upgrade.

Every command but ``migrate`` opens the store read-only (``open_store(mode="read")``): it never creates,
migrates or otherwise changes the file. ``migrate`` is the one writer of a store here; ``recover`` reads a
damaged one and writes a new one."""

from __future__ import annotations

from pathlib import Path

import typer

from gpumatch.cli.common import RUN_ID_MAX, Format, FormatOption, emit, emit_object, emit_rows

app = typer.Typer(
    help="Runs in the results store ($GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite).", no_args_is_help=True
)

StoreOption = typer.Option(
    None, "--store", help="Results store: a SQLite file, sqlite:///PATH or postgresql://USER@HOST:PORT/DB "
    "(default: $GPUMATCH_STORE or $GPUMATCH_HOME/results.sqlite)."
)


def _say(line: str) -> None:
    import sys

    sys.stderr.write(f"gpumatch: {line}\n")


@app.command("list", help="List runs, newest first. Example: gpumatch runs list --kind monitor --format json")
def list_runs(
    kind: str = typer.Option("", help="Only runs of this kind (bench, monitor, ...)."),
    limit: int = typer.Option(50, min=1, max=RUN_ID_MAX, help="At most this many runs."),
    store: str | None = StoreOption,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.report.runs import LIST_COLUMNS, list_rows, manifest_warnings
    from gpumatch.store import list_runs

    path, runs = list_runs(store, kind or None, limit)
    if not runs and isinstance(path, Path) and not path.exists():  # the default store before the first run
        _say(f"no runs yet (no results store at {path}; 'gpumatch monitor' creates it)")
    for line in manifest_warnings(runs, path):
        _say(line)
    emit_rows(list_rows(runs, fmt.value), fmt, LIST_COLUMNS)


@app.command("show", help="Show one run with its results and failures. Example: gpumatch runs show 3")
def show_run(
    run_id: int = typer.Argument(..., min=1, max=RUN_ID_MAX, help="Run id from 'gpumatch runs list'."),
    samples: bool = typer.Option(False, "--samples", help="Include the raw telemetry samples (JSON/CSV)."),
    store: str | None = StoreOption,
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
    "Example: gpumatch runs export 3 --output run3.csv && gpumatch monitor --replay run3.csv\n\n"
    "Runs for other tools: gpumatch runs export 3 4 --format parquet --output results.parquet"
)


OutputOption = typer.Option(..., "--output", "-o", help="Trace file to write: .csv or .parquet (+ a .json sidecar).")


_EXPORT_FORMAT = typer.Option("trace", "--format", "-f",
                              help="trace (telemetry, by --output suffix), json (whole runs), csv or parquet "
                              "(one row per result).")
_RUN_IDS = typer.Argument(..., min=1, max=RUN_ID_MAX, help="Run id(s) from 'gpumatch runs list' (trace: one).")


@app.command("export", help=_EXPORT_HELP)
def export_run(
    run_ids: list[int] = _RUN_IDS,
    output: Path = OutputOption,
    store: str | None = StoreOption,
    force: bool = typer.Option(False, "--force", help="Overwrite the trace file and its .json sidecar if they exist."),
    fmt: str = _EXPORT_FORMAT,
) -> None:
    from gpumatch.store.export import export_runs, export_trace

    if fmt != "trace":
        written = export_runs(run_ids, output, fmt, store=store, force=force)
        _say(f"{len(run_ids)} run(s) written to {written}")
        return
    if len(run_ids) != 1:
        from gpumatch.errors import InputError

        raise InputError("a trace holds one run's telemetry", "give one run id, or --format json|csv|parquet")
    paths = export_trace(run_ids[0], output, store=store, force=force)
    _say(f"run {run_ids[0]} written to {', '.join(str(p) for p in paths)}")


@app.command("check", help="Check the whole store file (SQLite integrity_check) and every manifest's hash; "
             "read-only. Exit 2 when damaged. Example: gpumatch runs check")
def check_store(store: str | None = StoreOption, fmt: Format = FormatOption) -> None:
    from gpumatch.report.runs import check_cells
    from gpumatch.store import check_store, damage

    report = check_store(store)
    emit_object(report, fmt, check_cells(report))
    error = damage(report)
    if error is not None:
        raise error


@app.command("migrate", help="Upgrade an older results store to this gpumatch's schema (the only runs command "
             "that writes). Example: gpumatch runs migrate --store old.sqlite")
def migrate_cmd(store: str | None = StoreOption) -> None:
    from gpumatch.report.runs import migrated_line
    from gpumatch.store import locate_store, migrate_store
    from gpumatch.store.locate import store_url

    path = store_url(store) or locate_store(store)[0]
    before, after = migrate_store(path)
    _say(migrated_line(path, before, after))


_RecoverOutput = typer.Option(..., "--output", "-o", help="The new store file to write (must not exist).")


@app.command("recover", help="Copy what is still readable from a damaged results store into a new file; the "
             "damaged file is only read. Example: gpumatch runs recover --store results.sqlite --output fixed.sqlite")
def recover_cmd(
    output: Path = _RecoverOutput,
    store: str | None = StoreOption,
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


_TO = typer.Option(..., "--to", help="The store to copy into: a SQLite file or postgresql://... URL.")
_FROM = typer.Option(..., "--from", help="The store to copy from: a SQLite file or postgresql://... URL.")
_SOURCES = typer.Argument(..., help="Stores to read (files or URLs).")
_INTO = typer.Option(..., "--into", help="The store to write (created when a new file).")
_FILE = typer.Argument(..., help="The result file.")
_SOURCE_FORMAT = typer.Option("", "--from", "--source-format", help="The file's format: vllm, nccl-tests, guidellm "
                               "or aiperf (default: detected from the content).")
_IMPORT_OUTPUT = typer.Option("table", "--format", "-f", help="Output format: table, json or csv.")


def _copy(source: str | None, target: str | None, fmt: Format) -> None:
    from gpumatch.report.runs import copied_line
    from gpumatch.store.merge import copy_store

    report = copy_store(source, target)
    emit_object(report.to_dict(), fmt, {"copied": len(report.copied), "already_there": report.already_there,
                                        "still_running": len(report.still_running), "damaged": len(report.damaged)})
    _say(copied_line(report.to_dict()))


@app.command("push", help="Copy this store's finished runs into another store (a team's PostgreSQL), skipping "
             "those already there; safe to rerun after an interruption. "
             "Example: gpumatch runs push --to postgresql://me@db.lab:5432/gpumatch")
def push_cmd(to: str = _TO, store: str | None = StoreOption, fmt: Format = FormatOption) -> None:
    _copy(store, to, fmt)


@app.command("pull", help="Copy another store's finished runs into this one, skipping those already here. "
             "Example: gpumatch runs pull --from postgresql://me@db.lab:5432/gpumatch --store mine.sqlite")
def pull_cmd(source: str = _FROM, store: str | None = StoreOption, fmt: Format = FormatOption) -> None:
    _copy(source, store, fmt)


@app.command("merge", help="Copy the finished runs of each SOURCE store into --into, by global run id (no "
             "duplicates). Example: gpumatch runs merge a.sqlite b.sqlite --into pooled.sqlite")
def merge_cmd(sources: list[str] = _SOURCES, into: str = _INTO, fmt: Format = FormatOption) -> None:
    from gpumatch.report.runs import copied_line
    from gpumatch.settings import check_store_location
    from gpumatch.store.merge import merge_stores

    for name in (*sources, into):  # every location before the first copy: a bad one changes nothing
        check_store_location(name)
    reports = [r.to_dict() for r in merge_stores(sources, into)]
    emit_rows([{**r, "copied": len(r["copied"]), "still_running": len(r["still_running"]),
                "damaged": len(r["damaged"])} for r in reports], fmt,
              ["source", "copied", "already_there", "still_running", "damaged"])
    for r in reports:
        _say(copied_line(r))


@app.command("import", help="Store another tool's result file as a run: 'vllm bench serve --save-result' JSON, "
             "GuideLLM benchmarks.json or AIPerf profile_export_aiperf.json as a serving run (kind serve, the "
             "names 'bench serve' uses), nccl-tests -J JSON as a bench run; the file's format is detected, or "
             "given with --from. Importing a file twice stores it once. "
             "Example: gpumatch runs import vllm-result.json --from vllm")
def import_cmd(file: Path = _FILE, source_format: str = _SOURCE_FORMAT, store: str | None = StoreOption,
               output: str = _IMPORT_OUTPUT) -> None:
    from gpumatch.report.runs import imported_line, refused_line
    from gpumatch.store.imports import import_file

    fmt = _output_format(output)
    out = import_file(file, source_format or None, store)
    emit_object(out.to_dict(), fmt, {**out.to_dict(), "refused": len(out.refused)})
    _say(imported_line(out.to_dict()))
    warning = refused_line(out.to_dict())
    if warning is not None:
        _say(warning)


def _output_format(value: str) -> Format:
    """``--format`` of ``runs import``: the output format, like every command's; a file format given there (the
    option's meaning before ``--from``) is refused with the new name."""
    from gpumatch.errors import InputError
    from gpumatch.store.formats import FORMATS

    if value in FORMATS:
        raise InputError(f"--format is the output format (table, json, csv), not the file's format {value!r}",
                         f"give the file's format with --from {value}")
    try:
        return Format(value)
    except ValueError:
        raise InputError(f"unknown output format {value!r}", "give --format table, json or csv") from None
