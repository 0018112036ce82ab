"""Where the results store is, and opening it read-only when it already exists (for read-only commands).

``open_store(mode="write")`` creates the file; ``gpumatch runs list|show|export|check`` must not (a typo in
``--store`` used to leave an empty database behind and print an empty list, exit 0), and must not change
the file in any way (see :mod:`gpumatch.store.connection`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.settings import check_store_location
from gpumatch.store.connection import read_schema
from gpumatch.store.db import recover_hint
from gpumatch.store.records import RunRecord
from gpumatch.store.store import DEFAULT_BUSY_TIMEOUT_S, Store, is_pg_url, open_store


def store_url(path: Path | str | None = None) -> str | None:
    """The PostgreSQL URL ``path`` names (or, ``path`` None, ``$GPUMATCH_STORE`` does); None for a SQLite file."""
    if path is None:
        from gpumatch.settings import load_settings

        url = load_settings().store_url
        return url if is_pg_url(url) else None
    return str(path) if is_pg_url(str(path)) else None


def locate_store(path: Path | str | None = None) -> tuple[Path, bool]:
    """The store file and whether the user named it (``path`` given, or ``$GPUMATCH_STORE`` set).

    ``False`` means the default ``$GPUMATCH_HOME/results.sqlite``, which need not exist yet.
    """
    from gpumatch.settings import load_settings

    if path is None:
        s = load_settings()
        return s.store_path, s.store_path != s.home / "results.sqlite"
    text = check_store_location(str(path))
    return Path(text[len("sqlite:///") :] if text.startswith("sqlite:///") else text).expanduser(), True


def open_existing_store(path: Path | str | None = None) -> Store:
    """Open the store at ``path`` (default as :func:`locate_store`) read-only; StoreError if it is missing,
    empty, not a gpumatch store, from a newer gpumatch, or at a schema too old to read as it is."""
    url = store_url(path)
    if url is not None:
        return open_store(url, mode="read")
    p, _ = locate_store(path)
    return open_store(p, mode="read")


def migrate_store(path: Path | str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Upgrade the existing store at ``path`` to this gpumatch's schema (``gpumatch runs migrate``); returns
    the migration names applied before and after. Refuses a missing, foreign or newer file, or a damaged
    one (``quick_check``), as every writer does; folds a leftover ``-wal`` into the file on close."""
    url = store_url(path)
    if url is not None:
        from gpumatch.store.pg import read_pg_schema

        before = read_pg_schema(url, DEFAULT_BUSY_TIMEOUT_S)
        with open_store(url, mode="write") as st:
            return before, st.schema
    p, _ = locate_store(path)
    before = read_schema(p, DEFAULT_BUSY_TIMEOUT_S)
    with open_store(p, mode="write") as st:
        after = st.schema
    return before, after


def list_runs(path: Path | str | None = None, kind: str | None = None,
              limit: int = 100) -> tuple[Path | str, list[RunRecord]]:
    """The store file and its runs, newest first (``gpumatch runs list``), read-only. The default store
    before the first measurement holds no runs (an empty list, nothing created); a named store that does not
    exist is a StoreError, as in :func:`open_existing_store`."""
    url = store_url(path)
    if url is not None:
        with open_store(url, mode="read") as pg:
            return pg.path, pg.runs(kind or None, limit)
    p, named = locate_store(path)
    if not named and not p.exists():
        return p, []
    with open_store(p, mode="read") as st:
        return p, st.runs(kind or None, limit)


def check_store(path: Path | str | None = None) -> dict[str, Any]:
    """The whole-file check (``gpumatch runs check``), read-only: ``store``, ``schema`` (the newest migration),
    ``journal_mode`` and :meth:`Store.verify`'s ``integrity`` (``ok`` or SQLite's findings) and
    ``manifest_mismatches``. See :func:`damage` for the verdict."""
    with open_existing_store(path) as st:
        return {"store": str(st.path), "schema": st.schema[-1], "journal_mode": st.journal_mode, **st.verify()}


def damage(report: dict[str, Any]) -> StoreError | None:
    """The error a :func:`check_store` report amounts to (one line, with the recover command), None if sound."""
    bad, rows = report["manifest_mismatches"], report.get("damaged_rows") or []
    if report["integrity"] == "ok" and not bad and not rows:
        return None
    if report["integrity"] != "ok":
        what = report["integrity"]
    elif bad:
        what = f"{len(bad)} manifest hash mismatch(es)"
    else:
        n = int(report.get("damaged_row_count") or len(rows))
        what = f"{n} row(s) with damaged JSON: {', '.join(rows[:3])}{' ...' if n > 3 else ''}"
    if is_pg_url(report["store"]):
        return StoreError(f"results store {report['store']} is damaged ({what[:200]})",
                          hint="a row was changed by another SQL client; restore the database from its backup")
    path = Path(report["store"])
    if report["integrity"] == "ok" and not bad:  # only values: SQLite's structure is sound, recover copies as is
        return StoreError(f"results store {path} is damaged ({what[:200]})", hint="readers read those rows without "
                          "the damaged field and warn; the value itself cannot be restored from this file")
    return StoreError(f"results store {path} is damaged ({what[:200]})", hint=recover_hint(path))
