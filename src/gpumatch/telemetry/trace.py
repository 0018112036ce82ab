"""A recorded telemetry trace and its files: samples as CSV (or Parquet) plus a JSON sidecar.

Layout (stable; the committed fixtures in tests/data/traces/ use it):

- ``NAME.csv``: one row per sample, columns :data:`~gpumatch.telemetry.types.SAMPLE_FIELDS`
  (empty cell = not reported). ``clock_event_reasons`` is the NVML bitmask as a decimal integer.
- ``NAME.json`` (the sidecar): ``format`` (this layout's version), ``interval_s``, ``system``,
  ``devices`` (DeviceInfo per GPU), ``edges`` (window-edge counters), ``xid_events``, ``stats``
  (sampler cost) and ``meta`` (free text: card, driver, date, what ran).

Parquet needs pyarrow (the ``parquet`` extra); the sidecar is the same JSON either way.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpumatch import stats
from gpumatch.errors import DataFileError, InputError, MissingDependencyError
from gpumatch.files import open_seekable, open_text, parse_json_object, read_text
from gpumatch.outfiles import publishing, write_file
from gpumatch.telemetry.trace_rows import MAX_TRACE_ROWS, RowChecker, samples_from_rows, too_many_rows
from gpumatch.telemetry.types import (
    INT_FIELDS,
    SAMPLE_FIELDS,
    DeviceInfo,
    EdgeCounters,
    Sample,
    SystemInfo,
    XidEvent,
)

TRACE_FORMAT = 1


@dataclass(frozen=True)
class SamplerStats:
    """What sampling cost: ticks, ticks that overran the interval, and wall time per tick (s)."""

    ticks: int = 0
    overruns: int = 0
    mean_tick_s: float = 0.0
    max_tick_s: float = 0.0
    gpm_reads: int = 0
    edge_reads: int = 0


@dataclass(frozen=True)
class Trace:
    """Samples and window-edge counters of one or more GPUs over one recording."""

    samples: tuple[Sample, ...]
    devices: tuple[DeviceInfo, ...]
    system: SystemInfo = field(default_factory=SystemInfo)
    edges: tuple[EdgeCounters, ...] = ()
    xid_events: tuple[XidEvent, ...] = ()
    interval_s: float = 0.1
    stats: SamplerStats = field(default_factory=SamplerStats)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        if not self.samples:
            return 0.0
        return self.samples[-1].t_s - self.samples[0].t_s

    def gpu_indices(self) -> list[int]:
        return sorted({s.gpu_index for s in self.samples} | {d.index for d in self.devices})

    def for_gpu(self, index: int) -> Trace:
        """The part of this trace that belongs to one GPU."""
        return Trace(
            samples=tuple(s for s in self.samples if s.gpu_index == index),
            devices=tuple(d for d in self.devices if d.index == index),
            system=self.system,
            edges=tuple(e for e in self.edges if e.gpu_index == index),
            xid_events=tuple(x for x in self.xid_events if x.gpu_index in (index, -1)),
            interval_s=self.interval_s,
            stats=self.stats,
            meta=self.meta,
        )

    def sidecar(self) -> dict[str, Any]:
        return {
            "format": TRACE_FORMAT,
            "interval_s": self.interval_s,
            "system": self.system.to_dict(),
            "devices": [d.to_dict() for d in self.devices],
            "edges": [e.to_dict() for e in self.edges],
            "xid_events": [asdict(x) for x in self.xid_events],
            "stats": asdict(self.stats),
            "meta": self.meta,
        }


def sidecar_path(path: Path) -> Path:
    return path.with_suffix(".json")


def write_trace(trace: Trace, path: Path) -> list[Path]:
    """Write samples to ``path`` (.csv or .parquet) and the sidecar next to it; return both paths. Each file is
    written to a temporary and renamed over its name (:mod:`gpumatch.outfiles`): it is whole or absent, and the
    sidecar goes first, so a trace file that is there has its sidecar (callers refuse existing files beforehand
    unless told to overwrite)."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise InputError(f"unknown trace file type '{path.suffix}'", "use a name ending in .csv or .parquet")
    rows = [s.to_dict() for s in trace.samples]
    side = sidecar_path(path)
    try:
        write_file(side, json.dumps(trace.sidecar(), indent=1) + "\n", force=True)
        with publishing(path, force=True) as tmp:  # last: a trace file that is there has its sidecar
            (_write_csv if suffix == ".csv" else _write_parquet)(rows, tmp)
    except OSError as e:
        where = e.filename or path
        raise InputError(f"cannot write {where}: {e.strerror or e}", "check the folder and its permissions") from e
    return [path, side]


def _write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(SAMPLE_FIELDS)
        for r in rows:
            w.writerow(["" if r[k] is None else _fmt(r[k]) for k in SAMPLE_FIELDS])


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.0f}"
    return str(v)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as e:
        raise MissingDependencyError(
            "Parquet traces need pyarrow", "pip install 'gpumatch[parquet]', or write a .csv trace instead"
        ) from e
    return pyarrow


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    pa = _pyarrow()
    cols = {k: [r[k] for r in rows] for k in SAMPLE_FIELDS}
    types = {k: (pa.int64() if k in INT_FIELDS else pa.float64()) for k in SAMPLE_FIELDS}
    table = pa.table({k: pa.array(v, type=types[k]) for k, v in cols.items()})
    pa.parquet.write_table(table, str(path))


#: Limits of one trace (README "Exit codes"): the CSV or Parquet file, its rows (trace_rows.MAX_TRACE_ROWS)
#: and its JSON sidecar. A gpumatch CSV row is 60-120 bytes, so 2 million rows fit in 256 MB; a sidecar holds
#: per-GPU facts and window-edge readings (a few kB per GPU). Past a limit, one line says which.
MAX_TRACE_BYTES = 256_000_000
MAX_SIDECAR_BYTES = 16_000_000
#: GPUs one trace may describe (gpu_index is 0..1023 in trace_rows.RANGES), and edge/Xid entries it may list.
MAX_TRACE_GPUS = 1024
MAX_SIDECAR_ENTRIES = 100_000
_TOO_BIG = "split the recording, or record at a longer --interval"
_SIDECAR_HINT = "fix it, or move it away to replay the samples alone"


def read_trace(path: Path) -> Trace:
    """Read a trace written by :func:`write_trace` (the sidecar is optional for CSV).

    Every row is checked (numbers, finite, physical ranges, time order, row length: see
    :mod:`gpumatch.telemetry.trace_rows`); a bad file is one :class:`DataFileError` naming the file,
    the row and the column. Files are read through :mod:`gpumatch.files` (regular files only) and streamed:
    at most :data:`MAX_TRACE_BYTES` bytes and :data:`~gpumatch.telemetry.trace_rows.MAX_TRACE_ROWS` rows.
    """
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise InputError(f"unknown trace file type '{path.suffix}'", "use a .csv or .parquet trace")
    if not os.path.lexists(path):
        raise InputError(f"trace file '{path}' does not exist", "give the path of a .csv or .parquet trace")
    label = f"trace '{path}'"
    samples = _read_csv(path, label) if suffix == ".csv" else _read_parquet(path, label)
    return _assemble(samples, _read_sidecar(sidecar_path(path)), path)


def _read_parquet(path: Path, label: str) -> tuple[Sample, ...]:
    pa = _pyarrow()
    with open_seekable(path, label, MAX_TRACE_BYTES, _TOO_BIG) as fh:
        try:
            pf = pa.parquet.ParquetFile(fh)
            n_rows = pf.metadata.num_rows
        except Exception as e:  # pyarrow raises its own ArrowInvalid / OSError family
            raise DataFileError(f"{label} is not a readable Parquet file ({_one_line(e)})",
                                "give a .parquet trace") from e
        if n_rows > MAX_TRACE_ROWS:  # before decompressing: a small file can hold many rows
            raise too_many_rows(label, MAX_TRACE_ROWS)
        try:
            rows = pf.read().to_pylist()
        except DataFileError:
            raise
        except Exception as e:
            raise DataFileError(f"{label} is not a readable Parquet file ({_one_line(e)})",
                                "give a .parquet trace") from e
    return samples_from_rows(enumerate(rows, start=1), label)


def _read_csv(path: Path, label: str) -> tuple[Sample, ...]:
    """Samples streamed from the CSV, rows numbered by their line in the file (the header is line 1)."""
    try:
        with open_text(path, label, MAX_TRACE_BYTES, _TOO_BIG) as f:
            reader = csv.reader(f)
            header = next(reader, [])
            missing = [k for k in ("t_s", "gpu_index") if k not in header]
            if missing:
                raise DataFileError(
                    f"{label} lacks the column(s) {', '.join(missing)}",
                    f"the header must name these columns: {', '.join(SAMPLE_FIELDS)}",
                )
            where = [header.index(k) if k in header else None for k in SAMPLE_FIELDS]
            check = RowChecker(label)
            out: list[Sample] = []
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataFileError(
                        f"{label}: row {reader.line_num} has {len(row)} values, the header has {len(header)} columns",
                        "every row needs one value (or an empty cell) per header column",
                    )
                if len(out) >= MAX_TRACE_ROWS:
                    raise too_many_rows(label, MAX_TRACE_ROWS)
                out.append(check.sample(reader.line_num, [None if i is None else row[i] for i in where]))
            return tuple(out)
    except csv.Error as e:
        raise DataFileError(f"{label} is not a CSV file ({e})", "give a .csv trace written by gpumatch") from e


def _read_sidecar(side: Path) -> dict[str, Any]:
    if not os.path.lexists(side):
        return {}
    label = f"trace sidecar '{side}'"
    meta = parse_json_object(read_text(side, label, MAX_SIDECAR_BYTES), label, "the JSON object gpumatch writes")
    for key, most in (("devices", MAX_TRACE_GPUS), ("edges", MAX_SIDECAR_ENTRIES), ("xid_events", MAX_SIDECAR_ENTRIES)):
        entries = meta.get(key)
        if entries is not None and not isinstance(entries, list):
            raise DataFileError(f"{label}: '{key}' is not a list", _SIDECAR_HINT)
        if entries is not None and len(entries) > most:
            raise DataFileError(f"{label}: '{key}' lists {len(entries):,} entries, more than the {most:,} a trace "
                                "may have", _SIDECAR_HINT)
    return meta


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]


def _assemble(samples: tuple[Sample, ...], side: dict[str, Any], path: Path) -> Trace:
    try:
        return _assemble_checked(samples, side)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise DataFileError(
            f"trace sidecar '{sidecar_path(path)}' has a bad entry ({type(e).__name__}: {e})",
            "fix it, or move it away to replay the samples alone",
        ) from e


def _assemble_checked(samples: tuple[Sample, ...], side: dict[str, Any]) -> Trace:
    devices = tuple(DeviceInfo.from_dict(d) for d in side.get("devices", []))
    if not devices:
        devices = tuple(DeviceInfo(index=i, name="unknown") for i in sorted({s.gpu_index for s in samples}))
    stats = side.get("stats") or {}
    return Trace(
        samples=samples,
        devices=devices,
        system=SystemInfo.from_dict(side.get("system") or {}),
        edges=tuple(EdgeCounters.from_dict(e) for e in side.get("edges", [])),
        xid_events=tuple(
            XidEvent(float(x["t_s"]), int(x["gpu_index"]), int(x["xid"])) for x in side.get("xid_events", [])
        ),
        interval_s=float(side.get("interval_s") or _median_step(samples)),
        stats=SamplerStats(**{k: v for k, v in stats.items() if k in SamplerStats.__dataclass_fields__}),
        meta=dict(side.get("meta") or {}),
    )


def _median_step(samples: tuple[Sample, ...]) -> float:
    """The sampling interval (s) of a trace that does not state it: the median step between distinct sample
    times (:func:`gpumatch.stats.median`); 0.1 s with fewer than two times."""
    ts = sorted({s.t_s for s in samples})
    steps = [b - a for a, b in itertools.pairwise(ts)]
    return stats.median(steps) if steps else 0.1
