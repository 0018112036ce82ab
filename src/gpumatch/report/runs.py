"""Views of the results store for ``gpumatch runs``: the list's columns and one-line cells for nested objects."""

from __future__ import annotations

import json
from typing import Any

from gpumatch.report.render import Column, output_width

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
