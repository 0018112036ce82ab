"""Turn result dicts/rows into text in one of the CLI formats (table, json, csv).

Rows are lists of flat dicts; nested values are JSON-encoded in CSV and shown compactly in tables.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

FORMATS = ("table", "json", "csv")


def _default(o: Any) -> Any:
    if hasattr(o, "isoformat"):
        return o.isoformat()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"cannot encode {type(o).__name__}")


def _clean(o: Any) -> Any:
    """JSON has no NaN/inf: turn them into null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    return o


def to_json(data: Any) -> str:
    return json.dumps(_clean(data), indent=2, default=_default, ensure_ascii=False)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict | list | tuple):
        return json.dumps(_clean(v), default=_default, ensure_ascii=False)
    return str(v)


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    cols = list(columns or (rows[0].keys() if rows else []))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    return buf.getvalue()


def to_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, title: str = "") -> str:
    """A plain aligned text table (pipes cleanly; no colour codes)."""
    cols = list(columns or (rows[0].keys() if rows else []))
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    lines = [title] if title else []
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells)
    return "\n".join(lines)


def key_values(data: dict[str, Any], title: str = "") -> str:
    """A two-column 'field  value' table for one object."""
    rows = [{"field": k, "value": v} for k, v in data.items()]
    return to_table(rows, ["field", "value"], title)
