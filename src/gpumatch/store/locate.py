"""Where the results store is, and opening it read-only when it already exists (for read-only commands).

``open_store(mode="write")`` creates the file; ``gpumatch runs list|show|export|check`` must not (a typo in
``--store`` used to leave an empty database behind and print an empty list, exit 0), and must not change
the file in any way (see :mod:`gpumatch.store.connection`).
"""

from __future__ import annotations

from pathlib import Path

from gpumatch.store.connection import read_schema
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
