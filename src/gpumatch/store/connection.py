"""Opening the results store: what the file is is known before anything touches it; only writers write.

Every open goes through :func:`open_connection` with an explicit mode, and every check is here:

1. **The path** (:func:`_check_path`): a folder, or something that is not a regular file (a FIFO would
   block, ``/dev/zero`` never ends), is refused without opening it. A missing file is refused for
   ``"read"``; ``"write"`` creates its folders and the file.
2. **The first 100 bytes** (:func:`_sniff`, plain ``os.read``): an empty file (a writer initialises it,
   a reader refuses it), not SQLite, or SQLite with another program's ``application_id``: refused.
3. **Identification over a read-only connection** (:func:`_identify`): ``application_id``, the tables,
   and the ``schema_migrations`` names against :data:`~gpumatch.store.migrations.MIGRATIONS`, both ways:
   a name this code does not know (a newer gpumatch) is refused; an older schema is read as it is when
   the readers can (:data:`~gpumatch.store.migrations.MIN_READABLE`), else refused with the command that
   upgrades it. Nothing has been written to the file up to here (not even the WAL switch).
4. **Readers** keep a ``mode=ro`` connection. Where that cannot open (a WAL store in a folder this process
   cannot write, so SQLite cannot create the ``-shm`` file it needs), and only when no ``-wal`` file with
   content exists (then every committed transaction is in the main file), it opens with ``immutable=1``
   (https://www.sqlite.org/uri.html#uriimmutable): a snapshot without locks, which is exact unless a
   writer with write access starts and checkpoints during the read (the read then fails, never the file).
   With WAL content it cannot read, it refuses and says how to read a copy.
5. **Writers** reopen read-write, run ``PRAGMA quick_check`` once (a damaged file is never appended to),
   then ``journal_mode=WAL``, ``synchronous=FULL``, the migrations and the ``application_id`` stamp.

Pragmas of a writer: WAL (readers never block the writer, a killed writer keeps every committed
transaction: https://www.sqlite.org/wal.html), ``synchronous=FULL`` (each commit fsynced:
https://www.sqlite.org/pragma.html#pragma_synchronous), ``foreign_keys=ON``, ``busy_timeout``.
:class:`~gpumatch.store.db.Db` runs the transactions.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from gpumatch.errors import StoreError
from gpumatch.store.db import HINT_OTHER_PATH, errname, is_busy, recover_hint, translate
from gpumatch.store.migrations import MIGRATIONS, MIN_READABLE, applied_migrations, check_known, migrate

Mode = Literal["read", "write"]

APPLICATION_ID = 0x4750554D
"""``PRAGMA application_id`` of a gpumatch store: "GPUM" (https://www.sqlite.org/fileformat.html#application_id).
Stores written before it was stamped have 0 and are recognised by their ``schema_migrations`` table."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100


@dataclass(frozen=True)
class Opened:
    """An open connection and what was found: the journal mode in effect and the migrations applied."""

    conn: sqlite3.Connection
    journal_mode: str
    schema: tuple[str, ...]
    immutable: bool = False
    release_side_files: bool = False
    """A reader that can write the folder: on close it removes an empty ``-wal`` and the ``-shm`` when it is the last
    connection (:func:`gpumatch.store.db.release_side_files`)."""


def open_connection(path: Path, mode: Mode, busy_timeout_s: float,
                    migrations: Sequence[tuple[str, str]] = MIGRATIONS) -> Opened:
    """Check ``path`` as described in the module docstring and open it for ``mode``; StoreError otherwise."""
    if mode not in ("read", "write"):
        raise ValueError(f"mode must be 'read' or 'write', not {mode!r}")
    exists = _check_path(path, mode)
    kind = _sniff(path) if exists else "empty"
    schema = () if kind == "empty" else _identify(path, kind, busy_timeout_s, migrations)
    if mode == "read" and not schema:
        raise StoreError(f"results store {path} is empty (no gpumatch schema yet)",
                         hint="'gpumatch monitor -- CMD' creates one; check --store / $GPUMATCH_STORE")
    if mode == "read":
        return _open_reader(path, schema, busy_timeout_s, migrations)
    return _open_writer(path, busy_timeout_s, migrations)


def read_schema(path: Path, busy_timeout_s: float,
                migrations: Sequence[tuple[str, str]] = MIGRATIONS) -> tuple[str, ...]:
    """The migrations applied in the store at ``path`` (empty for an empty file), checked as for a reader
    but without its schema floor, and without opening it for reading afterwards. Writes nothing."""
    _check_path(path, "read")
    kind = _sniff(path)
    return () if kind == "empty" else _identify(path, kind, busy_timeout_s, migrations)


def _check_path(path: Path, mode: Mode) -> bool:
    """Whether the file exists; refuses folders and non-regular files; a writer gets its folders made."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        raise StoreError(f"cannot read results store {path} ({e.strerror or e})",
                         hint=f"check the path and its permissions, or {HINT_OTHER_PATH}") from e
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise StoreError(f"results store path {path} is a folder", hint=f"give a file path; {HINT_OTHER_PATH}")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise StoreError(f"results store path {path} is not a regular file (a pipe, device or socket)",
                         hint=f"give the path of a .sqlite file; {HINT_OTHER_PATH}")
    if st is None and mode == "read":
        raise StoreError(f"no results store at {path}", hint="run 'gpumatch monitor -- CMD' to create one, or "
                         "check --store / $GPUMATCH_STORE")
    if st is None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the folder for results store {path} ({e.strerror or e})",
                             hint=f"check permissions, or {HINT_OTHER_PATH}") from e
    return st is not None


def _sniff(path: Path) -> str:
    """``"empty"``, ``"wal"`` (SQLite in WAL mode) or ``"sqlite"`` from the header; refuses anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            head = os.read(fd, _HEADER_BYTES)
        finally:
            os.close(fd)
    except OSError as e:
        raise StoreError(f"cannot read results store {path} ({e.strerror or e})",
                         hint=f"check the permissions of the file, or {HINT_OTHER_PATH}") from e
    if not head:
        return "empty"
    if len(head) < _HEADER_BYTES or not head.startswith(_SQLITE_MAGIC):
        raise StoreError(f"{path} is not a readable gpumatch results store (not an SQLite database)",
                         hint=f"move the file aside (another program's file, or damaged) or {HINT_OTHER_PATH}")
    app_id = int.from_bytes(head[68:72], "big")
    if app_id not in (0, APPLICATION_ID):
        raise _foreign(path, f"application_id 0x{app_id:08x}")
    return "wal" if head[18] == 2 else "sqlite"


def _foreign(path: Path, why: str) -> StoreError:
    return StoreError(f"{path} is a SQLite database but not a gpumatch results store ({why}); it was not changed",
                      hint=f"point --store or {HINT_OTHER_PATH}")


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.absolute()))}?{query}"


def _wal_has_content(path: Path) -> bool:
    for suffix in ("-wal", "-journal"):
        side = path.with_name(path.name + suffix)
        try:
            if side.stat().st_size > 0:
                return True
        except OSError:
            continue
    return False


def _raw_connect(path: Path, busy_timeout_s: float, **params: str) -> sqlite3.Connection:
    conn = sqlite3.connect(_uri(path, **params), uri=True, timeout=busy_timeout_s, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    return conn


def _connect(path: Path, busy_timeout_s: float, **params: str) -> sqlite3.Connection:
    try:
        return _raw_connect(path, busy_timeout_s, **params)
    except sqlite3.Error as e:
        raise translate(e, path, "opening", busy_timeout_s) from e


def _open_ro(path: Path, busy_timeout_s: float, snapshot: bool = False) -> tuple[sqlite3.Connection, bool]:
    """A read-only connection that has read the header (so it did open), and whether it is ``immutable``.

    ``mode=ro`` first (``snapshot``: straight to ``immutable``); where that cannot open (SQLite cannot
    create the ``-shm`` of a WAL file in a read-only folder) ``immutable=1``, but only when no ``-wal``
    content exists: immutable would not see it, and an old answer is worse than a refusal."""
    if not snapshot:
        try:
            conn = _raw_connect(path, busy_timeout_s, mode="ro")
        except sqlite3.Error as e:
            raise translate(e, path, "opening", busy_timeout_s) from e
        try:
            conn.execute("PRAGMA journal_mode").fetchone()
            return conn, False
        except sqlite3.Error as e:
            conn.close()
            if not errname(e).startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
                raise translate(e, path, "opening", busy_timeout_s) from e
            if _wal_has_content(path):
                raise StoreError(
                    f"cannot read results store {path}: its latest runs are in {path.name}-wal, which SQLite "
                    f"cannot open without write access to {path.parent} (for the -shm file)",
                    hint="copy the file and its -wal into a writable folder and read the copy, or have its owner "
                    "run 'gpumatch runs migrate' on it once (that folds the -wal in)") from e
    return _connect(path, busy_timeout_s, mode="ro", immutable="1"), True


def _identify(path: Path, kind: str, busy_timeout_s: float, migrations: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The migrations applied in a gpumatch store; StoreError for a foreign or newer file. Writes nothing:
    a WAL file without a ``-wal`` is read ``immutable`` (so not even the ``-shm`` file is created)."""
    conn, _ = _open_ro(path, busy_timeout_s, snapshot=kind == "wal" and not _wal_has_content(path))
    try:
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        names = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        if app_id not in (0, APPLICATION_ID):
            raise _foreign(path, f"application_id 0x{app_id:08x}")
        if names and "schema_migrations" not in names:
            raise _foreign(path, "no schema_migrations table")
        applied = [n for n, _ in applied_migrations(conn)]
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as e:
        raise translate(e, path, "identifying the store", busy_timeout_s) from e
    finally:
        conn.close()
    check_known(applied, migrations, str(path))
    if version > len(migrations):  # the names say nothing newer, the schema version does: refuse too
        raise StoreError(f"results store {path} was written by a newer gpumatch (schema version {version}, this "
                         f"version knows {len(migrations)})", hint="upgrade gpumatch, or point GPUMATCH_STORE "
                         "at another file")
    return tuple(applied)


def _open_reader(path: Path, schema: tuple[str, ...], busy_timeout_s: float,
                 migrations: Sequence[tuple[str, str]]) -> Opened:
    if len(schema) < min(MIN_READABLE, len(migrations)):
        raise StoreError(
            f"results store {path} has an older schema ({len(schema)} of {len(migrations)} migrations: "
            f"{schema[-1] if schema else 'none'}) that this gpumatch cannot read as it is",
            hint=f"upgrade it with: gpumatch runs migrate --store {shlex.quote(str(path))}")
    conn, immutable = _open_ro(path, busy_timeout_s)
    try:
        mode = "immutable" if immutable else str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    except sqlite3.Error as e:
        conn.close()
        raise translate(e, path, "opening", busy_timeout_s) from e
    # Also when side files were there at open: concurrent readers each find the other's, and the last to close
    # must remove them (release_side_files checks that the -wal is empty and that it is the last connection).
    return Opened(conn, mode, schema, immutable, release_side_files=not immutable)


def _open_writer(path: Path, busy_timeout_s: float, migrations: Sequence[tuple[str, str]]) -> Opened:
    conn = _connect(path, busy_timeout_s, mode="rwc")
    action = "checking the store (quick_check)"
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        quick_check(conn, path)
        action = "opening for writing"
        mode = _wal(conn, busy_timeout_s)
        conn.execute("PRAGMA synchronous = FULL")
        action = "migrating the schema"
        migrate(conn, str(path), migrations)
        if int(conn.execute("PRAGMA application_id").fetchone()[0]) != APPLICATION_ID:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        schema = tuple(n for n, _ in applied_migrations(conn))
    except sqlite3.Error as e:
        conn.close()
        raise translate(e, path, action, busy_timeout_s) from e
    except BaseException:
        conn.close()
        raise
    return Opened(conn, mode, schema)


def quick_check(conn: sqlite3.Connection, path: Path) -> None:
    """``PRAGMA quick_check`` (https://www.sqlite.org/pragma.html#pragma_quick_check: b-tree structure, free
    list, NOT NULL and CHECK, not index contents; O(file size), ~0.05 s for 12 MB on the development VM).
    StoreError naming the first problems and the way to recover what is readable."""
    rows = conn.execute("PRAGMA quick_check").fetchall()
    lines = [ln.strip() for r in rows for ln in str(r[0]).splitlines() if ln.strip()]
    problems = [ln for ln in lines if ln not in ("ok", "*** in database main ***")]
    if not problems:
        return
    first = "; ".join(problems[:2])
    more = f" and {len(problems) - 2} more" if len(problems) > 2 else ""
    raise StoreError(f"results store {path} is damaged (quick_check: {first[:160]}{more}); not appending to it",
                     hint=recover_hint(path))


def _wal(conn: sqlite3.Connection, busy_timeout_s: float) -> str:
    deadline = time.monotonic() + busy_timeout_s
    while True:  # switching to WAL needs a brief exclusive lock; a concurrent opener may hold it
        try:
            row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(row[0]).lower()
        except sqlite3.OperationalError as e:
            if not is_busy(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
