"""A stored run's telemetry back as a trace file (``gpumatch runs export``): the format ``gpumatch monitor
--output`` writes and ``--replay`` reads (.csv or .parquet, plus a .json sidecar with the window-edge counters
and Xids, read back from the run's events)."""

from __future__ import annotations

from pathlib import Path

from gpumatch.errors import InputError
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
