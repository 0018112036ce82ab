"""nccl-tests ``-J FILE`` JSON into one run (the writer: NVIDIA/nccl-tests ``src/util.cu``, JSON_FILE_VERSION 1-3).

The file: ``args`` (argv; ``args[0]`` names the collective, ``all_reduce_perf``), ``config`` (nthreads, ngpus,
bytes range, iterations, ``devices`` with rank, hostname and device name), ``results`` (one row per message size:
``size`` B, ``count``, ``type``, ``redop``, ``root``, ``out_of_place`` and ``in_place`` each ``{time (us) or
cpu_time, alg_bw (GB/s), bus_bw (GB/s), nwrong}``), ``average_bus_bandwidth.bandwidth`` (GB/s), ``out_of_bounds``,
``errors``. nccl-tests' GB/s is 1e9 bytes/s (``1.0E9`` in its bandwidth formulas; docs/PERFORMANCE.md defines busbw).

Each size and placement gives three results: ``nccl_time_s`` (us x 1e-6), ``nccl_alg_bandwidth_bytes_per_s`` and
``nccl_bus_bandwidth_bytes_per_s`` (GB/s x 1e9), with ``config = {"case": "nccl-tests", "collective", "size_bytes",
"dtype", "redop", "placement"}``; the average bus bandwidth is ``nccl_avg_bus_bandwidth_bytes_per_s``. A ``"nan"``
value is skipped. ``start_time`` (``%Y-%m-%d %H:%M:%S``, local time) is taken as UTC. Version differences:
:data:`KNOWN_VERSIONS`; a row whose placement was not run has ``"out_of_place": null`` (skipped here).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from gpumatch.errors import InputError
from gpumatch.store.formats import ImportedResult, ImportedRun, number, utc

_GB = 1e9
KNOWN_VERSIONS = (1, 2, 3)
"""``JSON_FILE_VERSION`` values gpumatch reads (nccl-tests ``src/util.cu``): 1 (2025-10, 00f52811; until 85ca91d1 of
2026-02 the average was written ``average_bus_bandwidith.bandwidith``), 2 (2026-06, 0fdb00a3: ``-I`` per-iteration
timing adds ``out_of_place_per_iter``/``in_place_per_iter``), 3 (2026-06, e1dc979c: ``skipped_iterations`` in those
and ``per_iter_skip`` in ``config``)."""
_AVERAGE_KEYS = (("average_bus_bandwidth", "bandwidth"), ("average_bus_bandwidith", "bandwidith"))
_ITER_STATS = (("min_us", "min"), ("p50_us", "p50"), ("p95_us", "p95"), ("p99_us", "p99"), ("max_us", "max"),
               ("avg_us", "mean"), ("stdev_us", "std"))
_FIELDS = (("time", "nccl_time_s", "s", 1e-6), ("cpu_time", "nccl_time_s", "s", 1e-6),
           ("alg_bw", "nccl_alg_bandwidth_bytes_per_s", "B/s", _GB),
           ("bus_bw", "nccl_bus_bandwidth_bytes_per_s", "B/s", _GB))


def _collective(data: dict[str, Any]) -> str:
    args = data.get("args")
    prog = PurePosixPath(str(args[0])).name if isinstance(args, list) and args else ""
    return prog.removesuffix("_perf") or "collective"


def parse_nccl_tests(data: dict[str, Any], source: dict[str, Any]) -> ImportedRun:
    """One nccl-tests JSON object as an :class:`ImportedRun` (InputError when it has no result rows or a
    ``version`` gpumatch does not know)."""
    version = data.get("version")
    if version is not None and version not in KNOWN_VERSIONS:
        raise InputError(f"{source['file']}: nccl-tests JSON version {version!r} is not one gpumatch reads "
                         f"({', '.join(map(str, KNOWN_VERSIONS))})",
                         "check its keys against src/util.cu of that nccl-tests release, then report the new layout")
    coll = _collective(data)
    raw_cfg = data.get("config")
    cfg: dict[str, Any] = raw_cfg if isinstance(raw_cfg, dict) else {}
    raw_devices = cfg.get("devices")
    devices: list[Any] = raw_devices if isinstance(raw_devices, list) else []
    run_cfg: dict[str, Any] = {"case": "nccl-tests", "collective": coll,
               **{k: cfg[k] for k in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "iterations")
                  if k in cfg}, "ranks": len(devices)}
    results: list[ImportedResult] = []
    rows = [r for r in data.get("results") or [] if isinstance(r, dict)]
    for row in rows:
        for placement in ("out_of_place", "in_place"):
            body = row.get(placement)
            if not isinstance(body, dict):
                continue
            config = {"case": "nccl-tests", "collective": coll, "size_bytes": row.get("size"),
                      "dtype": row.get("type"), "redop": row.get("redop"), "placement": placement}
            for key, name, unit, factor in _FIELDS:
                v = number(body.get(key))
                if v is not None:
                    src_unit = "us" if "time" in key else "GB/s"
                    results.append(ImportedResult(name, v * factor, unit, config,
                                                  {"source_key": f"{placement}.{key}", "source_value": v,
                                                   "source_unit": src_unit}))
    if not results:
        raise InputError(f"{source['file']}: an nccl-tests JSON file without result rows",
                         "give the file 'all_reduce_perf ... -J FILE' wrote after the run finished")
    results += _per_iter(rows, coll) + _average(data, coll)
    started = utc(data.get("start_time"), ("%Y-%m-%d %H:%M:%S",)) or datetime.now(UTC)
    ended = utc(data.get("end_time"), ("%Y-%m-%d %H:%M:%S",))
    names = sorted({str(d.get("device_info")) for d in devices if isinstance(d, dict) and d.get("device_info")})
    manifest = {"source": {**source, "tool": "nccl-tests"}, "nccl_version": data.get("nccl_version"),
                "args": data.get("args"), "gpu.names": names,
                "hosts": sorted({str(d.get("hostname")) for d in devices if isinstance(d, dict)})}
    duration = (ended - started).total_seconds() if ended else None
    return ImportedRun(f"nccl-tests {coll}", manifest, run_cfg, results, started, duration,
                       [("nccl_tests_rows", {"results": rows, "out_of_bounds": data.get("out_of_bounds"),
                                             "errors": data.get("errors")})])


def _average(data: dict[str, Any], coll: str) -> list[ImportedResult]:
    """``average_bus_bandwidth.bandwidth`` (GB/s), or version 1's misspelt ``average_bus_bandwidith.bandwidith``."""
    for block_key, key in _AVERAGE_KEYS:
        block = data.get(block_key)
        avg = number(block.get(key)) if isinstance(block, dict) else None
        if avg is not None:
            return [ImportedResult("nccl_avg_bus_bandwidth_bytes_per_s", avg * _GB, "B/s",
                                   {"case": "nccl-tests", "collective": coll},
                                   {"source_key": f"{block_key}.{key}", "source_value": avg, "source_unit": "GB/s"})]
    return []


def _per_iter(rows: list[dict[str, Any]], coll: str) -> list[ImportedResult]:
    """Per-iteration time statistics (``-I``, versions 2+): ``<placement>_per_iter.{min,p50,p95,p99,max,avg,stdev}_us``
    as ``nccl_iter_time_<stat>_s`` (us x 1e-6); the raw ``times_us`` stay in the ``nccl_tests_rows`` event."""
    out = []
    for row in rows:
        for placement in ("out_of_place", "in_place"):
            stats = row.get(f"{placement}_per_iter")
            if not isinstance(stats, dict):
                continue
            config = {"case": "nccl-tests", "collective": coll, "size_bytes": row.get("size"),
                      "dtype": row.get("type"), "redop": row.get("redop"), "placement": placement}
            for key, stat in _ITER_STATS:
                if (v := number(stats.get(key))) is not None:
                    out.append(ImportedResult(f"nccl_iter_time_{stat}_s", v * 1e-6, "s", config,
                                              {"source_key": f"{placement}_per_iter.{key}", "source_value": v,
                                               "source_unit": "us"}))
    return out
