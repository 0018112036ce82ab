"""The SQLite connection under the store: pragmas, locking, retries and error translation.

- ``journal_mode=WAL``: readers never block the writer, and a killed writer leaves the last committed
  transaction intact (https://www.sqlite.org/wal.html).
- ``synchronous=FULL``: each commit is fsynced, so committed rows survive a power cut too, not only a
  killed process (https://www.sqlite.org/pragma.html#pragma_synchronous).
- ``foreign_keys=ON``; ``busy_timeout``: a writer waits for another writer's lock instead of failing.
- Every write runs in ``BEGIN IMMEDIATE`` (takes the write lock up front, so a reader-turned-writer can
  never hit SQLITE_BUSY without the busy handler: https://www.sqlite.org/lang_transaction.html), and is
  retried on BUSY/LOCKED until the timeout. Only then does the user see a StoreError ("locked too long").
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gpumatch.errors import StoreError

T = TypeVar("T")

_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_HINT_OTHER_PATH = "set GPUMATCH_STORE (or GPUMATCH_HOME) to another file"


def _errname(e: sqlite3.Error) -> str:
    return str(getattr(e, "sqlite_errorname", "") or "")


def is_busy(e: sqlite3.Error) -> bool:
    name = _errname(e)
    msg = str(e).lower()
    return name.startswith(_BUSY) or "database is locked" in msg or "database table is locked" in msg


def translate(e: sqlite3.Error, path: Path, action: str, busy_timeout_s: float) -> StoreError:
    """Turn a sqlite3 error into one StoreError line that says what to do."""
    name, msg = _errname(e), str(e)
    low = msg.lower()
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in low or "malformed" in low:
        return StoreError(
            f"{path} is not a readable gpumatch results store ({msg})",
            hint=f"move the file aside (another program's file, or damaged) or {_HINT_OTHER_PATH}",
        )
    if is_busy(e):
        return StoreError(
            f"results store {path} stayed locked for more than {busy_timeout_s:g} s while {action}",
            hint=f"another process holds the write lock; wait for it to finish or {_HINT_OTHER_PATH}",
        )
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")) or "readonly" in low:
        return StoreError(
            f"cannot write results store {path} ({msg})",
            hint=f"check the permissions of the file and its folder, or {_HINT_OTHER_PATH}",
        )
    if name.startswith("SQLITE_FULL") or "disk is full" in low:
        return StoreError(f"results store {path}: disk full while {action}", hint="free disk space and retry")
    if "append-only" in low or "run is closed" in low:
        return StoreError(msg, hint="stored measurements are never changed; begin a new run instead")
    if "foreign key" in low:
        return StoreError(f"{action}: the run id does not exist in {path}", hint="use the id begin_run returned")
    return StoreError(f"results store {path}: {action} failed ({msg})", hint="rerun with --debug for details")


def connect(path: Path, busy_timeout_s: float) -> tuple[sqlite3.Connection, str]:
    """Open (creating folders) and configure a connection; returns it and the journal mode in effect."""
    if path.is_dir():
        raise StoreError(f"results store path {path} is a folder", hint=f"give a file path; {_HINT_OTHER_PATH}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(
            f"cannot create the folder for results store {path} ({e.strerror or e})",
            hint=f"check permissions, or {_HINT_OTHER_PATH}",
        ) from e
    try:
        conn = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise translate(e, path, "opening", busy_timeout_s) from e
    try:
        mode = _configure(conn, busy_timeout_s)
    except sqlite3.Error as e:
        conn.close()
        raise translate(e, path, "opening", busy_timeout_s) from e
    return conn, mode


def _configure(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    deadline = time.monotonic() + busy_timeout_s
    while True:  # switching to WAL needs a brief exclusive lock; a concurrent opener may hold it
        try:
            row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            break
        except sqlite3.OperationalError as e:
            if not is_busy(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    conn.execute("PRAGMA synchronous = FULL")
    return str(row[0]).lower()


class Db:
    """One connection shared by the threads of a process, serialised by a lock, with retrying writes."""

    def __init__(self, conn: sqlite3.Connection, path: Path, busy_timeout_s: float) -> None:
        self.conn = conn
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.lock = threading.RLock()

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
