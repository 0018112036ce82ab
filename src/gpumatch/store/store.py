"""The results store: append-only runs with their manifest, results, raw samples, failures and calibrations.

Every writer method is one committed transaction when it returns, so a process killed at any point keeps
everything written before (a run it never ended reads as ``interrupted``). Several processes may write
at once (WAL + ``BEGIN IMMEDIATE`` + busy timeout, see :mod:`gpumatch.store.connection`); several threads
of one process may share one :class:`Store`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.settings import check_store_location
from gpumatch.store import readers
from gpumatch.store.backend import Backend, Conn
from gpumatch.store.buffer import SampleBuffer
from gpumatch.store.bundle import write_bundle
from gpumatch.store.codec import canonical_json, dumps_optional, manifest_sha256
from gpumatch.store.connection import Mode, open_connection
from gpumatch.store.db import Db
from gpumatch.store.migrations import MIGRATIONS
from gpumatch.store.newrun import MAX_LOG_EXCERPT_CHARS as MAX_LOG_EXCERPT_CHARS  # re-exported
from gpumatch.store.newrun import NewRun, _excerpt, _text
from gpumatch.store.reading import StoreReading
from gpumatch.store.records import END_STATUSES, RunRecord
from gpumatch.store.samples import INSERT_SQL, SampleRow, sample_rows
from gpumatch.store.writer import current_writer

DEFAULT_BUSY_TIMEOUT_S = 30.0

INSERT_MANIFEST_SQL = ("INSERT INTO manifests (manifest_sha256, manifest_json, created_at) VALUES (?, ?, ?) "
                       "ON CONFLICT DO NOTHING")
"""Manifests are stored once per hash; the same statement on SQLite (>= 3.24) and PostgreSQL."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StoreError(f"{what} must be a dict, got {type(value).__name__}", hint=f"pass {what} as a dict")
    return value


class Store(StoreReading):
    """An open results store. Build with :func:`open_store`; close with :meth:`close` or a ``with`` block.

    Opened with ``mode="read"`` it has the readers of :class:`StoreReading` only: every writer method
    raises StoreError, and nothing in the file changes."""

    def __init__(self, db: Backend, schema: tuple[str, ...], journal_mode: str, mode: Mode,
                 path: Path | str) -> None:
        super().__init__(db, schema, journal_mode, mode, path)
        self._open_runs: set[int] = set()

    # ---- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> Store:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close(reason=None if et is None else et.__name__)

    def close(self, reason: str | None = None) -> None:
        """Close; runs begun here and never ended are closed as ``interrupted`` (with ``reason``). Idempotent."""
        if self._closed or os.getpid() != self._pid:
            return
        for run_id in sorted(self._open_runs):
            with contextlib.suppress(StoreError):  # closed by someone else meanwhile: nothing to do
                self.end_run(run_id, "interrupted", {"reason": reason or "store closed before end_run"})
        with self._db.lock:
            self._closed = True
            self._db.close()

    def _check_writable(self) -> None:
        self._check_open()
        if self.mode != "write":
            raise StoreError(f"results store {self.path} was opened read-only",
                             hint='open it with open_store(path, mode="write") to add to it')

    # ---- writers ---------------------------------------------------------------------------------
    def begin_run(self, kind: str, name: str, manifest: dict[str, Any], config: dict[str, Any]) -> int:
        """Start a run (status ``running``); stores ``manifest`` once per distinct SHA-256. Returns run_id (the
        store's own number); the run's global id, a random UUID, is ``run(run_id).run_uuid``."""
        self._check_writable()
        run_uuid = str(uuid.uuid4())
        kind, name = _text(kind, "run kind"), _text(name, "run name")
        manifest_json = canonical_json(_mapping(manifest, "manifest"), "manifest")
        sha = manifest_sha256(manifest)
        config_json = canonical_json(_mapping(config, "config"), "config")
        writer_json = canonical_json(current_writer(), "writer")

        def tx(c: Conn) -> int:
            now = _now()
            c.execute(INSERT_MANIFEST_SQL, (sha, manifest_json, now))
            args: tuple[Any, ...] = (kind, name, sha, config_json, now, time.time(), writer_json, run_uuid)
            cols = "kind, name, manifest_sha256, config_json, started_at, started_unix_s, writer_json, run_uuid"
            if readers.UUID_MIGRATION not in self.schema:  # a store kept at an older schema (tests of migrations)
                args, cols = args[:-1], cols.rsplit(",", 1)[0]
            marks = ", ".join("?" * len(args))
            cur = c.execute(f"INSERT INTO runs ({cols}) VALUES ({marks}) RETURNING run_id", args)
            return int(cur.fetchone()[0])

        run_id = self._db.write("beginning a run", tx)
        self._open_runs.add(run_id)
        return run_id

    def add_samples(self, run_id: int, samples: Sequence[Mapping[str, float | int | None]]) -> int:
        """Append raw telemetry samples (all or none); returns how many. See :mod:`gpumatch.store.samples`."""
        self._check_writable()
        rows = sample_rows(run_id, samples)
        self._write_sample_rows(rows)
        return len(rows)

    def sample_buffer(self, run_id: int, flush_interval_s: float = 1.0, max_rows: int = 1000) -> SampleBuffer:
        """A :class:`SampleBuffer` committing this run's samples every ``flush_interval_s`` or ``max_rows``."""
        return SampleBuffer(self._write_sample_rows, run_id, flush_interval_s, max_rows)

    def _write_sample_rows(self, rows: Sequence[SampleRow]) -> None:
        self._check_writable()
        if rows:
            self._db.write("adding samples", lambda c: c.executemany(INSERT_SQL, rows))

    def add_result(
        self,
        run_id: int,
        metric: str,
        value: float,
        unit: str,
        *,
        config: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Append one measured value; ``value`` must be finite, ``unit`` an SI unit string. Returns result_id."""
        self._check_writable()
        metric, unit = _text(metric, "metric name"), _text(unit, "unit")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise StoreError(
                f"result {metric!r}: value must be a finite number, got {value!r}",
                hint="record a failed measurement with add_failure instead",
            )
        args = (run_id, metric, float(value), unit, dumps_optional(config, "config"),
                dumps_optional(extra, "extra"), _now())
        sql = ("INSERT INTO results (run_id, metric, value, unit, config_json, extra_json, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING result_id")
        return self._db.write(f"adding result {metric!r}", lambda c: int(c.execute(sql, args).fetchone()[0]))

    def add_failure(
        self,
        run_id: int | None,
        config: dict[str, Any],
        error_class: str,
        message: str,
        log_excerpt: str = "",
        *,
        manifest: dict[str, Any] | None = None,
    ) -> int:
        """Record a failed configuration. Its environment is ``manifest``, else the run's manifest, else none."""
        self._check_writable()
        config_json = canonical_json(_mapping(config, "config"), "config")
        error_class = _text(error_class, "error class")
        manifest_json = None if manifest is None else canonical_json(_mapping(manifest, "manifest"), "manifest")
        sha = None if manifest is None else manifest_sha256(manifest)

        def tx(c: Conn) -> int:
            now = _now()
            env = sha
            if manifest_json is not None:
                c.execute(INSERT_MANIFEST_SQL, (sha, manifest_json, now))
            elif run_id is not None:
                row = c.execute("SELECT manifest_sha256 FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                env = None if row is None else row[0]
            cur = c.execute(
                "INSERT INTO failures (run_id, config_json, error_class, message, log_excerpt, manifest_sha256, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING failure_id",
                (run_id, config_json, error_class, str(message), _excerpt(str(log_excerpt)), env, now),
            )
            return int(cur.fetchone()[0])

        return self._db.write("adding a failure", tx)

    def add_event(
        self, run_id: int, t_s: float, kind: str, data: dict[str, Any], gpu_index: int | None = None
    ) -> int:
        """Append a discrete event (Xid, window-edge counters...) at ``t_s`` seconds. Returns event_id."""
        self._check_writable()
        args = (run_id, float(t_s), gpu_index, _text(kind, "event kind"), canonical_json(data, "event data"), _now())
        sql = ("INSERT INTO events (run_id, t_s, gpu_index, kind, data_json, created_at) VALUES (?, ?, ?, ?, ?, ?) "
               "RETURNING event_id")
        return self._db.write("adding an event", lambda c: int(c.execute(sql, args).fetchone()[0]))

    def add_events(self, run_id: int, events: Iterable[tuple[float, str, dict[str, Any]]]) -> int:
        """Append many events ``(t_s, kind, data)`` in one transaction (an import of recorded events); how many."""
        self._check_writable()
        now = _now()
        rows = [(run_id, float(t), None, _text(kind, "event kind"), canonical_json(data, "event data"), now)
                for t, kind, data in events]
        sql = "INSERT INTO events (run_id, t_s, gpu_index, kind, data_json, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        if rows:
            self._db.write("adding events", lambda c: c.executemany(sql, rows))
        return len(rows)

    def end_run(self, run_id: int, status: str, summary: dict[str, Any] | None = None) -> None:
        """Close a running run as ``completed``, ``failed`` or ``interrupted`` (once; later closes fail)."""
        self._check_writable()
        if status not in END_STATUSES:
            raise StoreError(f"run status {status!r} is not one of {', '.join(END_STATUSES)}",
                             hint="end a run as completed, failed or interrupted")
        summary_json = dumps_optional(summary, "summary")

        def tx(c: Conn) -> None:
            cur = c.execute(
                "UPDATE runs SET status = ?, ended_at = ?, summary_json = ? WHERE run_id = ? AND status = 'running'",
                (status, _now(), summary_json, run_id),
            )
            if cur.rowcount == 0:
                row = c.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
                if row is None:
                    raise StoreError(f"no run {run_id} in {self.path}", hint="use the id begin_run returned")
                raise StoreError(f"run {run_id} is already closed ({row[0]})", hint="a run can be ended once")

        self._db.write(f"ending run {run_id}", tx)
        self._open_runs.discard(run_id)

    def add_calibration(
        self, name: str, values: dict[str, Any], provenance: dict[str, Any], *, run_ids: Sequence[int] | None = None
    ) -> int:
        """Store fitted ``values`` with ``provenance``; the runs used are ``run_ids`` (default:
        ``provenance["run_ids"]`` when that is a list of ints). Returns calibration_id."""
        self._check_writable()
        name = _text(name, "calibration name")
        values_json = canonical_json(_mapping(values, "calibration values"), "calibration values")
        prov_json = canonical_json(_mapping(provenance, "provenance"), "provenance")
        if run_ids is None:
            cand = provenance.get("run_ids", [])
            run_ids = cand if isinstance(cand, list) and all(type(r) is int for r in cand) else []
        ids = sorted(set(run_ids))

        def tx(c: Conn) -> int:
            cur = c.execute(
                "INSERT INTO calibrations (name, values_json, provenance_json, created_at) VALUES (?, ?, ?, ?) "
                "RETURNING calibration_id",
                (name, values_json, prov_json, _now()),
            )
            cid = int(cur.fetchone()[0])
            if ids:
                c.executemany("INSERT INTO calibration_runs (calibration_id, run_id) VALUES (?, ?)",
                              [(cid, r) for r in ids])
            return cid

        return self._db.write(f"adding calibration {name!r}", tx)

    def add_whole_run(self, run: NewRun, status: str, summary: dict[str, Any] | None = None) -> int | None:
        """Write ``run`` (:class:`~gpumatch.store.newrun.NewRun`) with all its rows, closed as ``status``, in one
        transaction: it appears whole or not at all. Returns the new run_id, or None when a run with its
        ``run_uuid`` is already in the store (nothing written: the UNIQUE ``run_uuid`` decides, so two
        processes writing the same run at once store it once)."""
        self._check_writable()
        bundle = run.bundle(status, summary)
        return self._db.write(f"writing run {run.run_uuid}", lambda c: write_bundle(c, bundle))

    def run_id_of(self, run_uuid: str) -> int | None:
        """This store's number for the run with global id ``run_uuid``; None when it has no such run."""
        self._check_open()
        row = self._db.read("finding a run", lambda c: c.execute(
            "SELECT run_id FROM runs WHERE run_uuid = ?", (run_uuid,)).fetchone())
        return None if row is None else int(row[0])

    def close_stale_runs(self) -> list[int]:
        """Close as ``interrupted`` every running run whose writer is provably gone; returns their ids."""
        self._check_writable()
        stale = [r.run_id for r in self._all_running() if r.status == "interrupted"]
        for run_id in stale:
            with contextlib.suppress(StoreError):  # closed concurrently
                self.end_run(run_id, "interrupted", {"reason": "writer process ended without end_run"})
        return stale

    def _all_running(self) -> list[RunRecord]:
        sql = readers.RUN_SQL + " WHERE r.status = 'running' ORDER BY r.run_id"
        return self._db.read("listing runs", lambda c: [readers.run_record(r) for r in c.execute(sql)])


def open_store(
    path: Path | str | None = None,
    *,
    mode: Mode = "write",
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    migrations: Sequence[tuple[str, str]] = MIGRATIONS,
) -> Store:
    """Open the store at ``path`` (a path or ``sqlite:///path``), default ``load_settings().store_path``
    (``$GPUMATCH_STORE`` or ``$GPUMATCH_HOME/results.sqlite``).

    ``mode="write"`` creates, checks (``quick_check``) and migrates the file; ``mode="read"`` changes nothing
    and refuses a missing, empty, foreign, newer or too-old file (see :mod:`gpumatch.store.connection`).
    A ``postgresql://`` URL (the team's store; needs the ``postgres`` extra) opens that database instead,
    with the same checks and guarantees (see :mod:`gpumatch.store.pg`).
    ``migrations`` is for tests only (SQLite: ``(name, sql)``; PostgreSQL: its own list, see pg_schema)."""
    if path is None:
        from gpumatch.settings import load_settings

        path = load_settings().store_url
    text = check_store_location(str(path))
    if is_pg_url(text):
        from gpumatch.store.pg import open_pg

        db, schema = open_pg(text, mode, busy_timeout_s, None if migrations is MIGRATIONS else migrations)
        return Store(db, schema, "postgresql", mode, db.where)
    p = Path(text[len("sqlite:///"):] if text.startswith("sqlite:///") else text).expanduser()
    opened = open_connection(p, mode, busy_timeout_s, migrations)
    sqlite_db = Db(opened.conn, p, busy_timeout_s, opened.release_side_files)
    return Store(sqlite_db, opened.schema, opened.journal_mode, mode, p)


def is_pg_url(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return text.startswith(("postgresql://", "postgres://"))
