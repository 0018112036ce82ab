"""Read-only opens change nothing; nothing is written before a file is known to be a gpumatch store;
the schema version is checked both ways (issue 10, items 9 and 13)."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import StoreError
from gpumatch.store import APPLICATION_ID, MIGRATIONS, open_store
from gpumatch.store import connection as connection_mod

NAMES = [n for n, _ in MIGRATIONS]


def _digest(folder: Path) -> dict[str, str]:
    """Name -> SHA-256 of every file in ``folder`` (side files included)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _filled(path: Path) -> int:
    with open_store(path, mode="write") as s:
        run = s.begin_run("monitor", "python train.py", {"gpu": "H200"}, {"interval_s": 0.1})
        s.add_samples(run, [{"t_s": float(i), "power_instant_w": 300.0 + i} for i in range(50)])
        s.add_result(run, "energy_j", 1234.0, "J")
        s.add_event(run, 0.0, "note", {"text": "start"})
        s.end_run(run, "completed")
    return run


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_programs_sqlite_file_is_refused_byte_for_byte_unchanged(
    tmp_path: Path, journal: str, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = tmp_path / "photos.db"
    c = sqlite3.connect(foreign)
    c.execute(f"PRAGMA journal_mode = {journal}")
    c.execute("CREATE TABLE photos (id INTEGER, name TEXT)")
    c.execute("INSERT INTO photos VALUES (1, 'cat.jpg')")
    c.commit()
    c.close()
    before = _digest(tmp_path)
    for mode in ("write", "read"):
        with pytest.raises(StoreError, match="not a gpumatch results store") as exc:
            open_store(foreign, mode=mode)  # type: ignore[arg-type]
        assert "\n" not in str(exc.value) and "not changed" in str(exc.value)
    code, _, err = _cli(capsys, "runs", "list", "--store", str(foreign))
    assert code == 2 and err.count("\n") == 1 and "not a gpumatch results store" in err
    assert _digest(tmp_path) == before  # same bytes, no -wal/-shm/-journal left beside it


def test_a_file_with_another_application_id_is_refused_from_its_header(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as c:
        c.execute("PRAGMA application_id = 1234")
        c.execute("CREATE TABLE schema_migrations (seq INTEGER)")  # looks like ours, is not
    before = _digest(tmp_path)
    with pytest.raises(StoreError, match="application_id 0x000004d2"):
        open_store(other, mode="write")
    assert _digest(tmp_path) == before


def test_writers_stamp_the_application_id(store_path: Path) -> None:
    open_store(store_path, mode="write").close()
    assert int.from_bytes(store_path.read_bytes()[68:72], "big") == APPLICATION_ID


def test_read_only_commands_change_no_byte_and_open_only_read_only_connections(
    store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _filled(store_path)
    before = _digest(store_path.parent)
    uris: list[str] = []
    real = sqlite3.connect

    def spy(database: str, *args: object, **kwargs: object) -> sqlite3.Connection:
        uris.append(str(database))
        return real(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(connection_mod.sqlite3, "connect", spy)
    for args in (["list"], ["show", str(run)], ["show", str(run), "--samples", "-f", "json"], ["check"],
                 ["export", str(run), "-o", str(tmp_path / "t.csv")]):
        code, _, err = _cli(capsys, "runs", *args, "--store", str(store_path))
        assert code == 0, (args, err)
    reads = [u for u in uris if "mode=rw" not in u]  # mode=rw: the query_only close that removes the side files
    assert reads and all("mode=ro" in u for u in reads)
    assert len(uris) - len(reads) <= len(reads)
    after = _digest(store_path.parent)
    assert after == before  # the store file: not one byte; and no -wal/-shm left beside it


def test_reads_leave_no_side_files_and_leave_a_live_writers_alone(store_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``runs list|show``, ``bench list``, a merge's source: nothing beside the store afterwards; while a
    writer has the store open its -wal/-shm are its own and stay (it removes them when it closes)."""
    run = _filled(store_path)
    before = _digest(store_path.parent)
    for args in (["runs", "list"], ["runs", "show", str(run)], ["bench", "list"]):
        code, _, err = _cli(capsys, *args, "--store", str(store_path))
        assert code == 0, (args, err)
        assert _digest(store_path.parent) == before, args
    code, _, err = _cli(capsys, "runs", "merge", str(store_path), "--into", str(store_path.parent.parent / "m.sqlite"))
    assert code == 0 and _digest(store_path.parent) == before, err
    with open_store(store_path, mode="write") as live:
        code, _, err = _cli(capsys, "runs", "list", "--store", str(store_path))
        assert code == 0, err
        assert live.run(run).run_id == run  # the writer's connection still works
        assert (store_path.parent / (store_path.name + "-shm")).exists()
    assert _digest(store_path.parent) == before


def test_a_read_only_store_refuses_writes(store_path: Path) -> None:
    _filled(store_path)
    with open_store(store_path, mode="read") as s:
        assert s.mode == "read" and len(s.runs()) == 1
        with pytest.raises(StoreError, match="opened read-only"):
            s.begin_run("bench", "x", {}, {})
        with pytest.raises(StoreError, match="opened read-only"):
            s.close_stale_runs()


def test_a_chmod_read_only_store_is_readable(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Root ignores file modes, so for root this only shows that nothing is written; the read-only bind test
    below makes the kernel refuse writes."""
    run = _filled(store_path)
    store_path.chmod(0o444)
    store_path.parent.chmod(0o555)
    try:
        code, out, err = _cli(capsys, "runs", "list", "--store", str(store_path))
        assert code == 0 and "python train.py" in out, err
        code, out, err = _cli(capsys, "runs", "show", str(run), "--store", str(store_path), "-f", "json")
        assert code == 0 and '"energy_j"' in out, err
    finally:
        store_path.parent.chmod(0o755)
        store_path.chmod(0o644)


# ---- a read-only medium: a read-only bind mount in a private mount namespace (needs root) -------------

_READ = """
import json, sys
from gpumatch.cli.app import main
sys.exit(main(["runs", *sys.argv[1:]]))
"""


def _on_read_only_mount(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(folder), sys.executable, "-c", _READ,
                           *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def read_only_mount(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    try:
        r = subprocess.run(["unshare", "-m", "sh", "-c", f'mount --bind "{probe}" "{probe}" && mount -o '
                            f'remount,ro,bind "{probe}" "{probe}" && ! touch "{probe}/x" 2>/dev/null'],
                           capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no unshare(1) here: a read-only bind mount needs it (and root)")
    if r.returncode != 0:
        pytest.skip("cannot make a read-only bind mount here (needs root / CAP_SYS_ADMIN)")


def test_a_store_on_a_read_only_medium_is_readable(read_only_mount: None, store_path: Path) -> None:
    run = _filled(store_path)  # closed cleanly: no -wal, so SQLite could not make its -shm: immutable read
    before = _digest(store_path.parent)
    r = _on_read_only_mount(store_path.parent, "list", "--store", str(store_path), "-f", "json")
    assert r.returncode == 0 and '"python train.py"' in r.stdout, r.stderr
    r = _on_read_only_mount(store_path.parent, "show", str(run), "--store", str(store_path), "--samples", "-f", "csv")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 51, r.stderr
    assert _digest(store_path.parent) == before


def test_on_a_read_only_medium_runs_still_in_the_wal_are_read_or_refused_never_missed(
    read_only_mount: None, store_path: Path
) -> None:
    _filled(store_path)
    keep = sqlite3.connect(store_path)  # a second connection keeps the -wal alive while a writer adds a run
    keep.execute("SELECT 1 FROM runs").fetchall()
    with open_store(store_path, mode="write") as s:
        s.end_run(s.begin_run("monitor", "the newest run", {}, {}), "completed")
    r = _on_read_only_mount(store_path.parent, "list", "--store", str(store_path), "-f", "json")
    assert r.returncode == 0 and "the newest run" in r.stdout, r.stderr  # -wal and -shm exist: read through them
    keep.close()
    with open_store(store_path, mode="write") as s:  # once more, leaving a -wal with content and no -shm
        s.end_run(s.begin_run("monitor", "newer still", {}, {}), "completed")
        keep = sqlite3.connect(store_path)
        keep.execute("SELECT 1 FROM runs").fetchall()
    wal, shm = (store_path.with_name(store_path.name + x) for x in ("-wal", "-shm"))
    data = {p: p.read_bytes() for p in (store_path, wal)}
    keep.close()  # the last connection: checkpoints and removes -wal/-shm ...
    for p, b in data.items():  # ... put back as a killed writer's leftovers would be, minus the -shm
        p.write_bytes(b)
    shm.unlink(missing_ok=True)
    r = _on_read_only_mount(store_path.parent, "list", "--store", str(store_path), "-f", "json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "-wal" in r.stderr, r.stderr  # not a stale answer


# ---- schema versions, both ways -----------------------------------------------------------------------


def test_an_older_store_is_read_as_it_is_without_a_migration(store_path: Path, capsys) -> None:
    with open_store(store_path, mode="write", migrations=MIGRATIONS[:2]) as old:
        old.end_run(old.begin_run("bench", "from 0002", {}, {}), "completed")
    before = _digest(store_path.parent)
    code, out, err = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 0 and "from 0002" in out, err
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as c:
        assert [r[0] for r in c.execute("SELECT name FROM schema_migrations")] == NAMES[:2]
    assert _digest(store_path.parent)[store_path.name] == before[store_path.name]


def test_a_store_too_old_to_read_is_refused_with_the_upgrade_command(store_path: Path, capsys) -> None:
    with open_store(store_path, mode="write", migrations=MIGRATIONS[:1]) as old:
        old.end_run(old.begin_run("bench", "from 0001", {}, {}), "completed")
    before = _digest(store_path.parent)
    code, out, err = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "older schema" in err and f"gpumatch runs migrate --store {store_path}" in err
    assert _digest(store_path.parent)[store_path.name] == before[store_path.name]
    code, _, err = _cli(capsys, "runs", "migrate", "--store", str(store_path))
    assert code == 0 and "upgraded from 0001_core_tables to " + NAMES[-1] in err
    code, out, _ = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 0 and "from 0001" in out
    code, _, err = _cli(capsys, "runs", "migrate", "--store", str(store_path))
    assert code == 0 and "up to date" in err


@pytest.mark.parametrize("empty", ["zero bytes", "sqlite without tables"])
def test_read_only_commands_create_no_schema_in_an_empty_file(store_path: Path, empty: str, capsys) -> None:
    store_path.parent.mkdir(parents=True)
    if empty == "zero bytes":
        store_path.touch()
    else:
        sqlite3.connect(store_path).execute("VACUUM").connection.close()
    before = _digest(store_path.parent)
    for args in (["list"], ["show", "1"], ["check"]):
        code, out, err = _cli(capsys, "runs", *args, "--store", str(store_path))
        assert code == 2 and out == "" and "is empty" in err and err.count("\n") == 1
    assert _digest(store_path.parent) == before
    with open_store(store_path, mode="write") as s:  # a writer initialises it
        assert s.schema == tuple(NAMES)


def test_a_store_from_a_newer_gpumatch_is_refused_by_readers_and_writers(store_path: Path, capsys) -> None:
    future = (*MIGRATIONS, ("0099_from_the_future", "CREATE TABLE future_things (x INTEGER)"))
    open_store(store_path, mode="write", migrations=future).close()
    before = _digest(store_path.parent)
    for mode in ("read", "write"):
        with pytest.raises(StoreError, match="newer gpumatch"):
            open_store(store_path, mode=mode)  # type: ignore[arg-type]
    code, _, err = _cli(capsys, "runs", "list", "--store", str(store_path))
    assert code == 2 and "newer gpumatch" in err and "upgrade gpumatch" in err
    assert _digest(store_path.parent) == before


def test_a_newer_schema_version_alone_is_refused(store_path: Path) -> None:
    open_store(store_path, mode="write").close()
    with sqlite3.connect(store_path) as c:
        c.execute(f"PRAGMA user_version = {len(NAMES) + 5}")
    with pytest.raises(StoreError, match=rf"newer gpumatch \(schema version {len(NAMES) + 5}"):
        open_store(store_path, mode="read")


def test_a_fifo_at_the_store_path_is_refused_without_blocking(tmp_path: Path, capsys) -> None:
    import os

    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    for mode in ("read", "write"):
        with pytest.raises(StoreError, match="not a regular file"):
            open_store(fifo, mode=mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("args", [
    ["runs", "list", "--store", "{missing}"], ["runs", "show", "1", "--store", "{missing}"],
    ["runs", "check", "--store", "{missing}"], ["bench", "list", "--store", "{missing}"],
    ["bench", "show", "1", "--store", "{missing}"], ["runs", "merge", "{missing}", "--into", "{into}"],
    ["runs", "push", "--store", "{missing}", "--to", "{into}"],
])
def test_a_read_of_a_missing_store_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   args: list[str]) -> None:
    folder = tmp_path / "nothing-here"
    names = {"missing": str(folder / "x.sqlite"), "into": str(folder / "sub" / "pooled.sqlite")}
    code, _, err = _cli(capsys, *[a.format(**names) for a in args])
    assert code == 2 and err.count("\n") == 1 and "no results store at" in err, err
    assert not folder.exists()
