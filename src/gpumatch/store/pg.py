"""The PostgreSQL backend of the results store: a team's shared store, through psycopg 3.

``open_store("postgresql://user@host:5432/dbname")`` opens it (the ``postgres`` extra installs psycopg). The
database must exist (``createdb dbname``); gpumatch creates its tables on the first write, with the same
migration names, append-only rules and version checks as the SQLite file (:mod:`gpumatch.store.pg_schema`):

- **Opening.** A database with tables but no ``schema_migrations`` is someone else's and is refused; a
  migration name this code does not know (a newer gpumatch) is refused by readers and writers; a reader
  refuses an empty database and one too old to read (``gpumatch runs migrate --store URL`` upgrades it).
  A reader's session is ``default_transaction_read_only``: the server itself refuses any write.
- **Migrations** run each in one transaction holding ``pg_advisory_xact_lock`` (two writers opening a new
  database at once migrate it once) and re-read what is applied under that lock.
- **Transactions.** Writes run at ``READ COMMITTED`` (each statement sees what was committed before it; the
  manifest insert is ``ON CONFLICT DO NOTHING``, ids come from identity columns, so concurrent writers never
  collide); reads at ``REPEATABLE READ READ ONLY``: every query of one read sees one snapshot, so a run and
  its counts are read as of one instant. ``lock_timeout`` is the store's busy timeout: a write that waits
  longer for a lock fails with "stayed locked". Serialization failures and deadlocks are retried until then.
- **Errors** become one-line StoreErrors (:func:`translate`); the URL in messages has no password.

https://www.psycopg.org/psycopg3/docs/basic/transactions.html (autocommit plus explicit ``BEGIN``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from gpumatch.errors import StoreError
from gpumatch.store.migrations import MIN_READABLE, check_known
from gpumatch.store.pg_schema import BOOKKEEPING, PG_MIGRATIONS

T = TypeVar("T")

_ADVISORY_KEY = 0x4750554D
"""Key of the advisory lock migrations hold ("GPUM", as the SQLite file's application_id)."""

_HINT_URL = "check the URL (--store / GPUMATCH_STORE) and that the server is up"
_TABLES = ("schema_migrations", "manifests", "runs", "results", "samples", "failures", "calibrations",
           "calibration_runs", "events")


def redact(url: str) -> str:
    """``url`` without its password (for messages and ``Store.path``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@lru_cache(maxsize=256)
def pg_sql(sql: str) -> str:
    """The store's portable SQL for psycopg: ``?`` placeholders become ``%s`` (a literal ``%`` is doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgConn:
    """The connection a transaction function sees: ``execute``/``executemany`` with ``?`` placeholders."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        return self._conn.execute(pg_sql(sql), tuple(parameters))

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any:
        cur = self._conn.cursor()
        cur.executemany(pg_sql(sql), [tuple(p) for p in seq_of_parameters])
        return cur


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as e:
        raise StoreError("a PostgreSQL store needs the psycopg driver, which is not installed",
                         hint="pip install 'gpumatch[postgres]' (psycopg 3)") from e
    return psycopg


def translate(e: Exception, where: str, action: str, busy_timeout_s: float) -> StoreError:
    """Turn a psycopg error into one StoreError line that says what to do (most specific first)."""
    errors = _psycopg().errors
    msg = (getattr(getattr(e, "diag", None), "message_primary", None) or str(e)).strip().splitlines()[0]
    if "append-only" in msg or "run is closed" in msg:
        return StoreError(msg, hint="stored measurements are never changed; begin a new run instead")
    if isinstance(e, errors.ForeignKeyViolation):
        return StoreError(f"{action}: the run id does not exist in {where}", hint="use the id begin_run returned")
    if isinstance(e, errors.LockNotAvailable | errors.QueryCanceled):
        return StoreError(f"results store {where} stayed locked for more than {busy_timeout_s:g} s while {action}",
                          hint="another process holds a lock; wait for it to finish or use another store")
    if isinstance(e, errors.ReadOnlySqlTransaction | errors.InsufficientPrivilege):
        return StoreError(f"cannot write results store {where} ({msg})",
                          hint="ask for write rights on the database, or use another store")
    if isinstance(e, errors.DiskFull):
        return StoreError(f"results store {where}: disk full while {action}",
                          hint="free disk space on the server and retry; what was committed before is kept")
    if isinstance(e, _psycopg().OperationalError):
        return StoreError(f"cannot reach PostgreSQL results store {where} while {action} ({msg})", hint=_HINT_URL)
    return StoreError(f"results store {where}: {action} failed ({msg})", hint="rerun with --debug for details")


class PgDb:
    """The PostgreSQL backend (:class:`gpumatch.store.backend.Backend`): one autocommit connection on which
    each read or write is one explicit transaction, shared by the threads of a process under a lock."""

    dialect = "postgresql"

    def __init__(self, conn: Any, where: str, busy_timeout_s: float) -> None:
        self.conn = conn
        self._adapter = PgConn(conn)
        self._where = where
        self.busy_timeout_s = busy_timeout_s
        self.lock = threading.RLock()

    @property
    def where(self) -> str:
        return self._where

    def write(self, action: str, fn: Callable[[Any], T]) -> T:
        return self._retry(action, fn, "BEGIN ISOLATION LEVEL READ COMMITTED")

    def read(self, action: str, fn: Callable[[Any], T]) -> T:
        return self._retry(action, fn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def applied(self, conn: Any) -> list[tuple[str, str]]:
        return applied_migrations(conn)

    def integrity_check(self) -> str:
        """``"ok"`` when every table of the store reads through to its end (PostgreSQL checks its pages as it
        reads them; amcheck, a contrib extension, is not assumed to be installed)."""
        def scan(c: Any) -> None:
            for t in _TABLES:
                c.execute(f"SELECT count(*) FROM {t}").fetchone()

        self.read("checking integrity", scan)
        return "ok"

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def _retry(self, action: str, fn: Callable[[Any], T], begin: str) -> T:
        errors = _psycopg().errors
        deadline = time.monotonic() + self.busy_timeout_s
        delay_s = 0.005
        while True:
            try:
                return self._once(fn, begin)
            except (errors.SerializationFailure, errors.DeadlockDetected) as e:
                if time.monotonic() < deadline:
                    time.sleep(delay_s)
                    delay_s = min(delay_s * 2, 0.2)
                    continue
                raise translate(e, self._where, action, self.busy_timeout_s) from e
            except _psycopg().Error as e:
                raise translate(e, self._where, action, self.busy_timeout_s) from e

    def _once(self, fn: Callable[[Any], T], begin: str) -> T:
        with self.lock:
            self.conn.execute(begin)
            try:
                out = fn(self._adapter)
                self.conn.execute("COMMIT")
                return out
            except BaseException:
                _rollback(self.conn)
                raise


def _rollback(conn: Any) -> None:
    try:
        conn.execute("ROLLBACK")
    except _psycopg().Error:  # the connection is gone: the server rolled the transaction back itself
        pass


def applied_migrations(conn: Any) -> list[tuple[str, str]]:
    """(name, applied_at) of every applied migration, in order; empty for a database without the table."""
    if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
        return []
    return [(str(n), str(a)) for n, a in conn.execute("SELECT name, applied_at FROM schema_migrations ORDER BY seq")]


def _user_tables(conn: Any) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    return {str(r[0]) for r in rows}


def open_pg(url: str, mode: str, busy_timeout_s: float,
            migrations: Sequence[tuple[str, str]] | None = None) -> tuple[PgDb, tuple[str, ...]]:
    """Connect, check and (``mode="write"``) migrate the store at ``url``; the backend and the schema applied.
    ``migrations`` is for tests only (default :data:`~gpumatch.store.pg_schema.PG_MIGRATIONS`)."""
    psycopg = _psycopg()
    where = redact(url)
    migs = PG_MIGRATIONS if migrations is None else migrations
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(busy_timeout_s)))
    except psycopg.Error as e:
        raise StoreError(f"cannot open PostgreSQL results store {where} ({_first_line(e)})",
                         hint="the database must exist (createdb NAME) and the server be reachable; "
                         + _HINT_URL) from e
    try:
        conn.execute(f"SET lock_timeout = {int(busy_timeout_s * 1000)}")
        schema = _check(conn, where, mode, migs) if mode == "read" else _migrate(conn, where, migs)
        if mode == "read":
            conn.execute("SET default_transaction_read_only = on")
    except psycopg.Error as e:
        conn.close()
        raise translate(e, where, "opening", busy_timeout_s) from e
    except BaseException:
        conn.close()
        raise
    return PgDb(conn, where, busy_timeout_s), schema


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _check(conn: Any, where: str, mode: str, migs: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    tables = _user_tables(conn)
    if tables and "schema_migrations" not in tables:
        raise StoreError(f"{where} is a PostgreSQL database but not a gpumatch results store (it has tables and "
                         "no schema_migrations); it was not changed", hint="point --store at another database")
    applied = [n for n, _ in applied_migrations(conn)]
    check_known(applied, migs, where)
    if mode == "read" and not applied:
        raise StoreError(f"results store {where} is empty (no gpumatch schema yet)",
                         hint="a measuring command or 'gpumatch runs push --to URL' creates it")
    if mode == "read" and len(applied) < min(MIN_READABLE, len(migs)):
        raise StoreError(f"results store {where} has an older schema ({len(applied)} of {len(migs)} migrations) "
                         "that this gpumatch cannot read as it is",
                         hint=f"upgrade it with: gpumatch runs migrate --store {where}")
    return tuple(applied)


def _migrate(conn: Any, where: str, migs: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    if len(_check(conn, where, "write", migs)) == len(migs):
        return tuple(n for n, _ in migs)
    for seq, (name, sql) in enumerate(migs, start=1):
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_KEY,))
            conn.execute(BOOKKEEPING)
            applied = [n for n, _ in applied_migrations(conn)]
            check_known(applied, migs, where)
            if name not in applied:
                conn.execute(sql)
                now = datetime.now(UTC).isoformat(timespec="microseconds")
                conn.execute("INSERT INTO schema_migrations (seq, name, applied_at) VALUES (%s, %s, %s)",
                             (seq, name, now))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
    return tuple(n for n, _ in applied_migrations(conn))


def read_pg_schema(url: str, busy_timeout_s: float) -> tuple[str, ...]:
    """The migrations applied in the store at ``url`` (``gpumatch runs migrate`` reports before and after)."""
    psycopg = _psycopg()
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(busy_timeout_s))) as conn:
            return tuple(n for n, _ in applied_migrations(conn))
    except psycopg.Error as e:
        raise StoreError(f"cannot open PostgreSQL results store {redact(url)} ({_first_line(e)})",
                         hint=_HINT_URL) from e
