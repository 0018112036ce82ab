"""Name resolution shared by the GPU catalog and the model presets.

Names match case- and punctuation-insensitively ("H100 SXM" == "h100-sxm"). An exact match of a
name or alias wins; otherwise a query that is contained in exactly one entry's names resolves to
it, several such entries are an :class:`AmbiguousNameError`, and none an :class:`UnknownNameError`
that lists the closest names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from gpumatch.errors import AmbiguousNameError, UnknownNameError

T = TypeVar("T")
_LOOKALIKES = str.maketrans({"o": "0", "l": "1", "i": "1"})
# a vendor word standing alone between non-alphanumerics: "NVIDIA_H100" and "amd-mi300x" lose it,
# "intellect" keeps its letters
_VENDOR_WORDS = re.compile(r"(?<![a-z0-9])(nvidia|amd|intel|habana)(?![a-z0-9])")


def normalize(name: str) -> str:
    """'NVIDIA_H100-SXM5 80GB' -> 'h100sxm580gb' (vendor words and punctuation dropped)."""
    return re.sub(r"[^a-z0-9]", "", _VENDOR_WORDS.sub("", name.lower()))


def build_index(entries: Iterable[tuple[str, Iterable[str], T]]) -> dict[str, list[tuple[str, T]]]:
    """Map each normalized name/alias to the (canonical name, entry) pairs that carry it."""
    index: dict[str, list[tuple[str, T]]] = {}
    for canonical, aliases, entry in entries:
        for n in {normalize(canonical), *(normalize(a) for a in aliases)}:
            if n and all(c != canonical for c, _ in index.get(n, [])):
                index.setdefault(n, []).append((canonical, entry))
    return index


MAX_NAME_CHARS = 200


def _shown(query: str) -> str:
    """The query as echoed in messages: repr (control characters escaped), cut to 60 characters."""
    return repr(query if len(query) <= 60 else query[:57] + "...")


def resolve(query: str, index: Mapping[str, list[tuple[str, T]]], what: str, list_cmd: str) -> T:
    """Resolve ``query`` against ``index`` (from :func:`build_index`) or raise with close matches.

    Queries longer than ``MAX_NAME_CHARS`` are refused before any fuzzy matching (which is
    quadratic in the query length), so a pasted file or a hostile argument fails at once.
    """
    if len(query) > MAX_NAME_CHARS:
        raise UnknownNameError(
            f"{what} name {_shown(query)} is {len(query)} characters long (at most {MAX_NAME_CHARS})",
            f"see '{list_cmd}'",
        )
    key = normalize(query)
    if not key:
        shown = f" {_shown(query.strip())} has only vendor words or punctuation" if query.strip() else ""
        raise UnknownNameError(f"empty {what} name{shown}", f"add the model, see '{list_cmd}'")
    exact = index.get(key)
    if exact and len(exact) == 1:
        return exact[0][1]
    hits: dict[str, T] = {}
    for n, pairs in index.items():
        if key in n or (exact and n == key):
            for canonical, entry in pairs:
                hits[canonical] = entry
    if len(hits) == 1:
        return next(iter(hits.values()))
    if hits:
        names = sorted(hits)
        raise AmbiguousNameError(
            f"{what} {_shown(query)} is ambiguous: it matches {', '.join(names)}",
            f"name one of them, e.g. {names[0]!r}",
        )
    canon = sorted({c for pairs in index.values() for c, _ in pairs})
    suggestions = close_matches(key, index)
    hint = f"did you mean {', '.join(suggestions)}?" if suggestions else f"see '{list_cmd}'"
    if not suggestions and len(canon) <= 8:
        hint = f"known: {', '.join(canon)}"
    raise UnknownNameError(f"unknown {what} {_shown(query)}", hint)


def close_matches(key: str, index: Mapping[str, list[tuple[str, T]]], limit: int = 5) -> list[str]:
    """Canonical names whose normalized names or aliases look like ``key`` (a typo such as "h1OO").

    A name scores the best difflib ratio of ``key`` (and of ``key`` with the look-alike letters
    o/l/i read as digits 0/1/1) against the name and against its prefix of ``key``'s length, so a
    short typo still finds long names ("h1OO" ~ "h100" of "h100sxm580gb"). Only the best-scoring
    names at or above 0.5 are returned, at most ``limit``.
    """
    variants = {key, key.translate(_LOOKALIKES)}
    scored: dict[str, float] = {}
    for n, pairs in index.items():
        score = max(difflib.SequenceMatcher(None, k, cand).ratio() for k in variants for cand in (n, n[: len(k)]))
        for canonical, _ in pairs:
            scored[canonical] = max(score, scored.get(canonical, 0.0))
    best = max(scored.values(), default=0.0)
    if best < 0.5:
        return []
    top = sorted((c for c, v in scored.items() if v >= best - 0.05), key=lambda c: (-scored[c], c))
    return sorted(top[:limit])
