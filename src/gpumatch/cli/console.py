"""Output that degrades instead of failing on a stdout/stderr that cannot encode every character.

Under ``PYTHONIOENCODING=ascii``, a non-UTF-8 locale or a pipe opened as ASCII, printing "×" or "≥" raised
``UnicodeEncodeError`` (exit 1, an internal error). :func:`degrade_unencodable` registers the codec error
handler ``"gpumatch-ascii"`` and sets it on both streams: a character the stream's encoding lacks becomes its
ASCII equivalent from :data:`ASCII_EQUIVALENTS` (``×`` -> ``x``, ``≥`` -> ``>=``, ``µ`` -> ``u``, box drawing
-> ``-|+``), else its accent-stripped letter (``é`` -> ``e``), else ``?``. Characters the encoding has are
written as they are (a UTF-8 terminal sees no change).
"""

from __future__ import annotations

import codecs
import io
import sys
import unicodedata

HANDLER = "gpumatch-ascii"

#: Characters gpumatch prints (messages, tables, catalog notes) and what an ASCII-only stream gets instead.
ASCII_EQUIVALENTS: dict[str, str] = {
    "×": "x", "·": ".", "−": "-", "–": "-", "—": "-", "‐": "-", "‑": "-", "…": "...", "°": " deg",
    "≥": ">=", "≤": "<=", "≠": "!=", "≈": "~", "±": "+/-", "→": "->", "←": "<-", "÷": "/", "µ": "u", "μ": "u",
    "²": "^2", "³": "^3", "Σ": "sum", "Δ": "d", "β": "beta", "•": "*", "‘": "'", "’": "'", "“": '"', "”": '"',
    "\u00a0": " ", "\u202f": " ", "\u2009": " ", "\u2007": " ", "✓": "ok", "✗": "x", "€": "EUR", "£": "GBP",
}


def _box(ch: str) -> str | None:
    """U+2500-U+257F box drawing: horizontal lines -> '-' (double '='), vertical -> '|', the rest '+'."""
    if not "\u2500" <= ch <= "\u257f":
        return None
    name = unicodedata.name(ch, "")
    if "HORIZONTAL" in name and "VERTICAL" not in name and "AND" not in name:
        return "=" if "DOUBLE" in name else "-"
    if "VERTICAL" in name and "HORIZONTAL" not in name and "AND" not in name:
        return "|"
    return "+"


def ascii_equivalent(ch: str) -> str:
    """The ASCII stand-in for one character (module docstring)."""
    if ch in ASCII_EQUIVALENTS:
        return ASCII_EQUIVALENTS[ch]
    box = _box(ch)
    if box is not None:
        return box
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    return base if base and base.isascii() else "?"


def _degrade(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ascii_equivalent(c) for c in err.object[err.start:err.end]), err.end


def degrade_unencodable() -> None:
    """Register the handler and set it on ``sys.stdout`` and ``sys.stderr`` (idempotent)."""
    try:
        codecs.lookup_error(HANDLER)
    except LookupError:
        codecs.register_error(HANDLER, _degrade)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors != HANDLER:
            try:
                stream.reconfigure(errors=HANDLER)
            except (ValueError, OSError):  # a closed or detached stream: nothing to print to anyway
                continue
