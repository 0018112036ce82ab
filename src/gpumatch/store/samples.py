"""Validation of telemetry samples into table rows, and rows back into dicts.

A sample is a mapping with the keys of :data:`~gpumatch.telemetry.types.SAMPLE_FIELDS` (the telemetry layer's
contract, defined there once). ``t_s`` is required
and finite; ``gpu_index`` defaults to 0; every other known key may be missing or None (unsupported on
this device). Integer columns (``gpu_index``, ``clock_event_reasons``, ``memory_used_bytes``) accept ints
or integral floats. Non-finite floats are stored as NULL. Keys outside the schema are kept, JSON-encoded,
in the row's ``extra_json`` and merged back by :func:`row_to_sample`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.store.codec import canonical_json
from gpumatch.store.readers import field
from gpumatch.telemetry.types import INT_FIELDS, SAMPLE_FIELDS

SampleRow = tuple[Any, ...]

_MAX_INT64 = 2**63 - 1
_HINT = "a sample maps field names (t_s, gpu_index, power_instant_w, ...) to numbers or None"


def _number(key: str, value: object, i: int) -> float | int | None:
    if value is None:
        return None
    if type(value) is float and key not in INT_FIELDS:  # fast path: the common case
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        item = getattr(value, "item", None)
        if callable(item):  # numpy scalar
            return _number(key, item(), i)
        raise StoreError(f"sample {i}: {key} must be a number or None, not {type(value).__name__}", hint=_HINT)
    v: int | float = value
    if key in INT_FIELDS:
        if isinstance(v, float):
            if not math.isfinite(v):
                return None
            if not v.is_integer():
                raise StoreError(f"sample {i}: {key} must be an integer, got {v!r}", hint=_HINT)
            v = int(v)
        if not -_MAX_INT64 - 1 <= v <= _MAX_INT64:
            raise StoreError(f"sample {i}: {key}={v} does not fit a 64-bit integer", hint=_HINT)
        return v
    return float(v) if math.isfinite(v) else None


def sample_row(run_id: int, sample: Mapping[str, Any], i: int) -> SampleRow:
    """Validate one sample; returns the values in column order (run_id, *SAMPLE_FIELDS, extra_json)."""
    if not isinstance(sample, Mapping):
        raise StoreError(f"sample {i} is a {type(sample).__name__}, not a mapping", hint=_HINT)
    t_s = _number("t_s", sample.get("t_s"), i)
    if t_s is None:
        raise StoreError(f"sample {i} has no finite t_s", hint="every sample needs its time t_s in seconds")
    values: list[Any] = [run_id]
    for key in SAMPLE_FIELDS:
        v = _number(key, sample.get(key), i)
        values.append(0 if key == "gpu_index" and v is None else v)
    extra = {k: v for k, v in sample.items() if k not in SAMPLE_FIELDS}
    values.append(canonical_json(extra, f"sample {i}") if extra else None)
    return tuple(values)


def sample_rows(run_id: int, samples: Sequence[Mapping[str, Any]]) -> list[SampleRow]:
    if isinstance(samples, Mapping):
        raise StoreError("add_samples takes a sequence of samples, not one mapping", hint="wrap it: [sample]")
    return [sample_row(run_id, s, i) for i, s in enumerate(samples)]


INSERT_SQL = (
    f"INSERT INTO samples (run_id, {', '.join(SAMPLE_FIELDS)}, extra_json) "
    f"VALUES ({', '.join('?' * (len(SAMPLE_FIELDS) + 2))})"
)

SELECT_SQL = f"SELECT {', '.join(SAMPLE_FIELDS)}, extra_json FROM samples WHERE run_id = ? ORDER BY sample_id"


def row_to_sample(row: Sequence[Any], where: str = "a sample") -> dict[str, Any]:
    """A stored row (SELECT_SQL order) back to a sample dict, extras merged in (damaged extras: left out with a
    :class:`~gpumatch.errors.DataWarning` naming ``where``)."""
    out = dict(zip(SAMPLE_FIELDS, row[: len(SAMPLE_FIELDS)], strict=True))
    extra = row[len(SAMPLE_FIELDS)]
    if extra:
        out.update(field(extra, f"{where} extra_json", True, {}) or {})
    return out
