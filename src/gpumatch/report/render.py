"""Turn result dicts/rows into text in one of the CLI formats (table, json, csv).

Rows are lists of flat dicts; nested values are JSON-encoded in CSV and shown compactly in tables.

Tables fit the output width (:func:`output_width`): ``$COLUMNS`` when it is set, else the terminal's width when
stdout is a terminal, else 80 — so a pipe or a file gets the same 80-column text every time, and
``COLUMNS=200 gpumatch ... | less`` asks for wider. Never narrower than :data:`MIN_WIDTH`. To fit, a table

1. leaves out its secondary columns, in the order each table declares (:attr:`Column.drop`), and says which,
   until the rest fits with its prose columns at least ~24 wide;
2. wraps prose columns (:attr:`Column.wrap`) at spaces, widest first, down to about their longest word;
3. leaves out further undeclared columns from the right (tables given as plain column names);
4. when more than two columns still do not fit (a very narrow terminal), prints each row as a record, one
   "header: value" line per column; a two-column table cuts its cells with an ellipsis as the last resort.

Quantities named by the SI convention (``total_bytes``, ``tpot_s``, ``power_w``; :func:`gpumatch.report.human.
by_name`) show in human units ("79.6 GiB", "7.42 ms", "445 W"); ``--format json|csv`` keep every key and the
SI numbers, unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gpumatch.report import human

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
GAP = 2
ELLIPSIS = "…"
_MIN_WRAP = 8
_LONG_WORD = 20
_COMFORTABLE = 24


@dataclass(frozen=True)
class Column:
    """One table column. ``drop``: 0 keeps it always (primary); 1, 2, ... are secondary columns, left out in
    that order (1 first) when the table does not fit. ``wrap``: prose that may span lines; otherwise one line,
    cut with an ellipsis only as the last resort. ``max_lines``: wrap to at most this many lines (0: no limit),
    the last one cut. ``cut_to``: a one-line column that may be cut to this width before secondary columns are
    left out (0: only as the last resort). ``fmt``: the cell text of a value (default: human units by the key's
    name, else plain)."""

    key: str
    header: str = ""
    drop: int = 0
    wrap: bool = True
    max_lines: int = 0
    align: Literal["left", "right"] = "left"
    cut_to: int = 0
    fmt: Callable[[Any], str] | None = None

    @property
    def title(self) -> str:
        return self.header or self.key


ColumnSpec = str | Column


def output_width() -> int:
    """The width tables fit: ``$COLUMNS`` if it is a positive integer, else the terminal's columns when stdout is
    a terminal, else :data:`DEFAULT_WIDTH` (80: a pipe gets stable text); at least :data:`MIN_WIDTH`."""
    env = os.environ.get("COLUMNS", "").strip()
    width = DEFAULT_WIDTH
    if env.isdigit() and int(env) > 0:
        width = int(env)
    else:
        try:
            if sys.stdout.isatty():
                width = os.get_terminal_size(sys.stdout.fileno()).columns or DEFAULT_WIDTH
        except (OSError, ValueError, AttributeError):
            width = DEFAULT_WIDTH
    return max(MIN_WIDTH, width)


def text_width(s: str) -> int:
    """Columns ``s`` takes on a terminal: wide (CJK) characters count 2, combining marks 0."""
    if s.isascii():
        return len(s)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def cut(s: str, width: int) -> str:
    """``s`` if it fits ``width`` columns, else its head and an ellipsis."""
    if text_width(s) <= width:
        return s
    out, used = [], 0
    for c in s:
        w = text_width(c)
        if used + w > width - 1:
            break
        out.append(c)
        used += w
    return "".join(out).rstrip() + ELLIPSIS


_BREAK_AFTER = "/-_.,:;"


def _split_word(word: str, width: int) -> list[str]:
    """A word wider than ``width`` in pieces, each broken after a path or list separator where one is in the
    second half of the piece (``tests/data/`` | ``traces/``), else at the width."""
    parts, cur = [], ""
    for c in word:
        if cur and text_width(cur + c) > width:
            at = max(cur.rfind(x) for x in _BREAK_AFTER)
            if at + 1 >= len(cur) // 2 and at + 1 < len(cur):
                parts.append(cur[: at + 1])
                cur = cur[at + 1:]
            else:
                parts.append(cur)
                cur = ""
        cur += c
    return [*parts, cur] if cur else parts


def wrap_text(text: str, width: int) -> list[str]:
    """Greedy word wrap by display width; newlines start new lines; a word wider than ``width`` is split."""
    width = max(1, width)
    lines: list[str] = []
    for para in text.split("\n"):
        cur, used = "", 0
        for word in para.split():
            ww = text_width(word)
            if cur and used + 1 + ww <= width:
                cur, used = f"{cur} {word}", used + 1 + ww
                continue
            if cur:
                lines.append(cur)
            if ww > width:
                *full, cur = _split_word(word, width)
                lines.extend(full)
                used = text_width(cur)
            else:
                cur, used = word, ww
        lines.append(cur)
    return lines


_MARKER = re.compile(r"^(\s*)((?:[-*•]|\d+\.|#\d+)\s+)?")


def wrap_block(text: str, width: int | None = None) -> str:
    """Prose lines wrapped to ``width`` (default :func:`output_width`), each keeping its indentation; lines
    that go on are indented under the text after a list marker ("- ", "2. "), else two columns deeper."""
    width = output_width() if width is None else width
    out: list[str] = []
    for line in text.split("\n"):
        if text_width(line) <= width:
            out.append(line)
            continue
        m = _MARKER.match(line)
        indent, marker = (m.group(1), m.group(2) or "") if m else ("", "")
        hang = " " * (len(indent) + (len(marker) if marker else 2))
        first = wrap_text(line[len(indent) + len(marker):], width - len(indent) - len(marker))
        out.append(indent + marker + first[0])
        rest = " ".join(first[1:])
        if rest:
            out.extend(hang + x for x in wrap_text(rest, width - len(hang)))
    return "\n".join(out)


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


def _key(c: ColumnSpec) -> str:
    return c.key if isinstance(c, Column) else c


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[ColumnSpec] | None = None) -> str:
    cols = [_key(c) for c in columns] if columns else list(rows[0].keys() if rows else [])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    return buf.getvalue()


def human_value(name: str, v: Any) -> Any:
    """``v`` in human units when it is a number and ``name`` ends in a unit (``tpot_s``), else ``v``."""
    fn = human.by_name(name) if human.is_number(v) else None
    return v if fn is None else fn(v)


def _text(col: Column, v: Any) -> str:
    """A table cell: the column's format, else human units by name, else plain (whole floats without an
    exponent: 10200, not 1.02e+04)."""
    if col.fmt is not None:
        return col.fmt(v)
    v = human_value(col.key, v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return _cell(v)


@dataclass
class _Layout:
    cols: list[Column]
    cells: list[list[str]]
    keep: list[int]
    widths: dict[int, int]
    dropped: list[str]
    records: bool = False


def _longest_word(texts: Sequence[str]) -> int:
    return max((text_width(w) for t in texts for w in t.split()), default=0)


def _natural(col: Column, texts: Sequence[str]) -> int:
    return max([text_width(col.title)] + [text_width(x) for t in texts for x in t.split("\n")])


def _minimal(col: Column, texts: Sequence[str], natural: int) -> int:
    if not col.wrap:
        return natural
    return max(text_width(col.title), min(natural, max(min(_longest_word(texts), _LONG_WORD), _MIN_WRAP)))


def _span(widths: dict[int, int], keep: Sequence[int]) -> int:
    return sum(widths[i] for i in keep) + GAP * max(0, len(keep) - 1)


def _layout(cols: list[Column], cells: list[list[str]], width: int, auto: bool) -> _Layout:
    """Which columns to keep and how wide each is (module docstring: drop declared, wrap, drop from the
    right for plain tables, cut)."""
    texts = [[row[i] for row in cells] for i in range(len(cols))]
    natural = {i: _natural(c, texts[i]) for i, c in enumerate(cols)}
    minimal = {i: _minimal(c, texts[i], natural[i]) for i, c in enumerate(cols)}
    # secondary columns go before prose is squeezed under a comfortable width
    comfortable = {i: min(natural[i], max(minimal[i], _COMFORTABLE)) if c.wrap
                   else min(natural[i], max(c.cut_to, text_width(c.title))) if c.cut_to else natural[i]
                   for i, c in enumerate(cols)}
    keep, dropped = list(range(len(cols))), []
    for i in sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: (cols[i].drop, -i)):
        if _span(comfortable, keep) <= width:
            break
        keep.remove(i)
        dropped.append(cols[i].title)
    while auto and len(keep) > 1 and _span(minimal, keep) > width:
        dropped.append(cols[keep.pop()].title)
    widths = {i: natural[i] for i in keep}
    _shrink(widths, keep, width, floor=comfortable, only=[i for i in keep if cols[i].cut_to])
    _shrink(widths, keep, width, floor=minimal, only=[i for i in keep if cols[i].wrap])
    if _span(widths, keep) > width and len(keep) > 2:  # columns would be cut to shreds: one record per row
        return _Layout(cols, cells, list(range(len(cols))), widths, [], records=True)
    _shrink(widths, keep, width, floor={i: 3 for i in keep}, only=keep)
    while len(keep) > 1 and _span(widths, keep) > width:
        dropped.append(cols[keep.pop()].title)
    if _span(widths, keep) > width:
        widths[keep[0]] = width
    return _Layout(cols, cells, keep, widths, dropped)


def _shrink(widths: dict[int, int], keep: list[int], width: int, floor: dict[int, int], only: list[int]) -> None:
    """Narrow the widest of ``only`` one column at a time until the row fits or each is at its floor."""
    while _span(widths, keep) > width:
        can = [i for i in only if widths[i] > floor[i]]
        if not can:
            return
        i = max(can, key=lambda i: (widths[i], i))
        widths[i] -= 1


def _pad(s: str, width: int, align: str) -> str:
    fill = " " * max(0, width - text_width(s))
    return fill + s if align == "right" else s + fill


def _cell_lines(col: Column, text: str, width: int) -> list[str]:
    if not col.wrap:
        return [cut(text.replace("\n", " "), width)]
    lines = wrap_text(text, width) if text_width(text) > width or "\n" in text else [text]
    if col.max_lines and len(lines) > col.max_lines:
        lines = [*lines[: col.max_lines - 1], cut(" ".join(lines[col.max_lines - 1:]), width)]
        if not lines[-1].endswith(ELLIPSIS):
            lines[-1] = cut(lines[-1] + " " + ELLIPSIS, width)
    return lines


def _row_lines(lay: _Layout, row: list[str]) -> list[str]:
    blocks = [_cell_lines(lay.cols[i], row[i], lay.widths[i]) for i in lay.keep]
    height = max(len(b) for b in blocks) if blocks else 1
    out = []
    for k in range(height):
        parts = [_pad(b[k] if k < len(b) else "", lay.widths[i], lay.cols[i].align)
                 for b, i in zip(blocks, lay.keep, strict=True)]
        out.append((" " * GAP).join(parts).rstrip())
    return out


def _records(rows: Sequence[dict[str, Any]], specs: list[Column], cells: list[list[str]], width: int,
             detail_key: str | None) -> list[str]:
    """Each row as "header: value" lines (the first unindented, the rest indented two), then its detail."""
    out: list[str] = []
    for r, row in zip(rows, cells, strict=True):
        for k, (col, text) in enumerate(zip(specs, row, strict=True)):
            if text:
                out.append(wrap_block(("" if k == 0 else "  ") + f"{col.title}: {text}", width))
        detail = r.get(detail_key) if detail_key else None
        if detail:
            out.extend("  " + x for x in wrap_text(str(detail), width - 2))
    return out


def to_table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[ColumnSpec] | None = None,
    title: str = "",
    width: int | None = None,
    detail_key: str | None = None,
    detail_indent: int = 4,
) -> str:
    """A plain aligned text table that fits ``width`` columns (default :func:`output_width`; module docstring
    for how). ``columns``: keys or :class:`Column` specs (default: the first row's keys). ``detail_key``: a row
    field printed as a wrapped line under its row, indented ``detail_indent``. Pipes cleanly: no colour codes."""
    width = output_width() if width is None else width
    auto = not columns or not any(isinstance(c, Column) for c in columns)
    specs = [c if isinstance(c, Column) else Column(c) for c in (columns or (rows[0].keys() if rows else []))]
    cells = [[_text(c, r.get(c.key)) for c in specs] for r in rows]
    lay = _layout(specs, cells, width, auto)
    lines = [wrap_block(t, width) for t in title.split("\n")] if title else []
    if lay.records:
        return "\n".join([*lines, *_records(rows, specs, cells, width, detail_key)])
    lines.append(cut((" " * GAP).join(_pad(cut(specs[i].title, lay.widths[i]), lay.widths[i], specs[i].align)
                                      for i in lay.keep).rstrip(), width))
    lines.append((" " * GAP).join("-" * lay.widths[i] for i in lay.keep))
    for r, row in zip(rows, cells, strict=True):
        lines.extend(_row_lines(lay, row))
        detail = r.get(detail_key) if detail_key else None
        if detail:
            lines.extend(" " * detail_indent + x for x in wrap_text(str(detail), width - detail_indent))
    if lay.dropped:
        lines.extend(wrap_text(f"(left out to fit {width} columns: {', '.join(lay.dropped)}; --format json has "
                               "them)", width))
    return "\n".join(lines)


def key_values(data: dict[str, Any], title: str = "", width: int | None = None) -> str:
    """A two-column 'field  value' table for one object; values wrap, quantities in human units."""
    rows = [{"field": k, "value": human_value(k, v)} for k, v in data.items()]
    return to_table(rows, [Column("field", wrap=False), Column("value")], title, width)
