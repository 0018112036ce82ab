"""A whole run as rows, read from one store and written into another in one transaction (push, pull, merge).

A bundle holds what belongs to one run: the run row (with its global id ``run_uuid``), its manifest, results,
samples, failures (with their manifests) and events, as stored (JSON text, ISO times), never re-encoded, so a
copied run reads back equal to its source. :func:`write_bundle` inserts the run as ``running`` with
``ON CONFLICT (run_uuid) DO NOTHING`` (a run already there is left alone: copying is idempotent), adds its
rows under the target's own ids, then closes it with the source's status, end time and summary, all in the
caller's one transaction: a reader of the target sees the whole run or nothing of it, and a copy killed
half-way leaves no part of that run behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpumatch.store.backend import Conn
from gpumatch.store.samples import INSERT_SQL as INSERT_SAMPLE_SQL
from gpumatch.telemetry.types import SAMPLE_FIELDS

_RUN_COLS = ("kind", "name", "manifest_sha256", "config_json", "started_at", "started_unix_s", "writer_json",
             "run_uuid")
_RESULT_COLS = ("metric", "value", "unit", "config_json", "extra_json", "created_at")
_FAILURE_COLS = ("config_json", "error_class", "message", "log_excerpt", "manifest_sha256", "created_at")
_EVENT_COLS = ("t_s", "gpu_index", "kind", "data_json", "created_at")
_MANIFEST = ("INSERT INTO manifests (manifest_sha256, manifest_json, created_at) VALUES (?, ?, ?) "
             "ON CONFLICT DO NOTHING")


@dataclass(frozen=True)
class RunBundle:
    """One run's rows as stored. ``run`` maps the columns of :data:`_RUN_COLS`; ``end`` is (status, ended_at,
    summary_json) to close it with; ``manifests`` are (sha256, json, created_at) rows the run and its
    failures need."""

    run_uuid: str
    run: dict[str, Any]
    end: tuple[str, str | None, str | None]
    manifests: list[tuple[Any, ...]]
    results: list[tuple[Any, ...]]
    samples: list[tuple[Any, ...]]
    failures: list[tuple[Any, ...]]
    events: list[tuple[Any, ...]]


def _rows(c: Conn, cols: tuple[str, ...], table: str, key: str, run_id: int) -> list[tuple[Any, ...]]:
    sql = f"SELECT {', '.join(cols)} FROM {table} WHERE run_id = ? ORDER BY {key}"
    return [tuple(r) for r in c.execute(sql, (run_id,)).fetchall()]


def read_bundle(c: Conn, run_id: int, end: tuple[str, str | None, str | None]) -> RunBundle:
    """The rows of run ``run_id`` (one read transaction: one snapshot); ``end`` as the copy should close it."""
    row = c.execute(f"SELECT {', '.join(_RUN_COLS)} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    run = dict(zip(_RUN_COLS, row, strict=True))
    failures = _rows(c, _FAILURE_COLS, "failures", "failure_id", run_id)
    shas = sorted({run["manifest_sha256"], *(f[4] for f in failures if f[4] is not None)})
    manifests = [tuple(c.execute("SELECT manifest_sha256, manifest_json, created_at FROM manifests "
                                 "WHERE manifest_sha256 = ?", (s,)).fetchone()) for s in shas]
    samples = _rows(c, (*SAMPLE_FIELDS, "extra_json"), "samples", "sample_id", run_id)
    return RunBundle(str(run["run_uuid"]), run, end, manifests, _rows(c, _RESULT_COLS, "results", "result_id", run_id),
                     samples, failures, _rows(c, _EVENT_COLS, "events", "event_id", run_id))


def write_bundle(c: Conn, b: RunBundle) -> int | None:
    """Insert ``b`` (inside the caller's write transaction); the new run_id, or None when a run with its
    ``run_uuid`` is already in this store (nothing written)."""
    for m in b.manifests:
        c.execute(_MANIFEST, m)
    marks = ", ".join("?" * len(_RUN_COLS))
    row = c.execute(f"INSERT INTO runs ({', '.join(_RUN_COLS)}) VALUES ({marks}) ON CONFLICT (run_uuid) DO NOTHING "
                    "RETURNING run_id", tuple(b.run[k] for k in _RUN_COLS)).fetchone()
    if row is None:
        return None
    rid = int(row[0])
    _insert(c, "results", _RESULT_COLS, rid, b.results)
    if b.samples:
        c.executemany(INSERT_SAMPLE_SQL, [(rid, *s) for s in b.samples])
    _insert(c, "failures", _FAILURE_COLS, rid, b.failures)
    _insert(c, "events", _EVENT_COLS, rid, b.events)
    c.execute("UPDATE runs SET status = ?, ended_at = ?, summary_json = ? WHERE run_id = ?", (*b.end, rid))
    return rid


def _insert(c: Conn, table: str, cols: tuple[str, ...], run_id: int, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        sql = f"INSERT INTO {table} (run_id, {', '.join(cols)}) VALUES ({', '.join('?' * (len(cols) + 1))})"
        c.executemany(sql, [(run_id, *r) for r in rows])
