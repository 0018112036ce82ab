"""Ordered, named schema migrations for the results store.

A migration is ``(name, sql)``. They are applied in list order, each in its own ``BEGIN IMMEDIATE``
transaction together with its row in ``schema_migrations`` (name, applied_at), so a crash mid-migration
leaves the previous schema intact. Rules:

- Never edit or reorder a released migration; append a new one.
- The applied names must be a prefix of :data:`MIGRATIONS`. A database that has applied a name this code
  does not know was written by a newer gpumatch and is refused (:class:`~gpumatch.errors.StoreError`).

Append-only rules are enforced in SQL by triggers (``0003_append_only_triggers``) rather than by
convention: measured rows can never be updated or deleted, and a run can only be *closed* once
(status, ended_at, summary_json).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from gpumatch.errors import StoreError

_CORE = """
CREATE TABLE manifests (
    manifest_sha256 TEXT PRIMARY KEY CHECK (length(manifest_sha256) = 64),
    manifest_json   TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE TABLE runs (
    run_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT NOT NULL,
    name            TEXT NOT NULL,
    manifest_sha256 TEXT NOT NULL REFERENCES manifests(manifest_sha256),
    config_json     TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    started_at      TEXT NOT NULL,
    started_unix_s  REAL NOT NULL,
    ended_at        TEXT,
    summary_json    TEXT,
    writer_json     TEXT NOT NULL
);
CREATE INDEX runs_kind ON runs(kind, run_id);
CREATE TABLE results (
    result_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      INTEGER NOT NULL REFERENCES runs(run_id),
    metric      TEXT NOT NULL,
    value       REAL NOT NULL,
    unit        TEXT NOT NULL,
    config_json TEXT,
    extra_json  TEXT,
    created_at  TEXT NOT NULL
);
CREATE INDEX results_run ON results(run_id, result_id);
CREATE INDEX results_metric ON results(metric);
CREATE TABLE samples (
    sample_id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id              INTEGER NOT NULL REFERENCES runs(run_id),
    t_s                 REAL NOT NULL,
    gpu_index           INTEGER NOT NULL,
    power_instant_w     REAL,
    power_avg_w         REAL,
    sm_clock_mhz        REAL,
    mem_clock_mhz       REAL,
    clock_event_reasons INTEGER,
    gpu_temp_c          REAL,
    mem_temp_c          REAL,
    memory_used_bytes   INTEGER,
    util_gpu_pct        REAL,
    util_mem_pct        REAL,
    gpm_sm_active       REAL,
    gpm_tensor_active   REAL,
    gpm_dram_bw_util    REAL,
    extra_json          TEXT
);
CREATE INDEX samples_run ON samples(run_id, sample_id);
"""

_FAILURES_CALIBRATIONS_EVENTS = """
CREATE TABLE failures (
    failure_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id          INTEGER REFERENCES runs(run_id),
    config_json     TEXT NOT NULL,
    error_class     TEXT NOT NULL,
    message         TEXT NOT NULL,
    log_excerpt     TEXT NOT NULL DEFAULT '',
    manifest_sha256 TEXT REFERENCES manifests(manifest_sha256),
    created_at      TEXT NOT NULL
);
CREATE INDEX failures_run ON failures(run_id);
CREATE TABLE calibrations (
    calibration_id  INTEGER PRIMARY KEY AUTOINCREMENT,
    name            TEXT NOT NULL,
    values_json     TEXT NOT NULL,
    provenance_json TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX calibrations_name ON calibrations(name, calibration_id);
CREATE TABLE calibration_runs (
    calibration_id INTEGER NOT NULL REFERENCES calibrations(calibration_id),
    run_id         INTEGER NOT NULL REFERENCES runs(run_id),
    PRIMARY KEY (calibration_id, run_id)
);
CREATE TABLE events (
    event_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     INTEGER NOT NULL REFERENCES runs(run_id),
    t_s        REAL NOT NULL,
    gpu_index  INTEGER,
    kind       TEXT NOT NULL,
    data_json  TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX events_run ON events(run_id, event_id);
"""

_IMMUTABLE_TABLES = ("manifests", "results", "samples", "failures", "calibrations", "calibration_runs", "events")

_RUN_FROZEN_COLUMNS = (
    "run_id", "kind", "name", "manifest_sha256", "config_json", "started_at", "started_unix_s", "writer_json"
)


def _append_only_sql() -> str:
    parts: list[str] = []
    for t in _IMMUTABLE_TABLES:
        for op in ("UPDATE", "DELETE"):
            parts.append(
                f"CREATE TRIGGER {t}_no_{op.lower()} BEFORE {op} ON {t} BEGIN "
                f"SELECT RAISE(ABORT, 'gpumatch store is append-only: {op} on {t} is not allowed'); END;"
            )
    parts.append(_close_once_sql(_RUN_FROZEN_COLUMNS))
    parts.append(
        "CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs BEGIN "
        "SELECT RAISE(ABORT, 'gpumatch store is append-only: DELETE on runs is not allowed'); END;"
    )
    for t in ("samples", "results", "events"):
        parts.append(
            f"CREATE TRIGGER {t}_only_open_runs BEFORE INSERT ON {t} "
            "WHEN (SELECT status FROM runs WHERE run_id = NEW.run_id) <> 'running' BEGIN "
            f"SELECT RAISE(ABORT, 'run is closed: cannot add {t} to a run that has ended'); END;"
        )
    return "\n".join(parts)


def _close_once_sql(frozen: tuple[str, ...]) -> str:
    changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in frozen)
    return (
        "CREATE TRIGGER runs_close_once BEFORE UPDATE ON runs "
        f"WHEN OLD.status <> 'running' OR NEW.status = 'running' OR {changed} BEGIN "
        "SELECT RAISE(ABORT, 'gpumatch store is append-only: a run can only be closed once "
        "(status, ended_at, summary)'); END;"
    )


RUN_UUID_NAMESPACE = uuid.UUID("6f1c3e52-4d0b-5a8e-9c57-6770756d6174")
"""Namespace of the UUIDv5 ids given to runs stored before migration 0004 (RFC 9562 section 5.5)."""


def run_uuid_for_existing(key: str) -> str:
    """The global id of a run stored before 0004: UUIDv5 of its writer, start time, number, kind and name, so
    two copies of one file migrated apart give each run the same id (a merge then sees one run, not two)."""
    return str(uuid.uuid5(RUN_UUID_NAMESPACE, key))


_RUN_UUID = f"""
DROP TRIGGER runs_close_once;
ALTER TABLE runs ADD COLUMN run_uuid TEXT;
UPDATE runs SET run_uuid = gpumatch_run_uuid(writer_json || '|' || started_at || '|' || run_id || '|' || kind
                                             || '|' || name);
CREATE UNIQUE INDEX runs_uuid ON runs(run_uuid);
{_close_once_sql((*_RUN_FROZEN_COLUMNS, "run_uuid"))}
CREATE TRIGGER runs_uuid_required BEFORE INSERT ON runs WHEN NEW.run_uuid IS NULL BEGIN
SELECT RAISE(ABORT, 'a run needs its global id (run_uuid)'); END;
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_core_tables", _CORE),
    ("0002_failures_calibrations_events", _FAILURES_CALIBRATIONS_EVENTS),
    ("0003_append_only_triggers", _append_only_sql()),
    ("0004_run_uuid", _RUN_UUID),
)
"""Every schema change, in order. Append only."""

MIN_READABLE = 2
"""Readers need the tables of the first this-many migrations (``runs list`` counts failures, ``runs show``
reads events: 0002). A store at an older schema is refused by readers with ``gpumatch runs migrate``;
0003 adds only triggers, so a store at 0002 is read as it is. Raise this when a reader needs a newer table."""

_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    seq        INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    applied_at TEXT NOT NULL
)
"""


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (trigger bodies stay whole; uses sqlite3.complete_statement)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip() and sqlite3.complete_statement(buf + ";"):
        out.append(buf.strip())  # last statement without its semicolon
    elif buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:80]!r}")
    return out


def applied_migrations(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(name, applied_at) of every applied migration, in order; empty for a fresh database."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchone()
    if not has:
        return []
    return [(str(n), str(a)) for n, a in conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY seq")]


def check_known(applied: Sequence[str], migrations: Sequence[tuple[str, str]], where: str) -> None:
    known = [name for name, _ in migrations]
    for i, name in enumerate(applied):
        if i >= len(known) or name not in known:
            raise StoreError(
                f"results store {where} was written by a newer gpumatch (schema migration {name!r} is unknown "
                f"to this version, which knows {len(known)})",
                hint="upgrade gpumatch, or point GPUMATCH_STORE at another file",
            )
        if known[i] != name:
            raise StoreError(
                f"results store {where} has migrations in an unexpected order ({name!r} at position {i + 1}, "
                f"expected {known[i]!r})",
                hint="the file was changed by another tool; point GPUMATCH_STORE at another file",
            )


def _foreign_database(conn: sqlite3.Connection) -> bool:
    """True for a SQLite file that has tables but no gpumatch bookkeeping (someone else's database)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()
    names = {str(r[0]) for r in rows}
    return bool(names) and "schema_migrations" not in names


def migrate(conn: sqlite3.Connection, where: str, migrations: Sequence[tuple[str, str]] = MIGRATIONS) -> int:
    """Apply the missing migrations in order; returns how many were applied now.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Safe against concurrent openers: the
    pending list is re-read under ``BEGIN IMMEDIATE`` (the write lock) before each step.
    """
    if _foreign_database(conn):
        raise StoreError(
            f"{where} is a SQLite database but not a gpumatch results store",
            hint="point GPUMATCH_STORE at another file",
        )
    conn.create_function("gpumatch_run_uuid", 1, run_uuid_for_existing, deterministic=True)
    applied_now = [n for n, _ in applied_migrations(conn)]
    check_known(applied_now, migrations, where)
    if len(applied_now) == len(migrations):
        return 0  # up to date: no write lock needed
    done = 0
    for seq, (name, sql) in enumerate(migrations, start=1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_BOOKKEEPING)
            applied = [n for n, _ in applied_migrations(conn)]
            check_known(applied, migrations, where)
            if name not in applied:
                for stmt in split_statements(sql):
                    conn.execute(stmt)
                now = datetime.now(UTC).isoformat(timespec="microseconds")
                conn.execute("INSERT INTO schema_migrations (seq, name, applied_at) VALUES (?, ?, ?)", (seq, name, now))
                conn.execute(f"PRAGMA user_version = {seq}")
                done += 1
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return done
