"""Queries that turn stored rows into frozen records (used by :class:`~gpumatch.store.store.Store`)."""

from __future__ import annotations

import hashlib
import json
import warnings
from datetime import datetime
from typing import Any

from gpumatch.errors import DataWarning
from gpumatch.store.backend import Conn
from gpumatch.store.records import CalibrationRecord, EventRecord, FailureRecord, ResultRecord, RunRecord
from gpumatch.store.writer import writer_alive

UUID_MIGRATION = "0004_run_uuid"
"""The migration that gave every run its global id (``run_uuid``)."""


def run_sql(has_uuid: bool = True) -> str:
    """The run query; ``has_uuid=False`` for a store read at a schema before :data:`UUID_MIGRATION`."""
    uuid = "r.run_uuid" if has_uuid else "NULL"
    return f"""
SELECT r.run_id, r.kind, r.name, r.status, r.started_at, r.started_unix_s, r.ended_at, r.manifest_sha256,
       m.manifest_json, r.config_json, r.summary_json, r.writer_json,
       (SELECT COUNT(*) FROM results x WHERE x.run_id = r.run_id),
       (SELECT COUNT(*) FROM samples s WHERE s.run_id = r.run_id),
       (SELECT COUNT(*) FROM failures f WHERE f.run_id = r.run_id), {uuid}
FROM runs r JOIN manifests m ON m.manifest_sha256 = r.manifest_sha256
"""


RUN_SQL = run_sql()


def effective_status(stored: str, writer: dict[str, Any]) -> str:
    """``running`` with a writer provably gone on this host reads as ``interrupted``."""
    if stored == "running" and writer_alive(writer) is False:
        return "interrupted"
    return stored


def _duration_s(started_at: str, ended_at: str | None) -> float | None:
    if ended_at is None:
        return None
    return (datetime.fromisoformat(ended_at) - datetime.fromisoformat(started_at)).total_seconds()


def manifest_matches(sha256: str, manifest_json: str) -> bool:
    """Whether the stored manifest text still hashes to its key (it is stored in canonical form)."""
    return hashlib.sha256(manifest_json.encode("utf-8")).hexdigest() == sha256


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # a damaged manifest: kept visible as such, the hash check says so
        return None


def field(text: str | None, where: str, obj: bool = False, empty: Any = None) -> Any:
    """A stored JSON column (SQL NULL reads as None). Text that is not JSON, or (``obj``) JSON other than an
    object, reads as ``empty`` with a :class:`~gpumatch.errors.DataWarning` naming ``where`` (the run and the
    row), so one damaged row never stops a reader; ``gpumatch runs check`` lists them all."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        _damaged(where, f"not JSON: {getattr(e, 'msg', e)}")
        return empty
    if obj and not isinstance(value, dict):
        if value is not None:
            _damaged(where, f"a JSON {type(value).__name__}, not an object")
        return empty
    return value


def _damaged(where: str, what: str) -> None:
    warnings.warn(f"{where} is damaged ({what}); read without it ('gpumatch runs check' lists every damaged row)",
                  DataWarning, stacklevel=3)


def loads(text: str | None, where: str = "a stored value") -> Any:
    """:func:`field` for a column that may hold any JSON value."""
    return field(text, where)


def run_record(row: tuple[Any, ...]) -> RunRecord:
    (run_id, kind, name, status, started_at, started_s, ended_at, sha, manifest, config, summary, writer,
     n_res, n_samp, n_fail, run_uuid) = row
    here = f"run {run_id}"
    writer_d = field(writer, f"{here}: writer_json", True, {})
    return RunRecord(
        run_id=run_id,
        kind=kind,
        name=name,
        status=effective_status(status, writer_d),
        stored_status=status,
        started_at=started_at,
        started_unix_s=started_s,
        ended_at=ended_at,
        duration_s=_duration_s(started_at, ended_at),
        manifest_sha256=sha,
        manifest=_json_or_none(manifest) or {},
        config=field(config, f"{here}: config_json", True, {}),
        summary=field(summary, f"{here}: summary_json", True),
        writer=writer_d,
        n_results=n_res,
        n_samples=n_samp,
        n_failures=n_fail,
        manifest_ok=manifest_matches(sha, manifest),
        run_uuid=run_uuid or "",
    )


def results(conn: Conn, run_id: int) -> list[ResultRecord]:
    rows = conn.execute(
        "SELECT result_id, run_id, metric, value, unit, config_json, extra_json, created_at FROM results "
        "WHERE run_id = ? ORDER BY result_id",
        (run_id,),
    ).fetchall()
    return [
        ResultRecord(
            result_id=r[0], run_id=r[1], metric=r[2], value=r[3], unit=r[4],
            config=field(r[5], f"run {r[1]}: results row {r[0]} config_json", True),
            extra=field(r[6], f"run {r[1]}: results row {r[0]} extra_json", True), created_at=r[7],
        )
        for r in rows
    ]


def failures(conn: Conn, run_id: int | None) -> list[FailureRecord]:
    sql = (
        "SELECT f.failure_id, f.run_id, f.config_json, f.error_class, f.message, f.log_excerpt, "
        "f.manifest_sha256, m.manifest_json, f.created_at FROM failures f "
        "LEFT JOIN manifests m ON m.manifest_sha256 = f.manifest_sha256"
    )
    args: tuple[Any, ...] = ()
    if run_id is not None:
        sql += " WHERE f.run_id = ?"
        args = (run_id,)
    rows = conn.execute(sql + " ORDER BY f.failure_id", args).fetchall()
    return [
        FailureRecord(
            failure_id=r[0], run_id=r[1], config=field(r[2], f"run {r[1]}: failures row {r[0]} config_json", True, {}),
            error_class=r[3], message=r[4], log_excerpt=r[5], manifest_sha256=r[6],
            manifest=field(r[7], f"failures row {r[0]}: its manifest"), created_at=r[8],
        )
        for r in rows
    ]


def calibrations(conn: Conn, name: str | None, latest_only: bool = False) -> list[CalibrationRecord]:
    sql = "SELECT calibration_id, name, values_json, provenance_json, created_at FROM calibrations"
    args: tuple[Any, ...] = ()
    if name is not None:
        sql += " WHERE name = ?"
        args = (name,)
    sql += " ORDER BY calibration_id DESC" + (" LIMIT 1" if latest_only else "")
    out = []
    for cid, cname, values, prov, created in conn.execute(sql, args).fetchall():
        run_ids = tuple(
            int(r[0])
            for r in conn.execute(
                "SELECT run_id FROM calibration_runs WHERE calibration_id = ? ORDER BY run_id", (cid,)
            )
        )
        out.append(
            CalibrationRecord(
                calibration_id=cid, name=cname, values=field(values, f"calibrations row {cid} values_json", True, {}),
                provenance=field(prov, f"calibrations row {cid} provenance_json", True, {}),
                run_ids=run_ids, created_at=created,
            )
        )
    return out


def events(conn: Conn, run_id: int) -> list[EventRecord]:
    rows = conn.execute(
        "SELECT event_id, run_id, t_s, gpu_index, kind, data_json, created_at FROM events WHERE run_id = ? "
        "ORDER BY event_id",
        (run_id,),
    ).fetchall()
    return [
        EventRecord(event_id=r[0], run_id=r[1], t_s=r[2], gpu_index=r[3], kind=r[4],
                    data=field(r[5], f"run {r[1]}: events row {r[0]} data_json", True, {}), created_at=r[6])
        for r in rows
    ]


JSON_COLUMNS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("runs", "run_id", "run_id", ("config_json", "writer_json", "summary_json")),
    ("results", "result_id", "run_id", ("config_json", "extra_json")),
    ("failures", "failure_id", "run_id", ("config_json",)),
    ("events", "event_id", "run_id", ("data_json",)),
    ("samples", "sample_id", "run_id", ("extra_json",)),
    ("calibrations", "calibration_id", "NULL", ("values_json", "provenance_json")),
)
"""(table, id column, run column, JSON columns) that :func:`damaged_json` checks; manifests are checked by
their hash. Columns that must hold an object (runs' config and writer, failures' config, events' data,
calibrations' values and provenance) are also refused when they hold another JSON value."""

_OBJECT_COLUMNS = {("runs", "config_json"), ("runs", "writer_json"), ("failures", "config_json"),
                   ("events", "data_json"), ("calibrations", "values_json"), ("calibrations", "provenance_json"),
                   ("samples", "extra_json"), ("results", "config_json"), ("results", "extra_json"),
                   ("runs", "summary_json")}


def damaged_json(conn: Conn, limit: int = 1000) -> tuple[list[str], int]:
    """Every stored JSON value a reader cannot take (``runs check``): up to ``limit`` descriptions ("run 3:
    results row 17 extra_json") and how many there are in all. Reads each JSON column once (O(rows))."""
    found: list[str] = []
    total = 0
    for table, key, run_col, cols in JSON_COLUMNS:
        where = " OR ".join(f"{c} IS NOT NULL" for c in cols)
        sql = f"SELECT {key}, {run_col}, {', '.join(cols)} FROM {table} WHERE {where} ORDER BY {key}"
        for row in conn.execute(sql):
            for col, text in zip(cols, row[2:], strict=True):
                if text is None or _parses(text, (table, col) in _OBJECT_COLUMNS):
                    continue
                total += 1
                if len(found) < limit:
                    run = f"run {row[1]}: " if row[1] is not None and table != "runs" else ""
                    found.append(f"{run}{table} row {row[0]} {col}")
    return found, total


def _parses(text: str, want_object: bool) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) or value is None or not want_object
