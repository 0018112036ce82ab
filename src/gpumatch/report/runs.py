"""Views of the results store for ``gpumatch runs``: the list's rows and columns, ``show`` as a table or CSV,
one-line cells for nested objects, and the one-line messages of ``check``, ``migrate`` and ``recover``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpumatch.report.render import Column, key_values, output_width, to_csv, to_table

if TYPE_CHECKING:
    from gpumatch.store.records import RunRecord

LIST_COLUMNS = [
    Column("run_id", "run"),
    Column("kind", wrap=False),
    Column("name", wrap=False, cut_to=30),  # one row per run: a long command is cut here, whole in CSV/JSON
    Column("status", wrap=False),
    Column("started_at", wrap=True),
    Column("duration_s", "duration", drop=5),
    Column("n_results", "results", drop=2),
    Column("n_samples", "samples", drop=1),
    Column("n_failures", "failures", drop=3),
    Column("manifest", drop=4),
]
"""``gpumatch runs list``: on a narrow terminal the counts go first (samples, results, failures), then the
manifest hash, then the duration; the name is cut to 30 columns before any of them goes."""

FIELD_WIDTH = 17
"""The widest field name of ``runs show`` (``manifest_sha256``) and the gap after it."""


def nested_cell(value: Any, width: int | None = None) -> Any:
    """A field/value cell for ``runs show``: nested objects (manifest, config, summary) as one line that fits
    the value column (``width`` columns; default the output width less :data:`FIELD_WIDTH`), cut with the
    length and where the whole is ("… (1,644 chars; --format json)"); other values as they are."""
    if not isinstance(value, dict | list):
        return value
    text = json.dumps(value, separators=(", ", ": "), default=str)
    room = max(30, (output_width() - FIELD_WIDTH) if width is None else width)
    if len(text) <= room:
        return text
    tail = f"… ({len(text):,} chars; --format json)"
    return text[: max(1, room - len(tail))] + tail


NAME_WIDTH = 60
"""A run's name (a command line) in a table row: one line, cut to this many characters."""

RESULT_COLUMNS = ["result_id", "metric", "value", "unit", "config"]
RESULT_CSV_COLUMNS = ["result_id", "metric", "value", "unit", "config", "extra"]
FAILURE_COLUMNS = ["failure_id", "error_class", "message", "config"]
RECOVER_COLUMNS = ["table", "copied", "unreadable_ids", "dropped"]


def list_rows(runs: Sequence[RunRecord], fmt: str) -> list[dict[str, Any]]:
    """``runs list`` rows: the whole records for JSON; for a table or CSV the short manifest hash and the start
    time to the second, and in a table a name on one line (a ``python -c`` script spans lines)."""
    if fmt == "json":
        return [r.to_dict() for r in runs]
    out = []
    for run in runs:
        d: dict[str, Any] = run.to_dict()
        d["manifest"] = run.manifest_sha256[:12]
        if fmt == "table":
            name = " ".join(str(d.get("name") or "").split())
            d["name"] = name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 1] + "…"
        d["started_at"] = run.started_at[:19].replace("T", " ")
        out.append(d)
    return out


def manifest_warnings(runs: Sequence[RunRecord], path: Path | str) -> list[str]:
    """A line per run whose manifest no longer hashes to its key (listed, but ``runs show`` refuses it)."""
    return [f"warning: run {r.run_id}: manifest hash mismatch (the store file was changed or damaged; "
            f"'gpumatch runs check --store {path}' checks the whole file)" for r in runs if not r.manifest_ok]


def show_text(data: dict[str, Any]) -> str:
    """``runs show`` as a table: the run's fields (nested objects on one line), then its results and failures."""
    run = {k: nested_cell(v) for k, v in data["run"].items() if k not in ("writer", "started_unix_s")}
    parts = [key_values(run)]
    if data["results"]:
        parts += ["", to_table(data["results"], RESULT_COLUMNS, "Results")]
    if data["failures"]:
        parts += ["", to_table(data["failures"], FAILURE_COLUMNS, "Failures")]
    return "".join(p if p.endswith("\n") else p + "\n" for p in parts)


def show_csv(data: dict[str, Any], samples: bool) -> str:
    """``runs show`` as CSV: the rows a spreadsheet wants (the samples when asked, else the results)."""
    return to_csv(data["samples"], None) if samples else to_csv(data["results"], RESULT_CSV_COLUMNS)


def check_cells(report: dict[str, Any]) -> dict[str, Any]:
    """``runs check`` as field/value cells (the mismatch list on one line)."""
    return {k: nested_cell(v) for k, v in report.items()}


def migrated_line(path: Path | str, before: Sequence[str], after: Sequence[str]) -> str:
    if before == after:
        return f"results store {path} is up to date (schema {after[-1]})"
    return (f"results store {path} upgraded from {before[-1] if before else 'empty'} to {after[-1]} "
            f"({len(after) - len(before)} migration(s))")


def recovered_line(copied: int, lost: int, output: Path) -> str:
    return f"{copied} rows copied into {output}{f'; up to {lost} lost to the damage' if lost else ''}"


def copied_line(report: dict[str, Any]) -> str:
    """One line after ``runs push|pull|merge``."""
    extra = []
    if report["still_running"]:
        extra.append(f"{len(report['still_running'])} still running left for a later copy")
    if report["damaged"]:
        extra.append(f"{len(report['damaged'])} with a damaged manifest not copied")
    tail = f"; {', '.join(extra)}" if extra else ""
    return (f"{len(report['copied'])} run(s) copied from {report['source']} to {report['target']}, "
            f"{report['already_there']} already there{tail}")


def refused_line(out: dict[str, Any]) -> str | None:
    """The warning after ``runs import`` when values of the file were refused (not stored), else None."""
    refused = out.get("refused") or []
    if not refused or not out["created"]:
        return None
    names = ", ".join(f"{r['source_key'] or r['metric']} ({r['why']})" for r in refused[:6])
    more = f" and {len(refused) - 6} more" if len(refused) > 6 else ""
    return f"warning: {len(refused)} value(s) refused, not stored: {names}{more}"


def imported_line(out: dict[str, Any]) -> str:
    """One line after ``runs import``."""
    if out["created"]:
        missing = out.get("missing") or []
        note = f"; the file does not say its {' or its '.join(missing)}" if missing else ""
        return (f"{out['format']} file stored as {out.get('kind', 'bench')} run {out['run_id']} ({out['results']} "
                f"results) in {out['store']}{note}")
    return f"this file was imported before: run {out['run_id']} in {out['store']} (nothing written)"
