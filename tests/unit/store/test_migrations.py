"""Named, ordered migrations; refusing stores this code cannot read; hostile files at the store path."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from gpumatch.errors import StoreError
from gpumatch.store import MIGRATIONS, open_store
from gpumatch.store.migrations import split_statements

NAMES = [name for name, _ in MIGRATIONS]


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as c:
        return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_migrates_from_empty(store_path: Path) -> None:
    with open_store(store_path) as s:
        assert [m.name for m in s.migrations()] == NAMES
    assert {"runs", "results", "samples", "failures", "calibrations", "manifests", "events"} <= _tables(store_path)
    with sqlite3.connect(store_path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == len(NAMES)
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_names_are_unique_and_ordered() -> None:
    assert len(set(NAMES)) == len(NAMES) and sorted(NAMES) == NAMES


def test_reopen_is_idempotent_and_keeps_data(store_path: Path) -> None:
    with open_store(store_path) as s:
        first = s.migrations()
        run_id = s.begin_run("bench", "x", {}, {})
        s.end_run(run_id, "completed")
    for _ in range(2):
        with open_store(store_path) as s:
            assert s.migrations() == first  # same names, same applied_at: nothing re-applied
            assert [r.run_id for r in s.runs()] == [run_id]


def test_upgrades_an_older_store_in_order(store_path: Path) -> None:
    with open_store(store_path, migrations=MIGRATIONS[:1]) as old:
        run_id = old.begin_run("bench", "from v1", {}, {})
        [m1] = old.migrations()
        old._open_runs.clear()  # the old code would not know how to close it; keep it 'running'
    assert "failures" not in _tables(store_path)
    with open_store(store_path) as s:
        assert [m.name for m in s.migrations()] == NAMES and s.migrations()[0] == m1
        assert s.run(run_id).name == "from v1"


def test_store_from_a_newer_version_is_refused(store_path: Path) -> None:
    future = (*MIGRATIONS, ("0099_from_the_future", "CREATE TABLE future_things (x INTEGER)"))
    open_store(store_path, migrations=future).close()
    with pytest.raises(StoreError, match="newer gpumatch") as exc:
        open_store(store_path)
    assert "0099_from_the_future" in str(exc.value) and "upgrade gpumatch" in exc.value.hint


def test_store_with_migrations_in_another_order_is_refused(store_path: Path) -> None:
    open_store(store_path).close()
    swapped = (MIGRATIONS[1], MIGRATIONS[0], *MIGRATIONS[2:])
    with pytest.raises(StoreError, match="unexpected order"):
        open_store(store_path, migrations=swapped)
    renamed = (("0001_other_name", MIGRATIONS[0][1]),)
    open_store(store_path.with_name("b.sqlite"), migrations=renamed).close()
    with pytest.raises(StoreError, match=r"unexpected order|newer"):
        open_store(store_path.with_name("b.sqlite"))


def test_failed_migration_rolls_back_whole(store_path: Path) -> None:
    broken = (MIGRATIONS[0], ("0002_broken", "CREATE TABLE half_done (x INTEGER);\nCREATE TABLE runs (y);"))
    with pytest.raises(StoreError, match="migrating"):
        open_store(store_path, migrations=broken)
    assert "half_done" not in _tables(store_path)
    with open_store(store_path) as s:  # the real list still applies cleanly afterwards
        assert [m.name for m in s.migrations()] == NAMES


def test_split_statements_keeps_trigger_bodies_whole() -> None:
    sql = "CREATE TABLE t (a);\nCREATE TRIGGER x BEFORE DELETE ON t BEGIN\n SELECT 1;\n SELECT 2;\nEND;\n"
    assert len(split_statements(sql)) == 2
    assert split_statements("CREATE TABLE t (a)") == ["CREATE TABLE t (a)"]
    with pytest.raises(ValueError, match="incomplete"):
        split_statements("CREATE TRIGGER x BEFORE DELETE ON t BEGIN SELECT 1;")


def _one_line(e: StoreError) -> str:
    text = str(e)
    assert "\n" not in text and e.hint
    return text


def test_text_file_at_store_path_is_one_line_error(store_path: Path) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.write_text("these are my notes, not a database\n" * 20)
    with pytest.raises(StoreError) as exc:
        open_store(store_path)
    assert "not a readable gpumatch results store" in _one_line(exc.value)
    assert store_path.read_text().startswith("these are my notes")  # left untouched


def test_random_bytes_at_store_path(store_path: Path) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.write_bytes(os.urandom(8192))
    with pytest.raises(StoreError, match="not a readable"):
        open_store(store_path)


def test_someone_elses_sqlite_database_is_refused(store_path: Path) -> None:
    store_path.parent.mkdir(parents=True)
    with sqlite3.connect(store_path) as c:
        c.execute("CREATE TABLE photos (id INTEGER, name TEXT)")
    with pytest.raises(StoreError, match="not a gpumatch results store"):
        open_store(store_path)
    assert _tables(store_path) == {"photos"}


def test_empty_file_is_initialised(store_path: Path) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.touch()
    with open_store(store_path) as s:
        assert len(s.migrations()) == len(NAMES)


def test_folder_at_store_path(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a folder") as exc:
        open_store(tmp_path)
    _one_line(exc.value)


def test_unwritable_location(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create the folder") as exc:
        open_store(blocker / "sub" / "results.sqlite")  # a parent is a regular file: fails even for root
    _one_line(exc.value)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_folder(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(StoreError, match=r"cannot write|cannot create|not a readable|results store"):
            open_store(ro / "results.sqlite")
    finally:
        ro.chmod(0o700)


def test_locked_too_long_is_a_clear_error(store_path: Path) -> None:
    open_store(store_path).close()
    holder = sqlite3.connect(store_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        with open_store(store_path, busy_timeout_s=0.2) as s:
            with pytest.raises(StoreError, match="stayed locked") as exc:
                s.begin_run("bench", "x", {}, {})
            assert "another process" in exc.value.hint
            assert s.runs() == []  # readers are not blocked by a writer (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
