"""The recording spine used as a library: open a run, stream samples, add results, failures and events, close
it completed / failed / interrupted; an unwritable store leaves a fallback file and loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.errors import GpumatchError, StoreError
from gpumatch.record import Recording
from gpumatch.store import Store, open_store
from gpumatch.telemetry.types import Sample

MANIFEST = {"gpus": [{"index": 0, "name": "NVIDIA H200"}], "software": {"torch": "2.11.0"}}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "results.sqlite"


@pytest.fixture
def garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store file that is not a database (the writer refuses it); the working folder is tmp_path."""
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"not a database\n" * 200)
    monkeypatch.chdir(tmp_path)
    return bad


def _record(rec: Recording) -> None:
    rec.add_samples([Sample(t_s=0.0, gpu_index=0, power_instant_w=412.0), {"t_s": 0.1, "power_instant_w": 415.0}])
    rec.add_result("gemm_flops_per_s", 6.1e14, "flop/s", config={"m": 8192}, extra={"n": 30})
    rec.add_failure({"batch": 64}, "OutOfMemoryError", "CUDA out of memory", "...tail of the log")
    rec.add_event(12.5, "xid", {"xid": 79}, gpu_index=0)


def _run(path: Path) -> dict[str, object]:
    with open_store(path, mode="read") as st:
        (run,) = st.runs()
        return st.export_run(run.run_id, samples=True)


def test_a_run_recorded_through_the_spine_is_in_the_store(store_path: Path) -> None:
    with Recording("bench", "gemm-bf16", MANIFEST, {"m": 8192}, store_path=store_path) as rec:
        _record(rec)
    out = rec.outcome
    assert out is not None and out.saved and out.status == "completed" and out.error is None and not out.fallback
    assert out.store_path == store_path and out.run_id is not None
    data = _run(store_path)
    assert data["run"]["status"] == "completed" and data["run"]["kind"] == "bench"  # type: ignore[index]
    assert [s["power_instant_w"] for s in data["samples"]] == [412.0, 415.0]  # type: ignore[attr-defined]
    assert [r["metric"] for r in data["results"]] == ["gemm_flops_per_s"]  # type: ignore[attr-defined]
    assert [f["error_class"] for f in data["failures"]] == ["OutOfMemoryError"]  # type: ignore[attr-defined]
    with open_store(store_path, mode="read") as st:
        assert [(e.kind, e.data) for e in st.events(out.run_id)] == [("xid", {"xid": 79})]


@pytest.mark.parametrize("status", ["completed", "failed", "interrupted"])
def test_close_with_a_status_and_a_summary_once(store_path: Path, status: str) -> None:
    rec = Recording("bench", "x", MANIFEST, {}, store_path=store_path)
    rec.add_result("t_s", 1.5, "s")
    first = rec.close(status, {"note": "by hand"})
    assert rec.close("completed") is first  # once: a second close changes nothing
    data = _run(store_path)
    assert data["run"]["status"] == status and data["run"]["summary"] == {"note": "by hand"}  # type: ignore[index]


def test_an_exception_in_the_block_closes_the_run_failed_and_keeps_what_was_added(store_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), Recording("bench", "x", MANIFEST, {}, store_path=store_path) as rec:
        _record(rec)
        _ = 1 / 0
    data = _run(store_path)
    run = data["run"]
    assert run["status"] == "failed" and "ZeroDivisionError" in run["summary"]["reason"]  # type: ignore[index]
    assert len(data["samples"]) == 2 and len(data["results"]) == 1 and len(data["failures"]) == 1  # type: ignore[arg-type]


def test_ctrl_c_in_the_block_closes_the_run_interrupted(store_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), Recording("bench", "x", MANIFEST, {}, store_path=store_path) as rec:
        rec.add_samples([{"t_s": 0.0}])
        raise KeyboardInterrupt
    data = _run(store_path)
    assert data["run"]["status"] == "interrupted" and len(data["samples"]) == 1  # type: ignore[index,arg-type]


def test_samples_are_batched_until_due_and_committed_at_close(store_path: Path) -> None:
    rec = Recording("bench", "x", MANIFEST, {}, store_path=store_path, flush_interval_s=3600)
    rec.add_samples([{"t_s": float(i)} for i in range(10)])
    with open_store(store_path, mode="read") as st:
        assert st.runs()[0].n_samples == 0  # queued, not yet committed
    rec.close()
    assert len(_run(store_path)["samples"]) == 10  # type: ignore[arg-type]


def test_an_unwritable_store_leaves_a_fallback_record_with_everything(garbage: Path, tmp_path: Path) -> None:
    before = garbage.read_bytes()
    said: list[GpumatchError] = []
    with Recording("bench", "gemm-bf16", MANIFEST, {"m": 8192}, store_path=garbage, on_store_error=said.append) as rec:
        _record(rec)
        rec.add_result("tflops", 612.0, "flop/s")
    out = rec.outcome
    assert out is not None and not out.saved and isinstance(out.error, StoreError) and len(said) == 1
    (path,) = out.fallback
    assert path.parent == tmp_path and path.name.startswith("gpumatch-bench-") and path.suffix == ".json"
    record = json.loads(path.read_text())
    assert (record["kind"], record["name"], record["status"], record["manifest"]) == (
        "bench", "gemm-bf16", "completed", MANIFEST)
    assert [s["power_instant_w"] for s in record["samples"]] == [412.0, 415.0]
    assert [r["metric"] for r in record["results"]] == ["gemm_flops_per_s", "tflops"]
    assert record["failures"][0]["error_class"] == "OutOfMemoryError" and record["events"][0]["data"] == {"xid": 79}
    assert garbage.read_bytes() == before  # never written to


def test_a_store_failing_midway_keeps_its_part_and_the_file_holds_the_rest(
    store_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rec = Recording("bench", "x", MANIFEST, {}, store_path=store_path, flush_interval_s=0.0)
    rec.add_samples([{"t_s": 0.0}, {"t_s": 1.0}])
    rec.add_result("a", 1.0, "s")

    def disk_full(*args: object, **kwargs: object) -> int:
        raise StoreError("results store X: disk full while adding result 'b'")

    monkeypatch.setattr(Store, "add_result", disk_full)
    rec.add_result("b", 2.0, "s")
    rec.add_samples([{"t_s": 2.0}])
    out = rec.close("completed")
    assert not out.saved and out.error is not None and "disk full" in str(out.error)
    data = _run(store_path)  # the store kept what it took, and the run is closed
    assert data["run"]["status"] == "interrupted" and len(data["samples"]) == 2  # type: ignore[index,arg-type]
    (path,) = out.fallback
    record = json.loads(path.read_text())
    assert [r["metric"] for r in record["results"]] == ["b"] and [s["t_s"] for s in record["samples"]] == [2.0]
    assert record["store_run_id"] == out.run_id


def test_with_a_trace_the_fallback_is_a_replayable_trace(garbage: Path, make_trace) -> None:
    from gpumatch.telemetry.trace import read_trace

    trace = make_trace("gemm", 2.0)
    rec = Recording("monitor", "cmd", MANIFEST, {}, store_path=garbage, keep_samples=False)
    rec.add_samples(trace.samples)
    out = rec.close("completed", trace=trace)
    csv, sidecar = out.fallback
    assert csv.name.startswith("gpumatch-monitor-") and csv.suffix == ".csv" and sidecar == csv.with_suffix(".json")
    assert len(read_trace(csv).samples) == len(trace.samples)


def test_files_that_already_hold_the_run_are_the_fallback(garbage: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    rec = Recording("monitor", "cmd", MANIFEST, {}, store_path=garbage)
    rec.add_samples([{"t_s": 0.0}])
    assert rec.close("completed", kept=[mine]).fallback == (mine,)
    assert not list(tmp_path.glob("gpumatch-*"))


def test_without_the_store_nothing_is_written(garbage: Path, tmp_path: Path) -> None:
    with Recording("bench", "x", MANIFEST, {}, use_store=False) as rec:
        _record(rec)
    out = rec.outcome
    assert out is not None and not out.saved and out.error is None and out.run_id is None and not out.fallback
    assert not list(tmp_path.glob("gpumatch-*"))


def test_an_exception_with_an_unwritable_store_still_leaves_everything_in_the_file(garbage: Path) -> None:
    rec = Recording("bench", "x", MANIFEST, {}, store_path=garbage)
    with pytest.raises(RuntimeError, match="sweep broke"), rec:
        _record(rec)
        raise RuntimeError("sweep broke")
    out = rec.outcome
    assert out is not None and out.status == "failed"
    record = json.loads(out.fallback[0].read_text())
    assert record["status"] == "failed" and record["summary"] == {"reason": "RuntimeError: sweep broke"}
    assert len(record["samples"]) == 2 and len(record["results"]) == 1 and len(record["events"]) == 1
