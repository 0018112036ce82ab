"""``gpumatch runs export``: a stored run's telemetry back as a trace file (the default, ``--format trace``: the
format ``gpumatch monitor --output`` writes and ``--replay`` reads, .csv or .parquet, plus a .json sidecar with
the window-edge counters and Xids, read back from the run's events), or runs as JSON (whole) or their results as
one CSV or Parquet table (``--format json|csv|parquet``, :func:`export_runs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.outfiles import publishing, write_file
from gpumatch.store.locate import open_existing_store


def export_trace(run_id: int, output: Path, *, store: Path | str | None = None, force: bool = False) -> list[Path]:
    """Write run ``run_id`` of ``store`` (read-only; default as :func:`~gpumatch.store.locate_store`) to
    ``output``; returns the files written. Refuses, before reading the store, a suffix other than .csv or
    .parquet, a missing folder and existing files (unless ``force``); then a run without samples."""
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
    return write_trace(trace_from_run(data), output)


def _check_target(output: Path, force: bool) -> None:
    """Refuse before reading the store: a missing folder, a folder as target, or files that exist."""
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


RESULT_TABLE_COLUMNS = ("run_uuid", "run_id", "kind", "name", "status", "started_at", "source_format", "metric",
                        "value", "unit", "config_json", "extra_json")
"""``runs export --format csv|parquet``: one row per result, long format (a spreadsheet or a dataframe pivots it)."""


def export_runs(run_ids: list[int], output: Path, fmt: str, *, store: Path | str | None = None,
                force: bool = False) -> Path:
    """Write runs of ``store`` (read-only) to ``output``: ``json`` (each run whole: run, results, failures,
    events, samples; a list), ``csv`` or ``parquet`` (:data:`RESULT_TABLE_COLUMNS`, one row per result; Parquet
    needs pyarrow, the ``parquet`` extra). Refuses an existing ``output`` unless ``force``."""
    import json

    if fmt not in ("json", "csv", "parquet"):
        raise InputError(f"unknown export format {fmt!r}", "use --format json, csv or parquet (or trace)")
    if output.exists() and not force:
        raise InputError(f"{output} already exists", "pass --force to overwrite it, or choose another --output")
    if not output.parent.is_dir():
        raise InputError(f"cannot write {output}: folder {output.parent} does not exist", "create the folder first")
    with open_existing_store(store) as st:
        runs = [st.export_run(r, samples=fmt == "json") for r in run_ids]
    hint = "pass --force to overwrite it, or choose another --output"
    if fmt == "json":
        return write_file(output, json.dumps(runs, indent=1, sort_keys=True, default=str) + "\n", force=force,
                          hint=hint)
    rows = [_result_row(d, r) for d in runs for r in d["results"]]
    with publishing(output, force=force, hint=hint) as tmp:
        (_write_csv if fmt == "csv" else _write_parquet)(tmp, rows)
    return output


def _result_row(data: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    import json

    run = data["run"]
    source = (run.get("manifest") or {}).get("source")
    return {"run_uuid": run["run_uuid"], "run_id": run["run_id"], "kind": run["kind"], "name": run["name"],
            "status": run["status"], "started_at": run["started_at"],
            "source_format": source.get("format", "") if isinstance(source, dict) else "gpumatch",
            "metric": r["metric"], "value": r["value"], "unit": r["unit"],
            "config_json": json.dumps(r["config"], sort_keys=True) if r["config"] is not None else "",
            "extra_json": json.dumps(r["extra"], sort_keys=True) if r["extra"] is not None else ""}


def _write_csv(output: Path, rows: list[dict[str, Any]]) -> None:
    import csv

    with output.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=RESULT_TABLE_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def _write_parquet(output: Path, rows: list[dict[str, Any]]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise InputError("Parquet export needs pyarrow", "pip install 'gpumatch[parquet]', or use --format csv") from e
    table = pa.table({c: [row[c] for row in rows] for c in RESULT_TABLE_COLUMNS})
    pq.write_table(table, output)
