"""Shared fixtures: an isolated GPUMATCH_HOME for every test, so no test reads the user's files."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumatch.store import Store, open_store


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "gpumatch-home"
    monkeypatch.setenv("GPUMATCH_HOME", str(home))
    monkeypatch.delenv("GPUMATCH_STORE", raising=False)
    return home


# ---- PostgreSQL: one throwaway server per test session, one fresh database per test ------------------------------

_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """URL of a PostgreSQL server for the store tests: ``$GPUMATCH_TEST_PG_URL`` when set, else one started by
    scripts/pg-start in a temp folder (loopback, unprivileged) and stopped by scripts/pg-stop at the end.
    No server: the PostgreSQL tests skip, saying why; in CI (``CI=true``) they fail instead."""
    url = os.environ.get("GPUMATCH_TEST_PG_URL")
    if url:
        yield url
        return
    folder = tempfile.mkdtemp(prefix="gpumatch-pg-")
    started = subprocess.run([str(_ROOT / "scripts" / "pg-start"), folder], capture_output=True, text=True,
                             timeout=120, check=False)
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        why = f"no PostgreSQL server could be started (scripts/pg-start: {started.stderr.strip()[-300:]})"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must test the PostgreSQL store (.ci/run installs Debian's postgresql)")
        pytest.skip(why)
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([str(_ROOT / "scripts" / "pg-stop"), folder], timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A new, empty database on the test server (dropped afterwards): a PostgreSQL store URL."""
    import psycopg

    name = f"gm_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield pg_server.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store on each backend: a SQLite file path, then a PostgreSQL database URL."""
    if request.param == "sqlite":
        return str(tmp_path / "both" / "results.sqlite")
    return str(request.getfixturevalue("pg_url"))


# ---- the results store: a fresh store file per test (store tests, and the CLI and e2e tests that read one) ------

@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "results.sqlite"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    with open_store(store_path) as s:
        yield s


@pytest.fixture
def manifest() -> dict[str, object]:
    """A small environment manifest in the shape of benchmark-method.md section 4."""
    return {
        "kit_commit": "0e38e36",
        "gpus": [{"index": 0, "name": "NVIDIA H200", "driver": "570.124.06", "power": {"enforced_w": 700.0}}],
        "software": {"torch": "2.11.0"},
    }
