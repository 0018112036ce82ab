"""Shared CLI pieces: the --format option, output, and the error boundary."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import typer

from gpumatch.report.render import ColumnSpec, key_values, to_csv, to_json, to_table


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FormatOption = typer.Option(Format.table, "--format", "-f", help="Output format: table, json or csv.")

RUN_ID_MAX = 2**63 - 1
"""The largest run id (and count limit) a store can hold: SQLite's INTEGER is a signed 64-bit number; a larger
one on the command line is a one-line usage error (exit 2), not an OverflowError from the database driver."""


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit_rows(
    rows: Sequence[dict[str, Any]], fmt: Format, table_columns: Sequence[ColumnSpec] | None = None, title: str = ""
) -> None:
    """Lists: JSON gets the full objects, CSV and table the chosen columns."""
    if fmt is Format.json:
        emit(to_json(list(rows)))
    elif fmt is Format.csv:
        emit(to_csv(rows, table_columns))
    else:
        emit(to_table(rows, table_columns, title))


def emit_object(obj: dict[str, Any], fmt: Format, table_view: dict[str, Any] | None = None) -> None:
    """One object: JSON in full; table/CSV as field/value pairs of ``table_view`` (default: obj)."""
    view = obj if table_view is None else table_view
    if fmt is Format.json:
        emit(to_json(obj))
    elif fmt is Format.csv:
        emit(to_csv([{"field": k, "value": v} for k, v in view.items()], ["field", "value"]))
    else:
        emit(key_values(view))
