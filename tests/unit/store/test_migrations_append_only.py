"""The append-only rules hold in SQL itself (triggers), not only in the Python API."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpumatch.store import open_store


@pytest.fixture
def filled(store_path: Path) -> Iterator[tuple[sqlite3.Connection, int, int]]:
    """A store with a closed run and an open run (each with rows), and a raw connection to it."""
    with open_store(store_path) as s:
        closed = s.begin_run("bench", "closed", {"m": 1}, {})
        s.add_samples(closed, [{"t_s": 0.0, "power_instant_w": 300.0}])
        s.add_result(closed, "gemm_flops_per_s", 5e14, "flop/s")
        s.add_event(closed, 0.5, "xid", {"xid": 13})
        s.add_failure(closed, {"batch": 8}, "OutOfMemoryError", "OOM")
        s.add_calibration("gemm", {"bf16": 0.7}, {}, run_ids=[closed])
        s.end_run(closed, "completed", {"ok": True})
        running = s.begin_run("bench", "running", {"m": 1}, {})
        s.add_result(running, "x", 1.0, "s")
        s._open_runs.clear()  # leave it running on close
    raw = sqlite3.connect(store_path, isolation_level=None)
    raw.execute("PRAGMA foreign_keys = ON")
    yield raw, closed, running
    raw.close()


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE results SET value = 1e15",
        "DELETE FROM results",
        "UPDATE samples SET power_instant_w = 1",
        "DELETE FROM samples",
        "UPDATE failures SET message = 'fine'",
        "DELETE FROM failures",
        "UPDATE calibrations SET values_json = '{}'",
        "DELETE FROM calibration_runs",
        "UPDATE manifests SET manifest_json = '{}'",
        "DELETE FROM manifests",
        "UPDATE events SET kind = 'nothing'",
        "DELETE FROM runs",
    ],
)
def test_measured_rows_cannot_change(filled: tuple[sqlite3.Connection, int, int], sql: str) -> None:
    raw, _, _ = filled
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(sql)


def test_closed_run_cannot_be_reopened_or_edited(filled: tuple[sqlite3.Connection, int, int]) -> None:
    raw, closed, _ = filled
    for sql in (
        "UPDATE runs SET status = 'running' WHERE run_id = ?",
        "UPDATE runs SET status = 'failed' WHERE run_id = ?",
        "UPDATE runs SET summary_json = '{}' WHERE run_id = ?",
        "UPDATE runs SET name = 'renamed' WHERE run_id = ?",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="closed once"):
            raw.execute(sql, (closed,))


def test_running_run_can_only_be_closed(filled: tuple[sqlite3.Connection, int, int]) -> None:
    raw, _, running = filled
    for sql in (
        "UPDATE runs SET name = 'renamed' WHERE run_id = ?",
        "UPDATE runs SET config_json = '{\"x\":1}', status = 'completed' WHERE run_id = ?",
        "UPDATE runs SET manifest_sha256 = manifest_sha256 || '' , started_at = 'x' WHERE run_id = ?",
        "UPDATE runs SET ended_at = 'x' WHERE run_id = ?",  # still 'running': not a close
    ):
        with pytest.raises(sqlite3.IntegrityError, match="closed once"):
            raw.execute(sql, (running,))
    raw.execute("UPDATE runs SET status = 'failed', ended_at = 'now', summary_json = '{}' WHERE run_id = ?", (running,))
    assert raw.execute("SELECT status FROM runs WHERE run_id = ?", (running,)).fetchone()[0] == "failed"


def test_no_measurements_into_a_closed_run(filled: tuple[sqlite3.Connection, int, int]) -> None:
    raw, closed, running = filled
    with pytest.raises(sqlite3.IntegrityError, match="run is closed"):
        raw.execute("INSERT INTO samples (run_id, t_s, gpu_index) VALUES (?, 1.0, 0)", (closed,))
    with pytest.raises(sqlite3.IntegrityError, match="run is closed"):
        raw.execute(
            "INSERT INTO results (run_id, metric, value, unit, created_at) VALUES (?, 'm', 1, 's', 'now')", (closed,)
        )
    raw.execute("INSERT INTO samples (run_id, t_s, gpu_index) VALUES (?, 1.0, 0)", (running,))


def test_foreign_keys_and_checks_enforced(filled: tuple[sqlite3.Connection, int, int]) -> None:
    raw, _, _ = filled
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        raw.execute("INSERT INTO samples (run_id, t_s, gpu_index) VALUES (424242, 1.0, 0)")
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        raw.execute(
            "INSERT INTO runs (kind, name, manifest_sha256, config_json, status, started_at, started_unix_s, "
            "writer_json, run_uuid) SELECT 'b', 'n', manifest_sha256, '{}', 'paused', 'now', 0, '{}', 'u-1' "
            "FROM manifests"
        )
