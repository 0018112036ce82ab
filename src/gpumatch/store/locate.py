"""Where the results store is, and opening it only when it already exists (for read-only commands).

``open_store`` creates the file; ``gpumatch runs list|show|export`` must not (a typo in ``--store``
used to leave an empty database behind and print an empty list, exit 0).
"""

from __future__ import annotations

from pathlib import Path

from gpumatch.errors import StoreError
from gpumatch.store.store import Store, open_store


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


def missing_store_error(path: Path) -> StoreError:
    return StoreError(
        f"no results store at {path}",
        hint="run 'gpumatch monitor -- CMD' or 'gpumatch bench run' to create one, or check --store / $GPUMATCH_STORE",
    )


def open_existing_store(path: Path | str | None = None) -> Store:
    """Open the store at ``path`` (default as :func:`locate_store`) if the file exists, else StoreError."""
    p, _ = locate_store(path)
    if not p.exists() and not p.is_symlink():
        raise missing_store_error(p)
    return open_store(p)
