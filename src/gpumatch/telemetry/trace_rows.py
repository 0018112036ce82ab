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
from dataclasses import fields
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

#: Most samples one trace file may hold: 2 million rows is 8 GPUs at 10 Hz for 7 hours, or one GPU at 10 Hz
#: for 55 hours (~150 MB of CSV). A replay holds them and as many replayed samples in memory: a 1.5-million-row
#: (100 MB) trace replays in ~30 s in 0.8 GB (2026-12-03, this repository's 2-core CI machine).
MAX_TRACE_ROWS = 2_000_000
_CACHE_SIZE = 4096  # distinct cell texts remembered per column (clocks, temperatures, utilization repeat)
_MISS: Any = object()
_POSITIONAL = tuple(f.name for f in fields(Sample)) == SAMPLE_FIELDS


def too_many_rows(label: str, max_rows: int) -> DataFileError:
    return DataFileError(f"{label}: more than {max_rows:,} samples (the limit of one trace)",
                         "split the recording, or record at a longer --interval")


def samples_from_rows(rows: Iterable[tuple[int, dict[str, Any]]], label: str,
                      max_rows: int = MAX_TRACE_ROWS) -> tuple[Sample, ...]:
    """``rows`` are (row number as shown to the user, mapping column -> cell)."""
    check = RowChecker(label)
    out: list[Sample] = []
    for n, row in rows:
        if len(out) >= max_rows:
            raise too_many_rows(label, max_rows)
        out.append(check.sample(n, [row.get(k) for k in SAMPLE_FIELDS]))
    return tuple(out)


class RowChecker:
    """Turns the cells of one row (in :data:`SAMPLE_FIELDS` order) into a checked :class:`Sample`.

    Keeps the last ``t_s`` per GPU (time must not run backwards) and remembers the value of up to
    ``_CACHE_SIZE`` distinct cell texts per column, so a repeated "1470" is parsed and range-checked once
    (a 100 MB trace parsed 4x faster, and repeated values share one float object).
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._last_t: dict[int, float] = {}
        self._caches: list[dict[Any, float | int | None]] = [{None: None} for _ in SAMPLE_FIELDS]

    def sample(self, n: int, cells: list[Any]) -> Sample:
        vals: list[Any] = []
        append = vals.append
        try:
            for cache, v, col in zip(self._caches, cells, SAMPLE_FIELDS, strict=True):
                x = cache.get(v, _MISS)
                append(self._miss(n, col, v, cache) if x is _MISS else x)
        except TypeError:  # an unhashable cell (a Parquet list): checked, and refused, one by one
            vals = [_cell(n, col, v, self.label) for col, v in zip(SAMPLE_FIELDS, cells, strict=True)]
        t, gpu = vals[0], vals[1]
        for k, value in (("t_s", t), ("gpu_index", gpu)):
            if value is None:
                raise DataFileError(f"{self.label}: row {n}, column '{k}': empty, but it is required", _HINT)
        prev = self._last_t.get(gpu)
        if prev is not None and t < prev:
            raise DataFileError(
                f"{self.label}: row {n}, column 't_s': {t:g} is earlier than the row before it for GPU "
                f"{gpu} ({prev:g}); time must not run backwards",
                "sort the rows by t_s, or check that this is one recording",
            )
        self._last_t[gpu] = t
        return Sample(*vals) if _POSITIONAL else Sample(**dict(zip(SAMPLE_FIELDS, vals, strict=True)))


    def _miss(self, n: int, col: str, v: Any, cache: dict[Any, float | int | None]) -> float | int | None:
        x = _cell(n, col, v, self.label)
        if len(cache) < _CACHE_SIZE:
            cache[v] = x
        return x


def _cell(n: int, col: str, v: Any, label: str) -> float | int | None:
    if isinstance(v, str) and not v.strip():
        return None
    where = f"{label}: row {n}, column '{col}'"
    if col in INT_FIELDS and isinstance(v, str) and v.strip().isdigit() and len(v) < 30:
        whole = int(v)  # exact (a 64-bit reason mask or byte count is not a float's 53 bits)
        if not RANGES[col][0] <= whole <= RANGES[col][1]:
            raise DataFileError(f"{where}: {whole} is outside the possible range {RANGES[col][0]:g}.."
                                f"{RANGES[col][1]:g}", _HINT)
        return whole
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
