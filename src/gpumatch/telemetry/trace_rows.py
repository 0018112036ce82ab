"""Checking the rows of a trace file before they become :class:`Sample` values.

A replayed trace is user input: every cell must be a finite number inside the range the quantity can
physically have (power >= 0 W, utilization 0-100 %, ...), integer columns integral, ``t_s``
non-decreasing per GPU, and every CSV row as long as the header. The first bad cell gives one
:class:`DataFileError` naming the file, the row (1-based line in the file for CSV) and the column.
Before this check, a trace of ``-1e308`` everywhere was labelled ``idle, valid`` with ``-inf%``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from gpumatch.errors import DataFileError
from gpumatch.telemetry.types import INT_FIELDS, SAMPLE_FIELDS, Sample

_INT64_MAX = 2**63 - 1
# column -> (lowest, highest) physically possible value, SI/NVML units as in SAMPLE_FIELDS
RANGES: dict[str, tuple[float, float]] = {
    "t_s": (-math.inf, math.inf),
    "gpu_index": (0, 1023),
    "power_instant_w": (0, 1e5),
    "power_avg_w": (0, 1e5),
    "sm_clock_mhz": (0, 1e5),
    "mem_clock_mhz": (0, 1e5),
    "clock_event_reasons": (0, _INT64_MAX),
    "gpu_temp_c": (-60, 250),
    "mem_temp_c": (-60, 250),
    "memory_used_bytes": (0, _INT64_MAX),
    "util_gpu_pct": (0, 100),
    "util_mem_pct": (0, 100),
    "gpm_sm_active": (0, 100),
    "gpm_tensor_active": (0, 100),
    "gpm_dram_bw_util": (0, 100),
}
_HINT = "fix or delete that row; traces written by 'gpumatch monitor --output' or 'gpumatch runs export' read back"


def samples_from_rows(rows: Iterable[tuple[int, dict[str, Any]]], label: str) -> tuple[Sample, ...]:
    """``rows`` are (row number as shown to the user, mapping column -> cell)."""
    out: list[Sample] = []
    last_t: dict[int, float] = {}
    for n, row in rows:
        s = _sample(n, row, label)
        prev = last_t.get(s.gpu_index)
        if prev is not None and s.t_s < prev:
            raise DataFileError(
                f"{label}: row {n}, column 't_s': {s.t_s:g} is earlier than the row before it for GPU "
                f"{s.gpu_index} ({prev:g}); time must not run backwards",
                "sort the rows by t_s, or check that this is one recording",
            )
        last_t[s.gpu_index] = s.t_s
        out.append(s)
    return tuple(out)


def _sample(n: int, row: dict[str, Any], label: str) -> Sample:
    kw: dict[str, Any] = {k: _cell(n, k, row.get(k), label) for k in SAMPLE_FIELDS}
    for k in ("t_s", "gpu_index"):
        if kw[k] is None:
            raise DataFileError(f"{label}: row {n}, column '{k}': empty, but it is required", _HINT)
    return Sample(**kw)


def _cell(n: int, col: str, v: Any, label: str) -> float | int | None:
    if v is None or (isinstance(v, str) and not v.strip()):
        return None
    where = f"{label}: row {n}, column '{col}'"
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise DataFileError(f"{where}: {_shown(v)} is not a number", _HINT) from None
    if not math.isfinite(x):
        raise DataFileError(f"{where}: {_shown(v)} is not a finite number", _HINT)
    lo, hi = RANGES[col]
    if not lo <= x <= hi:
        raise DataFileError(f"{where}: {x:g} is outside the possible range {lo:g}..{hi:g}", _HINT)
    if col in INT_FIELDS:
        if x != int(x):
            raise DataFileError(f"{where}: {_shown(v)} is not a whole number", _HINT)
        return int(v) if isinstance(v, int) else int(x)
    return x


def _shown(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
