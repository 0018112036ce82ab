"""A stored row whose JSON is damaged (issue 25, "Data"): ``runs check`` names the run and the row and exits 2;
every reader (``runs list|show|export``, ``bench show``, the library) reads the row without the damaged field,
says so in one warning line naming the run and the row, and goes on."""

from __future__ import annotations

import json
import sqlite3
import warnings
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import DataWarning
from gpumatch.store import open_store


def _plant(url: str) -> tuple[int, int]:
    """A store with a sound run 1 and a run 2 holding one result with truncated ``extra_json``, one whose config
    is JSON but not an object, and an event whose data is not JSON; (run id, id of the truncated row)."""
    with open_store(url) as st:
        good = st.begin_run("bench", "good", {"m": 1}, {"case": "gemm"})
        st.add_result(good, "gemm_flops_per_s", 1e14, "flop/s", config={"case": "gemm"}, extra={"n": 3})
        st.end_run(good, "completed")
        bad = st.begin_run("bench", "damaged", {"m": 1}, {"case": "gemm"})
        st.add_result(bad, "gemm_flops_per_s", 2e14, "flop/s", config={"case": "gemm"}, extra={"n": 3})
        rows = [(bad, "gemm_flops_per_s", 3e14, "flop/s", '{"case":"gemm"}', '{"n": 3', "2026-12-06T00:00:00"),
                (bad, "hbm_bytes_per_s", 4e12, "B/s", "[1, 2]", None, "2026-12-06T00:00:00")]
        sql = ("INSERT INTO results (run_id, metric, value, unit, config_json, extra_json, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?)")
        st._db.write("planting", lambda c: c.executemany(sql, rows))
        st._db.write("planting", lambda c: c.execute(
            "INSERT INTO events (run_id, t_s, gpu_index, kind, data_json, created_at) VALUES (?, 0, NULL, 'case', "
            "'{oops', '2026-12-06T00:00:00')", (bad,)))
        st.end_run(bad, "completed")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            broken = max(r.result_id for r in st.results(bad) if r.metric == "gemm_flops_per_s")
    return bad, broken


def test_library_readers_warn_and_go_on(store_url: str) -> None:
    bad, row = _plant(store_url)
    with open_store(store_url, mode="read") as st, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        results = st.results(bad)
        events = st.events(bad)
        report = st.verify()
    assert [r.extra for r in results] == [{"n": 3}, None, None]
    assert results[2].config is None
    assert events[0].data == {}
    lines = [str(w.message) for w in seen if issubclass(w.category, DataWarning)]
    assert any(f"run {bad}: results row {row} extra_json is damaged" in ln for ln in lines), lines
    assert any(f"run {bad}: events row" in ln for ln in lines), lines
    assert report["integrity"] == "ok" and report["damaged_row_count"] == 3
    assert f"run {bad}: results row {row} extra_json" in report["damaged_rows"]
    assert any(r.startswith(f"run {bad}: events row") for r in report["damaged_rows"])


def test_runs_check_finds_it_and_readers_do_not_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    bad, row = _plant(str(store))
    capsys.readouterr()
    assert main(["runs", "check", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and f"run {bad}: results row {row} extra_json" in err
    assert main(["runs", "list", "--store", str(store), "--format", "json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [bad, bad - 1]
    assert main(["runs", "show", str(bad), "--store", str(store), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert len(json.loads(out.out)["results"]) == 3
    assert f"gpumatch: warning: run {bad}: results row {row} extra_json is damaged" in out.err
    assert main(["runs", "show", str(bad), "--store", str(store)]) == 0
    assert main(["runs", "export", str(bad), "--format", "csv", "-o", str(tmp_path / "r.csv"),
                 "--store", str(store)]) == 0
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 4
    assert "warning" in capsys.readouterr().err
    assert main(["bench", "show", str(bad), "--store", str(store), "--format", "json"]) == 0
    assert f"run {bad}: results row {row}" in capsys.readouterr().err
    conn = sqlite3.connect(store)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # the file itself is sound
    conn.close()


def test_a_run_row_with_damaged_json_is_listed_and_shown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    bad, _ = _plant(str(store))
    conn = sqlite3.connect(store)
    with conn:
        conn.execute("INSERT INTO runs (kind, name, manifest_sha256, config_json, status, started_at, started_unix_s, "
                     "ended_at, summary_json, writer_json, run_uuid) SELECT kind, 'raw', manifest_sha256, '{cut', "
                     "'completed', started_at, started_unix_s, ended_at, '[]', writer_json, 'u-raw' FROM runs "
                     "WHERE run_id = ?", (bad,))
    conn.close()
    capsys.readouterr()
    assert main(["runs", "list", "--store", str(store), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert len(json.loads(out.out)) == 3
    assert f"run {bad + 1}: config_json is damaged" in out.err and f"run {bad + 1}: summary_json" in out.err
    assert main(["runs", "show", str(bad + 1), "--store", str(store), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["config"] == {}
    assert main(["runs", "check", "--store", str(store), "--format", "json"]) == 2
    rows = json.loads(capsys.readouterr().out)["damaged_rows"]
    assert f"runs row {bad + 1} config_json" in rows and f"runs row {bad + 1} summary_json" in rows


def test_a_sound_store_checks_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    with open_store(store) as st:
        rid = st.begin_run("bench", "x", {"m": 1}, {})
        st.add_samples(rid, [{"t_s": 0.0, "custom": 1}])
        st.end_run(rid, "completed")
    assert main(["runs", "check", "--store", str(store), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["damaged_rows"] == [] and report["damaged_row_count"] == 0
