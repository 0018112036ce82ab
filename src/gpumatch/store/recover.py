"""Copy what is still readable out of a damaged store into a new one (``gpumatch runs recover``).

SQLite's own ``.recover`` needs a shell built with the ``sqlite_dbpage`` table (Debian's 3.40 is not:
"SQL logic error"), and ``.dump`` ends a damaged file with ``ROLLBACK``; so this does it with the
``sqlite3`` module. The damaged file is opened read-only and never changed. Each table is read in rowid
ranges; a range SQLite cannot read is halved until blocks of :data:`_MIN_BLOCK` ids, which are skipped and
counted, so one broken page costs its own rows, not the rest of the table. Runs are copied as ``running``,
their rows added, then closed with their stored status (the append-only triggers allow exactly that);
rows that point at a run or manifest that was lost are dropped and counted. The new store is built in a
temporary beside ``--output`` and published by a hard link once closed (:mod:`gpumatch.outfiles`): a recovery
killed half-way leaves no ``--output``, and two at once to one name give one store and one "exists" error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpumatch.errors import StoreError
from gpumatch.outfiles import publishing
from gpumatch.store.connection import open_connection
from gpumatch.store.db import HINT_OTHER_PATH, release_side_files, translate
from gpumatch.store.migrations import MIGRATIONS

_TABLES = ("manifests", "runs", "results", "samples", "failures", "calibrations", "calibration_runs", "events")
_BLOCK = 4096
_MIN_BLOCK = 16
_BATCH_ROWS = 2000


@dataclass(frozen=True)
class TableRecovery:
    """Rows copied from one table; ``unreadable_ids`` is an upper bound on the rows lost to damage,
    ``dropped`` the readable rows left out because the run (or manifest) they belong to was lost."""

    table: str
    copied: int
    unreadable_ids: int
    dropped: int

    def to_dict(self) -> dict[str, object]:
        return {"table": self.table, "copied": self.copied, "unreadable_ids": self.unreadable_ids,
                "dropped": self.dropped}


def recover_store(damaged: Path, new: Path, busy_timeout_s: float = 30.0) -> list[TableRecovery]:
    """Copy what is readable from ``damaged`` into the new store ``new`` (which must not exist)."""
    if new.exists() or new.is_symlink():
        raise StoreError(f"{new} already exists", hint="give --output a new file name")
    src = sqlite3.connect(f"file:{damaged.absolute()}?mode=ro", uri=True, isolation_level=None)
    try:
        tables = _tables(src, damaged, busy_timeout_s)
        with publishing(new, hint="give --output a new file name") as tmp:  # appears whole, or not at all
            dst = open_connection(tmp, "write", busy_timeout_s, MIGRATIONS).conn
            try:
                dst.execute("PRAGMA foreign_keys = ON")
                out = [_copy(src, dst, t, damaged) for t in _TABLES if t in tables]
                _close_runs(src, dst)
            finally:
                dst.close()  # the last connection: SQLite folds the WAL into the file and removes it
    finally:
        src.close()
        release_side_files(damaged)  # the empty -wal/-shm a read-only connection leaves beside a WAL file
    return out


def _tables(src: sqlite3.Connection, path: Path, busy_timeout_s: float) -> set[str]:
    try:
        names = {str(r[0]) for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as e:
        err = translate(e, path, "reading the list of tables", busy_timeout_s)
        raise StoreError(f"{err.message}: nothing can be recovered by gpumatch",
                         hint=f"the file's schema page is damaged; {HINT_OTHER_PATH}") from e
    if "runs" not in names or "schema_migrations" not in names:
        raise StoreError(f"{path} is not a gpumatch results store", hint="give the store that was damaged")
    return names


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def _upper_id(src: sqlite3.Connection, table: str) -> int:
    best = 0
    for sql, args in ((f"SELECT max(rowid) FROM {table}", ()),
                      ("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,))):
        try:
            row = src.execute(sql, args).fetchone()
        except sqlite3.Error:
            continue
        if row and row[0] is not None:
            best = max(best, int(row[0]))
    return best


def _readable(src: sqlite3.Connection, table: str, cols: list[str], counts: list[int]) -> Iterator[tuple[object, ...]]:
    """Rows of ``table`` in rowid order, skipping what cannot be read (``counts[0]`` += ids skipped)."""
    select = f"SELECT {', '.join(cols)} FROM {table} WHERE rowid BETWEEN ? AND ? ORDER BY rowid"
    top = _upper_id(src, table)
    for start in range(1, top + 1, _BLOCK):
        stack = [(start, min(start + _BLOCK - 1, top))]
        while stack:
            lo, hi = stack.pop()
            try:
                rows = src.execute(select, (lo, hi)).fetchall()
            except sqlite3.DatabaseError:
                if hi - lo + 1 <= _MIN_BLOCK:
                    counts[0] += hi - lo + 1
                else:
                    mid = (lo + hi) // 2
                    stack += [(mid + 1, hi), (lo, mid)]  # the lower half first: rowid order kept
                continue
            yield from rows


def _copy(src: sqlite3.Connection, dst: sqlite3.Connection, table: str, path: Path) -> TableRecovery:
    cols = [c for c in _columns(src, table) if c in set(_columns(dst, table))]
    status_at = cols.index("status") if table == "runs" else -1
    insert = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    counts, copied, dropped = [0], 0, 0
    batch: list[tuple[object, ...]] = []

    def commit() -> tuple[int, int]:
        ok = bad = 0
        dst.execute("BEGIN IMMEDIATE")
        try:
            for row in batch:
                try:
                    dst.execute(insert, row)
                    ok += 1
                except sqlite3.IntegrityError:  # its run or manifest was lost: the row cannot stand alone
                    bad += 1
            dst.execute("COMMIT")
        except BaseException:
            dst.execute("ROLLBACK")
            raise
        batch.clear()
        return ok, bad

    for row in _readable(src, table, cols, counts):
        if status_at >= 0:  # reopened so its rows can be added; closed again by _close_runs
            row = (*row[:status_at], "running", *row[status_at + 1:])
        batch.append(row)
        if len(batch) >= _BATCH_ROWS:
            ok, bad = commit()
            copied, dropped = copied + ok, dropped + bad
    ok, bad = commit()
    return TableRecovery(table, copied + ok, counts[0], dropped + bad)


def _close_runs(src: sqlite3.Connection, dst: sqlite3.Connection) -> None:
    """Give each copied run its stored end (status, ended_at, summary) back."""
    ids = [int(r[0]) for r in dst.execute("SELECT run_id FROM runs ORDER BY run_id")]
    dst.execute("BEGIN IMMEDIATE")  # one transaction: a failure leaves them all open, never half closed
    for run_id in ids:
        try:
            row = src.execute("SELECT status, ended_at, summary_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row and row[0] != "running":
            dst.execute("UPDATE runs SET status = ?, ended_at = ?, summary_json = ? WHERE run_id = ?", (*row, run_id))
    dst.execute("COMMIT")
