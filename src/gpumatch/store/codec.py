"""JSON encoding for store columns, and the canonical form that manifest hashes are taken over.

Rules (the same for every JSON column, so that hashes are reproducible):

- Keys must be strings; values JSON types, plus ``Path`` (stored as its string), ``datetime``/``date``
  (ISO 8601), tuples and lists (arrays), enums (their value) and objects with ``to_dict()``.
- Non-finite floats (NaN, +-inf) become ``null``: JSON has none, and a measured NaN means "no value".
- Canonical form: ``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` of the
  normalised value, UTF-8 encoded; the manifest hash is the SHA-256 hex digest of those bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from pathlib import PurePath
from typing import Any

from gpumatch.errors import StoreError


def normalise(value: Any, where: str = "value") -> Any:
    """Return a plain-JSON copy of ``value`` under the rules above; :class:`StoreError` otherwise."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise StoreError(f"{where}: key {k!r} is not a string", hint="use string keys in stored dicts")
            out[k] = normalise(v, f"{where}.{k}")
        return out
    if isinstance(value, list | tuple):
        return [normalise(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return normalise(value.value, where)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return normalise(to_dict(), where)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return normalise(value.item(), where)
    raise StoreError(
        f"{where}: {type(value).__name__} cannot be stored as JSON",
        hint="pass numbers, strings, lists and dicts (or convert the value first)",
    )


def canonical_json(value: Any, where: str = "value") -> str:
    """The canonical JSON text of ``value`` (sorted keys, no spaces, non-finite floats as null)."""
    return json.dumps(normalise(value, where), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def manifest_sha256(manifest: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of the canonical JSON of ``manifest`` (same manifest -> same hash, any key order)."""
    return hashlib.sha256(canonical_json(manifest, "manifest").encode("utf-8")).hexdigest()


def dumps_optional(value: Mapping[str, Any] | None, where: str) -> str | None:
    return None if value is None else canonical_json(value, where)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
