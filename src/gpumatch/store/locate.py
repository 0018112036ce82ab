"""Where the results store is, and opening it read-only when it already exists (for read-only commands).

``open_store(mode="write")`` creates the file; ``gpumatch runs list|show|export|check`` must not (a typo in
``--store`` used to leave an empty database behind and print an empty list, exit 0), and must not change
the file in any way (see :mod:`gpumatch.store.connection`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpumatch.errors import StoreError
from gpumatch.store.connection import read_schema
from gpumatch.store.db import recover_hint
from gpumatch.store.records import RunRecord
from gpumatch.store.store import DEFAULT_BUSY_TIMEOUT_S, Store, open_store


def locate_store(path: Path | str | None = None) -> tuple[Path, bool]:
    """The store file and whether the user named it (``path`` given, or ``$GPUMATCH_STORE`` set).

    ``False`` means the default ``$GPUMATCH_HOME/results.sqlite``, which need not exist yet.
    """
    from gpumatch.settings import load_settings

    if path is None:
        s = load_settings()
        return s.store_path, s.store_path != s.home / "results.sqlite"
    text = str(path)
    return Path(text[len("sqlite:///") :] if text.startswith("sqlite:///") else text).expanduser(), True


def open_existing_store(path: Path | str | None = None) -> Store:
    """Open the store at ``path`` (default as :func:`locate_store`) read-only; StoreError if it is missing,
    empty, not a gpumatch store, from a newer gpumatch, or at a schema too old to read as it is."""
    p, _ = locate_store(path)
    return open_store(p, mode="read")


def migrate_store(path: Path | str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Upgrade the existing store at ``path`` to this gpumatch's schema (``gpumatch runs migrate``); returns
    the migration names applied before and after. Refuses a missing, foreign or newer file, or a damaged
    one (``quick_check``), as every writer does; folds a leftover ``-wal`` into the file on close."""
    p, _ = locate_store(path)
    before = read_schema(p, DEFAULT_BUSY_TIMEOUT_S)
    with open_store(p, mode="write") as st:
        after = st.schema
    return before, after


def list_runs(path: Path | str | None = None, kind: str | None = None,
              limit: int = 100) -> tuple[Path, list[RunRecord]]:
    """The store file and its runs, newest first (``gpumatch runs list``), read-only. The default store
    before the first measurement holds no runs (an empty list, nothing created); a named store that does not
    exist is a StoreError, as in :func:`open_existing_store`."""
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
    bad = report["manifest_mismatches"]
    if report["integrity"] == "ok" and not bad:
        return None
    what = report["integrity"] if report["integrity"] != "ok" else f"{len(bad)} manifest hash mismatch(es)"
    path = Path(report["store"])
    return StoreError(f"results store {path} is damaged ({what[:200]})", hint=recover_hint(path))
