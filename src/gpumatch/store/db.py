"""Transactions on the store's connection: locking, retries, and sqlite3 errors as one-line StoreErrors.

Every write runs in ``BEGIN IMMEDIATE`` (takes the write lock up front, so a reader-turned-writer can never
hit SQLITE_BUSY without the busy handler: https://www.sqlite.org/lang_transaction.html), and is retried on
BUSY/LOCKED until the timeout. Only then does the user see a StoreError ("locked too long").
"""

from __future__ import annotations

import shlex
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from gpumatch.errors import StoreError
from gpumatch.units import MIB

T = TypeVar("T")

_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
HINT_OTHER_PATH = "set GPUMATCH_STORE (or GPUMATCH_HOME) to another file"


def errname(e: sqlite3.Error) -> str:
    """SQLite's error name (``SQLITE_CANTOPEN``...), or "" on Pythons that do not report it."""
    return str(getattr(e, "sqlite_errorname", "") or "")


def is_busy(e: sqlite3.Error) -> bool:
    name = errname(e)
    msg = str(e).lower()
    return name.startswith(_BUSY) or "database is locked" in msg or "database table is locked" in msg


def recover_hint(path: Path) -> str:
    """How to get what is readable out of a damaged store into a new file (store/recover.py)."""
    new = path.with_name(path.stem + "-recovered" + (path.suffix or ".sqlite"))
    return (f"recover what is readable: gpumatch runs recover --store {shlex.quote(str(path))} --output "
            f"{shlex.quote(str(new))}, then use that file (--store or GPUMATCH_STORE)")


def translate(e: sqlite3.Error, path: Path, action: str, busy_timeout_s: float) -> StoreError:
    """Turn a sqlite3 error into one StoreError line that says what to do."""
    name, msg = errname(e), str(e)
    low = msg.lower()
    if name.startswith("SQLITE_NOTADB") or "not a database" in low:
        return StoreError(
            f"{path} is not a readable gpumatch results store ({msg})",
            hint=f"move the file aside (another program's file, or damaged) or {HINT_OTHER_PATH}",
        )
    if name.startswith("SQLITE_CORRUPT") or "malformed" in low:
        return StoreError(f"results store {path} is damaged ({msg} while {action})", hint=recover_hint(path))
    if is_busy(e):
        return StoreError(
            f"results store {path} stayed locked for more than {busy_timeout_s:g} s while {action}",
            hint=f"another process holds the write lock; wait for it to finish or {HINT_OTHER_PATH}",
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_PERM")) or "readonly" in low:
        return StoreError(
            f"cannot write results store {path} ({msg})",
            hint=f"check the permissions of the file and its folder, or {HINT_OTHER_PATH}",
        )
    if name.startswith("SQLITE_CANTOPEN"):
        return StoreError(
            f"cannot open results store {path} ({msg})",
            hint=f"check the permissions of the file and its folder, or {HINT_OTHER_PATH}",
        )
    if name.startswith("SQLITE_FULL") or "disk is full" in low or (name.startswith("SQLITE_IOERR") and _full(path)):
        return StoreError(f"results store {path}: disk full while {action}",
                          hint="free disk space and retry; what was committed before is kept")
    if "append-only" in low or "run is closed" in low:
        return StoreError(msg, hint="stored measurements are never changed; begin a new run instead")
    if "foreign key" in low:
        return StoreError(f"{action}: the run id does not exist in {path}", hint="use the id begin_run returned")
    if name.startswith("SQLITE_IOERR"):
        return StoreError(f"results store {path}: {action} failed ({msg}, {name})",
                          hint="check the disk (free space, dmesg) and retry; what was committed before is kept")
    return StoreError(f"results store {path}: {action} failed ({msg})", hint="rerun with --debug for details")


def _full(path: Path) -> bool:
    """An I/O error where the store's filesystem has under 1 MiB free (SQLite reports a full disk while
    creating its -shm file as SQLITE_IOERR_SHMSIZE, not SQLITE_FULL)."""
    import shutil

    try:
        return shutil.disk_usage(path.parent).free < MIB
    except OSError:
        return False


class Db:
    """The SQLite backend (:class:`gpumatch.store.backend.Backend`): one connection shared by the threads of
    a process, serialised by a lock, with retrying writes."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection, path: Path, busy_timeout_s: float,
                 release_side_files: bool = False) -> None:
        self.conn = conn
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.lock = threading.RLock()
        self.release_side_files = release_side_files
        """A reader that found no ``-wal``/``-shm`` beside the file removes the empty ones it made (:meth:`close`)."""

    @property
    def where(self) -> str:
        return str(self.path)

    def applied(self, conn: sqlite3.Connection) -> list[tuple[str, str]]:
        from gpumatch.store.migrations import applied_migrations

        return applied_migrations(conn)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` verdict: ``"ok"`` or the problems found (one line)."""
        rows = self.read("checking integrity", lambda c: c.execute("PRAGMA integrity_check").fetchall())
        return "; ".join(" ".join(str(r[0]).split()) for r in rows)

    def close(self) -> None:
        with self.lock:
            self.conn.close()
            if self.release_side_files:
                release_side_files(self.path)

    def write(self, action: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction; commit, or roll back and raise StoreError."""
        return self._retry(action, fn, "BEGIN IMMEDIATE")

    def read(self, action: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one read transaction (a consistent snapshot across its queries)."""
        return self._retry(action, fn, "BEGIN")

    def _retry(self, action: str, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
        deadline = time.monotonic() + self.busy_timeout_s
        delay_s = 0.005
        while True:
            try:
                return self._once(fn, begin)
            except sqlite3.Error as e:
                if is_busy(e) and time.monotonic() < deadline:
                    time.sleep(delay_s)
                    delay_s = min(delay_s * 2, 0.2)
                    continue
                raise translate(e, self.path, action, self.busy_timeout_s) from e

    def _once(self, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
        with self.lock:
            self.conn.execute(begin)
            try:
                out = fn(self.conn)
                self.conn.execute("COMMIT")
                return out
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise


def release_side_files(path: Path) -> None:
    """Remove the empty ``-wal`` and the ``-shm`` a read-only connection made beside a WAL store (SQLite cannot
    remove them from a read-only connection: https://www.sqlite.org/wal.html#readonly).

    Only when the ``-wal`` is empty (it holds no transaction): a connection that only reads the schema is
    opened read-write (``query_only``) and closed; if it is the last connection to the file, SQLite checkpoints
    nothing and deletes both files, as a writer does on close; if another process has the store open, it is
    not the last and nothing is removed (that process removes them when it closes). Best effort: any error
    (no write permission on the folder, a lock) leaves them, and they hold no data."""
    wal = path.with_name(path.name + "-wal")
    try:
        if not wal.exists() or wal.stat().st_size != 0:
            return
        conn = sqlite3.connect(f"file:{quote(str(path.absolute()))}?mode=rw", uri=True, timeout=0,
                               isolation_level=None)
        try:
            conn.execute("PRAGMA query_only = 1")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except (sqlite3.Error, OSError):
        return
