"""``gpumatch monitor`` as one library call (replays: no GPU needed), recorded through the spine."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.record.monitor import monitor_results, run_monitor
from gpumatch.store import open_store
from gpumatch.telemetry.trace import write_trace


@pytest.fixture
def gemm_csv(tmp_path: Path, make_trace) -> Path:
    p = tmp_path / "gemm.csv"
    write_trace(make_trace("gemm", 10.0), p)
    return p


def test_a_replay_is_recorded_whole(gemm_csv: Path) -> None:
    run = run_monitor(None, replay=gemm_csv)
    rec = run.recording
    assert rec is not None and rec.saved and run.kind == "monitor-replay" and not run.written
    with open_store(rec.store_path, mode="read") as st:
        (stored,) = st.runs()
        assert (stored.run_id, stored.kind, stored.status, stored.n_samples) == (rec.run_id, "monitor-replay",
                                                                                 "completed", 101)
        metrics = [r.metric for r in st.results(stored.run_id)]
        assert metrics == [m for m, *_ in monitor_results(run.result)]
        assert {"energy_j", "power_avg_w", "sm_clock_hz", "power_cap_duty"} <= set(metrics)
        assert [e.kind for e in st.events(stored.run_id)].count("edge") >= 2


def test_no_store_and_an_output_file(gemm_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "again.csv"
    run = run_monitor(None, replay=gemm_csv, use_store=False, output=out)
    assert run.recording is None and run.written == (out, out.with_suffix(".json"))


def test_a_bad_store_keeps_the_replayed_file_as_the_copy(
    gemm_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"not a database\n" * 200)
    monkeypatch.setenv("GPUMATCH_STORE", str(bad))
    rec = run_monitor(None, replay=gemm_csv).recording
    assert rec is not None and not rec.saved and rec.error is not None and rec.fallback == (gemm_csv,)
