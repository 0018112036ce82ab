"""Queries that turn stored rows into frozen records (used by :class:`~gpumatch.store.store.Store`)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from gpumatch.store.backend import Conn
from gpumatch.store.codec import loads
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


def run_record(row: tuple[Any, ...]) -> RunRecord:
    (run_id, kind, name, status, started_at, started_s, ended_at, sha, manifest, config, summary, writer,
     n_res, n_samp, n_fail, run_uuid) = row
    writer_d = json.loads(writer)
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
        config=json.loads(config),
        summary=loads(summary),
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
            config=loads(r[5]), extra=loads(r[6]), created_at=r[7],
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
            failure_id=r[0], run_id=r[1], config=json.loads(r[2]), error_class=r[3], message=r[4],
            log_excerpt=r[5], manifest_sha256=r[6], manifest=loads(r[7]), created_at=r[8],
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
                calibration_id=cid, name=cname, values=json.loads(values), provenance=json.loads(prov),
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
        EventRecord(event_id=r[0], run_id=r[1], t_s=r[2], gpu_index=r[3], kind=r[4], data=json.loads(r[5]),
                    created_at=r[6])
        for r in rows
    ]
