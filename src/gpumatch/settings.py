"""Where gpumatch keeps user data; read lazily from the environment, never at import time.

- ``GPUMATCH_HOME``: root of user data (default ``~/.gpumatch``).
- ``GPUMATCH_STORE``: results database path, ``sqlite:///path`` URL (default ``$GPUMATCH_HOME/results.sqlite``) or a
  ``postgresql://user@host:port/dbname`` URL (a team's shared store).
- Catalog overlay: ``$GPUMATCH_HOME/catalog/gpus/*.toml`` adds or overrides SKUs,
  ``$GPUMATCH_HOME/catalog/prices/*.toml`` adds price quotes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gpumatch.errors import InputError

#: The store locations gpumatch opens: a file path, ``sqlite:///path``, ``postgresql://`` / ``postgres://``.
STORE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/")


@dataclass(frozen=True)
class Settings:
    """Resolved locations; build with :func:`load_settings`."""

    home: Path
    store_path: Path
    """The SQLite store file (the home store when ``store_url`` is a PostgreSQL URL)."""
    store_url: str = ""
    """What ``GPUMATCH_STORE`` names: a ``postgresql://`` URL, else the SQLite file as a path string."""

    @property
    def gpu_overlay_dir(self) -> Path:
        return self.home / "catalog" / "gpus"

    @property
    def price_overlay_dir(self) -> Path:
        return self.home / "catalog" / "prices"

    @property
    def model_overlay_dir(self) -> Path:
        return self.home / "models"


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    """Read the environment now (not at import) and return the resolved settings."""
    env = os.environ if environ is None else environ
    home = Path(env.get("GPUMATCH_HOME") or Path.home() / ".gpumatch").expanduser()
    store = check_store_location(env.get("GPUMATCH_STORE", ""), "GPUMATCH_STORE")
    if store.startswith(("postgresql://", "postgres://")):
        return Settings(home=home, store_path=home / "results.sqlite", store_url=store)
    if store.startswith("sqlite:///"):
        store = store[len("sqlite:///") :]
    store_path = Path(store).expanduser() if store else home / "results.sqlite"
    return Settings(home=home, store_path=store_path, store_url=str(store_path))


def check_store_location(text: str, where: str = "store") -> str:
    """``text`` unchanged when it is a file path or a URL of :data:`STORE_SCHEMES`; InputError for any other
    URL (``mysql://``, ``http://``, ``s3://``, ``sqlite://x`` with two slashes), which would otherwise be read
    as a relative file path and created as folders. ``where`` names the flag or variable in the message."""
    m = _URL.match(text)
    if m is None or text.startswith(STORE_SCHEMES) or len(m.group(1)) == 1:  # 'C:/...' is a Windows path
        return text
    raise InputError(f"{where} {text!r}: unknown scheme '{m.group(1)}://'",
                     hint="use a file path, sqlite:///PATH or postgresql://USER@HOST:PORT/DB")
