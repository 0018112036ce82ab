"""Kills and concurrent writers of the other writing commands (issue 25, "Data"): ``calibrate`` (and its
``--out``), ``runs migrate``, ``runs recover``, ``bench export``, ``runs export --output`` and ``report --html``.

A child stalls at a chosen point of the write (kill_workers.py: inside the store transaction, inside a migration
step, between the tables of a recovery, half-way through an output file's bytes, or just before the file is
published) and is SIGKILLed there. Afterwards the store passes ``PRAGMA integrity_check`` and holds nothing of
the write in flight, an output file is absent (never half-written), and the command run again succeeds with the
right counts. Four of the same command at once: all succeed, or all but one fail in one line (exit 2) where the
output may be written once; nothing is lost or doubled. A reader during a stalled write sees the store as it was
before it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import kill_workers as kw
import pytest

from gpumatch.cli.app import main
from gpumatch.store import open_store
from gpumatch.store.migrations import MIGRATIONS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc, POSIX signals")

BENCH = kw.ROOT / "tests" / "data" / "measurements" / "bench" / "2026-12-04-h200-quick.json"
TABLES = ("runs", "results", "samples", "events", "failures", "calibrations", "calibration_runs", "schema_migrations")


def _counts(store: Path) -> dict[str, int]:
    return {t: kw.count(store, f"SELECT count(*) FROM {t}") for t in TABLES}


def _bench_store(tmp_path: Path) -> Path:
    store = tmp_path / "s.sqlite"
    assert main(["bench", "import", str(BENCH), "--store", str(store)]) == 0
    return store


def _three_runs(store: Path, migrations: tuple[tuple[str, str], ...] = MIGRATIONS) -> dict[str, int]:
    with open_store(store, migrations=migrations) as st:
        for k in range(3):
            rid = st.begin_run("monitor", f"r{k}", {"k": k}, {"k": k})
            st.add_samples(rid, [{"t_s": i * 0.1, "power_instant_w": 100.0 + i} for i in range(200)])
            st.add_result(rid, "x", float(k), "1")
            st.add_event(rid, 0.0, "note", {"k": k})
            st.end_run(rid, "completed")
    return _counts(store)


def _stalled(tmp_path: Path, mode: str, extra: tuple[str, ...], *argv: str) -> tuple[Path, subprocess.Popen[str]]:
    marker = tmp_path / f"marker-{mode}-{len(list(tmp_path.iterdir()))}"
    proc = kw.start(tmp_path, mode, marker, *argv, extra=extra)
    kw.wait_until(proc, marker.exists, "the stall")
    return marker, proc


def _killed_at(tmp_path: Path, mode: str, extra: tuple[str, ...], *argv: str) -> None:
    _, proc = _stalled(tmp_path, mode, extra, *argv)
    kw.kill(proc)


def _race(tmp_path: Path, *argv: str, n: int = 4) -> list[tuple[int, str]]:
    """``n`` processes of ``gpumatch ARGV`` at once: (exit code, stderr) of each."""
    procs = [subprocess.Popen([sys.executable, "-m", "gpumatch", *argv], cwd=tmp_path, env=kw.env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    return [(p.returncode, e) for p, e in zip(procs, errs, strict=True)]


def _one_winner(answers: list[tuple[int, str]]) -> None:
    """One process wrote the output; the others were refused in one line, exit 2."""
    assert sorted(code for code, _ in answers) == [0, 2, 2, 2], answers
    for code, err in answers:
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("gpumatch: error:") and "exists" in err, err


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial-" in p.name or p.name.endswith(("-wal", "-shm")))


# --- calibrate -------------------------------------------------------------------------------------------------

def test_calibrate_killed_inside_its_transaction_stores_nothing(tmp_path: Path) -> None:
    store = _bench_store(tmp_path)
    _, proc = _stalled(tmp_path, "write", ("adding calibration", "0"), "calibrate", "--store", str(store))
    with open_store(store, mode="read") as st:  # a reader while the rows are written: none of them
        assert st.calibrations() == [] and len(st.runs()) == 1
    kw.kill(proc)
    assert kw.integrity(store) == "ok"
    assert _counts(store)["calibrations"] == 0 and _counts(store)["calibration_runs"] == 0
    assert main(["calibrate", "--store", str(store)]) == 0
    assert _counts(store)["calibrations"] == 1 and _counts(store)["calibration_runs"] == 1


def test_calibrate_out_killed_before_the_file_is_published(tmp_path: Path) -> None:
    store, out = _bench_store(tmp_path), tmp_path / "cal.json"
    _killed_at(tmp_path, "publish", ("0",), "calibrate", "--store", str(store), "--out", str(out))
    assert not out.exists() and _counts(store)["calibrations"] == 1  # stored (whole) before the file was written
    assert main(["calibrate", "--store", str(store), "--out", str(out)]) == 0
    assert "calibration" in json.loads(out.read_text()) and _counts(store)["calibrations"] == 2
    assert _leftovers(tmp_path) == []  # the killed writer's temporary was removed by the next one


def test_four_concurrent_calibrates(tmp_path: Path) -> None:
    store = _bench_store(tmp_path)
    assert [code for code, _ in _race(tmp_path, "calibrate", "--store", str(store))] == [0] * 4
    with open_store(store, mode="read") as st:
        cals = st.calibrations()
    assert sorted(c.calibration_id for c in cals) == [1, 2, 3, 4] and all(c.run_ids == (1,) for c in cals)
    assert _leftovers(tmp_path) == [] and kw.integrity(store) == "ok"


# --- runs migrate ----------------------------------------------------------------------------------------------

def test_migrate_killed_inside_a_step_keeps_the_old_schema(tmp_path: Path) -> None:
    store = tmp_path / "old.sqlite"
    before = _three_runs(store, MIGRATIONS[:3])
    _, proc = _stalled(tmp_path, "migration", ("0",), "runs", "migrate", "--store", str(store))
    with open_store(store, mode="read") as st:  # a reader during the step: the old schema, every run
        assert len(st.schema) == 3 and len(st.runs()) == 3
    kw.kill(proc)
    assert kw.integrity(store) == "ok" and _counts(store) == before
    assert main(["runs", "migrate", "--store", str(store)]) == 0
    assert _counts(store) == {**before, "schema_migrations": 4}
    assert kw.count(store, "SELECT count(DISTINCT run_uuid) FROM runs") == 3
    assert kw.count(store, "PRAGMA user_version") == len(MIGRATIONS)


def test_four_concurrent_migrates(tmp_path: Path) -> None:
    store = tmp_path / "old.sqlite"
    before = _three_runs(store, MIGRATIONS[:3])
    assert [code for code, _ in _race(tmp_path, "runs", "migrate", "--store", str(store))] == [0] * 4
    assert _leftovers(tmp_path) == [] and kw.integrity(store) == "ok"
    assert _counts(store) == {**before, "schema_migrations": 4}  # migrated once


# --- runs recover ----------------------------------------------------------------------------------------------

def test_recover_killed_half_way_leaves_no_output(tmp_path: Path) -> None:
    store, out = tmp_path / "s.sqlite", tmp_path / "fixed.sqlite"
    before = _three_runs(store)
    _killed_at(tmp_path, "recover", ("2",), "runs", "recover", "--store", str(store), "--output", str(out))
    assert not out.exists()  # it appears whole, or not at all
    assert main(["runs", "recover", "--store", str(store), "--output", str(out)]) == 0
    assert _counts(out) == before and kw.integrity(out) == "ok"
    assert [n for n in _leftovers(tmp_path) if n.startswith(".")] == []


def test_four_concurrent_recovers_to_one_output(tmp_path: Path) -> None:
    store, out = tmp_path / "s.sqlite", tmp_path / "fixed.sqlite"
    before = _three_runs(store)
    _one_winner(_race(tmp_path, "runs", "recover", "--store", str(store), "--output", str(out)))
    assert _leftovers(tmp_path) == [] and _counts(out) == before and kw.integrity(out) == "ok"


# --- bench export, runs export, report --html ------------------------------------------------------------------

def _reference(tmp_path: Path, argv: list[str], out: Path) -> bytes:
    """What the command writes undisturbed (into a folder of its own)."""
    ref = tmp_path / "ref"
    ref.mkdir(exist_ok=True)
    assert main([a.replace(str(out), str(ref / out.name)) for a in argv]) == 0
    return (ref / out.name).read_bytes()


@pytest.mark.parametrize("kind", ["bench-export", "runs-export-json", "runs-export-csv"])
def test_an_export_killed_mid_write_leaves_no_file(tmp_path: Path, kind: str) -> None:
    store = _bench_store(tmp_path)
    out = tmp_path / ("e.csv" if kind.endswith("csv") else "e.json")
    runs_export = ["runs", "export", "1", "--format", kind.rsplit("-", 1)[1], "--output", str(out)]
    argv = [*(["bench", "export", "1", "--out", str(out)] if kind == "bench-export" else runs_export),
            "--store", str(store)]
    want = _reference(tmp_path, argv, out)
    if not kind.endswith("csv"):  # JSON goes out in os.write chunks: kill it with half a chunk on disk
        _killed_at(tmp_path, "halfway", (), *argv)
        assert not out.exists()
    _killed_at(tmp_path, "publish", ("0",), *argv)
    assert not out.exists()
    assert main(argv) == 0 and out.read_bytes() == want
    assert _leftovers(tmp_path) == []


def test_four_concurrent_exports_to_one_file(tmp_path: Path) -> None:
    store, out = _bench_store(tmp_path), tmp_path / "e.json"
    argv = ["bench", "export", "1", "--out", str(out), "--store", str(store)]
    want = _reference(tmp_path, argv, out)
    _one_winner(_race(tmp_path, *argv))
    assert out.read_bytes() == want
    assert [c for c, _ in _race(tmp_path, *argv, "--force")] == [0] * 4 and out.read_bytes() == want
    argv = ["runs", "export", "1", "--format", "csv", "--output", str(tmp_path / "e.csv"), "--store", str(store)]
    assert [c for c, _ in _race(tmp_path, *argv, "--force")] == [0] * 4
    assert (tmp_path / "e.csv").read_bytes() == _reference(tmp_path, argv, tmp_path / "e.csv")
    assert _leftovers(tmp_path) == []


def test_a_trace_export_killed_between_its_two_files(tmp_path: Path) -> None:
    """The sidecar is published first, the trace last: a trace file that is there has its sidecar."""
    store, out = tmp_path / "s.sqlite", tmp_path / "t.csv"
    _three_runs(store)
    argv = ["runs", "export", "2", "--output", str(out), "--store", str(store)]
    _killed_at(tmp_path, "publish", ("0",), *argv)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t.")) == []
    _killed_at(tmp_path, "publish", ("1",), *argv)
    assert not out.exists() and json.loads(out.with_suffix(".json").read_text())  # the sidecar, whole
    assert main(argv) == 2  # the sidecar is there: refused in one line, unless --force
    assert main([*argv, "--force"]) == 0
    assert len(out.read_text().splitlines()) == 201 and _leftovers(tmp_path) == []


def test_report_html_killed_mid_write_and_four_at_once(tmp_path: Path) -> None:
    store, page = _bench_store(tmp_path), tmp_path / "r.html"
    argv = ["report", "--run", "1", "--store", str(store), "--html", str(page)]
    _killed_at(tmp_path, "halfway", (), *argv)
    assert not page.exists()
    assert main(argv) == 0
    size = len(page.read_bytes())

    def whole() -> bool:  # the plots' clip-path ids are random: the same size, one page from start to end
        text = page.read_text()
        return (len(text.encode()) == size and text.startswith("<!DOCTYPE html>")
                and text.count("</html>") == 1 and text.endswith("</html>\n"))
    assert whole()
    page.unlink()
    _one_winner(_race(tmp_path, *argv))
    assert whole()
    assert [c for c, _ in _race(tmp_path, *argv, "--force")] == [0] * 4 and whole()
    assert _leftovers(tmp_path) == []


def test_a_sqlite_reader_never_sees_a_half_written_export(tmp_path: Path) -> None:
    """The store an export reads is opened read-only: after four exports and a killed one, it is byte for byte
    as it was and has no side files."""
    store = _bench_store(tmp_path)
    data = store.read_bytes()
    _killed_at(tmp_path, "publish", ("0",), "bench", "export", "1", "--out", str(tmp_path / "x.json"),
               "--store", str(store))
    _race(tmp_path, "bench", "export", "1", "--out", str(tmp_path / "x.json"), "--store", str(store), "--force")
    assert store.read_bytes() == data and _leftovers(tmp_path) == []
    conn = sqlite3.connect(f"file:{store}?mode=ro&immutable=1", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


def test_a_foreign_edge_event_is_left_out_of_a_trace_export_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An ``edge`` or ``xid`` event not in the monitor's shape (another writer's, or a damaged row) was an
    internal error (KeyError) of ``runs export``; it is left out with a warning and the rest is exported."""
    store, out = tmp_path / "s.sqlite", tmp_path / "t.csv"
    with open_store(store) as st:
        rid = st.begin_run("monitor", "r", {}, {})
        st.add_samples(rid, [{"t_s": 0.0}, {"t_s": 0.1}])
        st.add_event(rid, 0.0, "edge", {"note": "not a counter read"})
        st.add_event(rid, 0.1, "xid", {"code": "none"})
        st.end_run(rid, "completed")
    assert main(["runs", "export", "1", "--output", str(out), "--store", str(store)]) == 0
    err = capsys.readouterr().err
    assert "edge event 1 is not a monitor's" in err and "xid event 2 is not a monitor's" in err
    side = json.loads(out.with_suffix(".json").read_text())
    assert side["edges"] == [] and side["xid_events"] == [] and len(out.read_text().splitlines()) == 3


def test_an_output_through_a_symlink_or_to_a_device(tmp_path: Path) -> None:
    """A symlink is written through (it stays a link; its file gets the bytes), ``/dev/null`` in place (a device
    cannot be renamed over), and nothing else appears in the folder."""
    from gpumatch.outfiles import write_file

    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real)
    write_file(link, "new", force=True)
    assert link.is_symlink() and real.read_text() == "new"
    write_file(Path("/dev/null"), "x" * 100_000, force=True)
    assert Path("/dev/null").is_char_device() and sorted(p.name for p in tmp_path.iterdir()) == ["link.json",
                                                                                                "real.json"]
