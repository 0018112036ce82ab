"""The store's backend seam: what :class:`~gpumatch.store.store.Store` needs from a database.

One small protocol, one implementation per database (as httpx puts transports behind ``handle_request``):
:class:`gpumatch.store.db.Db` for SQLite (the embedded default) and :class:`gpumatch.store.pg.PgDb` for
PostgreSQL (a team's shared store). The store's SQL is written once in the subset both dialects run the
same way: ``?`` placeholders (the PostgreSQL backend hands them to psycopg as ``%s``), ``INSERT ... RETURNING
id`` for new ids, ``INSERT ... ON CONFLICT DO NOTHING`` for manifests. What differs per dialect lives in
the backend: connecting and its checks, locking and retries, errors as one-line StoreErrors, the schema
(``migrations.py`` for SQLite, ``pg_schema.py`` for PostgreSQL, the same migration names), and the
whole-store check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Cursor(Protocol):
    """What a query returns: rows as tuples."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The connection a transaction function receives (``sqlite3.Connection`` or the psycopg adapter)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any: ...


class Backend(Protocol):
    """One open store connection, shared by the threads of a process (``lock``)."""

    dialect: str
    """``"sqlite"`` or ``"postgresql"``."""
    lock: threading.RLock
    busy_timeout_s: float

    @property
    def where(self) -> str:
        """The store named in messages: a file path, or a URL without its password."""
        ...

    def write(self, action: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` in one write transaction; commit, or roll back and raise StoreError."""
        ...

    def read(self, action: str, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` in one read transaction that sees one consistent snapshot across its queries."""
        ...

    def applied(self, conn: Any) -> list[tuple[str, str]]:
        """(name, applied_at) of the migrations applied, in order."""
        ...

    def integrity_check(self) -> str:
        """``"ok"`` or the problems the database's own whole-store check found (one line)."""
        ...

    def close(self) -> None: ...
