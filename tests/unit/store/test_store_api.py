"""Round trips through the public store API: runs, results, samples, failures, calibrations, events."""

from __future__ import annotations

import hashlib
import math
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gpumatch.errors import StoreError
from gpumatch.store import SAMPLE_FIELDS, Store, manifest_sha256, open_store


def test_run_round_trip(manifest: dict[str, Any], store: Store) -> None:
    run_id = store.begin_run("bench", "gemm-bf16", manifest, {"m": 8192, "dtype": "bf16"})
    rid = store.add_result(run_id, "gemm_flops_per_s", 6.1e14, "flop/s", config={"m": 8192}, extra={"n": 30})
    store.end_run(run_id, "completed", summary={"verdict": "valid-power-capped"})
    run = store.run(run_id)
    assert (run.kind, run.name, run.status, run.stored_status) == ("bench", "gemm-bf16", "completed", "completed")
    assert run.manifest == manifest and run.config == {"m": 8192, "dtype": "bf16"}
    assert run.summary == {"verdict": "valid-power-capped"}
    assert run.ended_at is not None and run.duration_s is not None and run.duration_s >= 0
    assert (run.n_results, run.n_samples, run.n_failures) == (1, 0, 0)
    [res] = store.results(run_id)
    assert (res.result_id, res.metric, res.value, res.unit) == (rid, "gemm_flops_per_s", 6.1e14, "flop/s")
    assert res.config == {"m": 8192} and res.extra == {"n": 30}
    assert run.to_dict()["manifest_sha256"] == manifest_sha256(manifest)


def test_records_are_frozen(store: Store) -> None:
    run = store.run(store.begin_run("bench", "x", {}, {}))
    with pytest.raises(AttributeError):
        run.status = "completed"  # type: ignore[misc]


def test_runs_newest_first_filtered_by_kind_and_limited(store: Store) -> None:
    ids = [store.begin_run(kind, f"r{i}", {}, {}) for i, kind in enumerate(["bench", "monitor", "bench"])]
    assert [r.run_id for r in store.runs()] == ids[::-1]
    assert [r.run_id for r in store.runs(kind="bench")] == [ids[2], ids[0]]
    assert [r.run_id for r in store.runs(limit=1)] == [ids[2]]


def test_samples_round_trip_with_none_and_extra_keys(manifest: dict[str, Any], store: Store) -> None:
    run_id = store.begin_run("monitor", "sleep 1", manifest, {})
    full = {k: 1.5 for k in SAMPLE_FIELDS} | {"gpu_index": 1, "clock_event_reasons": 4, "memory_used_bytes": 2**40}
    sparse = {"t_s": 0.05, "power_instant_w": 412.0, "gpm_sm_active": None, "energy_mj": 12345}
    assert store.add_samples(run_id, [full, sparse]) == 2
    got = store.samples(run_id)
    assert got[0] == full
    assert got[1]["gpu_index"] == 0 and got[1]["power_instant_w"] == 412.0 and got[1]["sm_clock_mhz"] is None
    assert got[1]["energy_mj"] == 12345  # unknown keys kept in extra_json
    assert store.run(run_id).n_samples == 2


def test_non_finite_sample_values_become_none(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    store.add_samples(run_id, [{"t_s": 0.0, "power_avg_w": math.nan, "gpu_temp_c": math.inf}])
    [s] = store.samples(run_id)
    assert s["power_avg_w"] is None and s["gpu_temp_c"] is None


@pytest.mark.parametrize(
    ("sample", "words"),
    [
        ({"power_instant_w": 1.0}, "t_s"),
        ({"t_s": math.nan}, "t_s"),
        ({"t_s": 0.0, "power_instant_w": "412 W"}, "power_instant_w"),
        ({"t_s": 0.0, "gpu_index": 0.5}, "integer"),
        ({"t_s": 0.0, "clock_event_reasons": 2**64}, "64-bit"),
        ({"t_s": 0.0, "sm_clock_mhz": True}, "sm_clock_mhz"),
        ({"t_s": 0.0, "extra": object()}, "cannot be stored"),
    ],
)
def test_bad_samples_are_refused_whole(store: Store, sample: dict[str, object], words: str) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    with pytest.raises(StoreError, match=words):
        store.add_samples(run_id, [{"t_s": 1.0}, sample])  # type: ignore[list-item]
    assert store.samples(run_id) == []  # the good first sample was not stored either


def test_one_mapping_instead_of_a_list_is_refused(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    with pytest.raises(StoreError, match="sequence"):
        store.add_samples(run_id, {"t_s": 0.0})  # type: ignore[arg-type]


def test_results_must_be_finite_numbers(store: Store) -> None:
    run_id = store.begin_run("bench", "x", {}, {})
    for bad in (math.nan, math.inf, "1.0", True):
        with pytest.raises(StoreError, match="finite number"):
            store.add_result(run_id, "m", bad, "s")  # type: ignore[arg-type]


def test_unknown_run_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        store.add_result(999, "m", 1.0, "s")
    with pytest.raises(StoreError, match="no run 999"):
        store.run(999)
    with pytest.raises(StoreError, match="no run 999"):
        store.end_run(999, "completed")


def test_end_run_once_and_with_a_valid_status(store: Store) -> None:
    run_id = store.begin_run("bench", "x", {}, {})
    with pytest.raises(StoreError, match="not one of"):
        store.end_run(run_id, "done")
    store.end_run(run_id, "failed", {"error": "OOM"})
    with pytest.raises(StoreError, match="already closed"):
        store.end_run(run_id, "completed")
    assert store.run(run_id).status == "failed"


def test_closed_run_takes_no_more_measurements(store: Store) -> None:
    run_id = store.begin_run("bench", "x", {}, {})
    store.end_run(run_id, "completed")
    with pytest.raises(StoreError, match="run is closed"):
        store.add_samples(run_id, [{"t_s": 0.0}])
    with pytest.raises(StoreError, match="run is closed"):
        store.add_result(run_id, "m", 1.0, "s")
    # failures are not measurements: a sweep may record one after closing its run
    store.add_failure(run_id, {"batch": 64}, "OutOfMemoryError", "CUDA out of memory")


def test_manifests_deduplicated_by_canonical_hash(manifest: dict[str, Any], store: Store, store_path: Path) -> None:
    reordered = {"software": {"torch": "2.11.0"}, "gpus": manifest["gpus"], "kit_commit": "0e38e36"}
    a = store.begin_run("bench", "a", manifest, {})
    b = store.begin_run("bench", "b", reordered, {})
    c = store.begin_run("bench", "c", manifest | {"kit_commit": "other"}, {})
    sha_a, sha_b, sha_c = (store.run(i).manifest_sha256 for i in (a, b, c))
    assert sha_a == sha_b != sha_c
    import sqlite3

    with sqlite3.connect(store_path) as raw:
        assert raw.execute("SELECT COUNT(*) FROM manifests").fetchone()[0] == 2
    assert store.manifest(sha_a) == manifest


def test_manifest_hash_is_sha256_of_canonical_json() -> None:
    # canonical form: sorted keys, no spaces, UTF-8, non-finite floats as null
    expected = hashlib.sha256('{"a":[1,null],"b":"é","c":"/x"}'.encode()).hexdigest()
    assert manifest_sha256({"c": Path("/x"), "b": "é", "a": (1, math.nan)}) == expected


def test_unserialisable_manifest_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match=r"manifest\.gpu: object cannot be stored"):
        store.begin_run("bench", "x", {"gpu": object()}, {})
    with pytest.raises(StoreError, match="key 1 is not a string"):
        store.begin_run("bench", "x", {1: "a"}, {})  # type: ignore[dict-item]
    with pytest.raises(StoreError, match="run kind"):
        store.begin_run("", "x", {}, {})


def test_failures_are_first_class_rows_with_environment(manifest: dict[str, Any], store: Store) -> None:
    run_id = store.begin_run("bench", "sweep", manifest, {})
    f1 = store.add_failure(run_id, {"gpu": "L40S", "batch": 64}, "OutOfMemoryError", "CUDA OOM", "line\n" * 3)
    f2 = store.add_failure(None, {"engine": "vllm"}, "TimeoutError", "server did not start", manifest={"host": "h"})
    f3 = store.add_failure(None, {}, "SloUnreachable", "no rate meets TPOT < 50 ms")
    rows = {f.failure_id: f for f in store.failures()}
    assert rows[f1].run_id == run_id and rows[f1].manifest == manifest and rows[f1].log_excerpt == "line\n" * 3
    assert rows[f1].config == {"gpu": "L40S", "batch": 64} and rows[f1].error_class == "OutOfMemoryError"
    assert rows[f2].run_id is None and rows[f2].manifest == {"host": "h"}
    assert rows[f3].manifest is None and rows[f3].manifest_sha256 is None
    assert [f.failure_id for f in store.failures(run_id)] == [f1]
    assert store.run(run_id).n_failures == 1


def test_long_log_excerpt_keeps_its_end(store: Store) -> None:
    from gpumatch.store import MAX_LOG_EXCERPT_CHARS

    log = "x" * (MAX_LOG_EXCERPT_CHARS + 100) + "RuntimeError: the end"
    store.add_failure(None, {}, "RuntimeError", "boom", log)
    [f] = store.failures()
    assert f.log_excerpt.endswith("RuntimeError: the end") and f.log_excerpt.startswith("[... first 121 characters")


def test_calibrations_latest_and_runs_used(store: Store) -> None:
    r1, r2 = store.begin_run("bench", "a", {}, {}), store.begin_run("bench", "b", {}, {})
    assert store.latest_calibration("gemm_efficiency") is None
    c1 = store.add_calibration("gemm_efficiency", {"bf16": 0.71}, {"card": "H200", "run_ids": [r1]})
    c2 = store.add_calibration("gemm_efficiency", {"bf16": 0.74}, {"card": "H200"}, run_ids=[r2, r1, r2])
    store.add_calibration("hbm_efficiency", {"read": 0.9}, {"card": "H200"})
    latest = store.latest_calibration("gemm_efficiency")
    assert latest is not None and latest.calibration_id == c2
    assert latest.values == {"bf16": 0.74} and latest.run_ids == (r1, r2)
    assert [c.calibration_id for c in store.calibrations("gemm_efficiency")] == [c2, c1]
    assert store.calibrations("gemm_efficiency")[1].run_ids == (r1,)
    assert len(store.calibrations()) == 3
    with pytest.raises(StoreError, match="does not exist"):
        store.add_calibration("x", {}, {}, run_ids=[12345])


def test_events(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    store.add_event(run_id, 1.25, "xid", {"xid": 79, "text": "GPU has fallen off the bus"}, gpu_index=0)
    [e] = store.events(run_id)
    assert (e.t_s, e.kind, e.gpu_index, e.data["xid"]) == (1.25, "xid", 0, 79)


def test_close_marks_open_runs_interrupted_and_is_idempotent(store_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), open_store(store_path) as s:
        run_id = s.begin_run("monitor", "x", {}, {})
        s.add_samples(run_id, [{"t_s": 0.0}])
        raise KeyboardInterrupt
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.runs()
    with open_store(store_path) as s2:
        run = s2.run(run_id)
        assert (run.status, run.stored_status, run.summary, run.n_samples) == (
            "interrupted", "interrupted", {"reason": "KeyboardInterrupt"}, 1)


def test_one_store_shared_by_threads(store: Store) -> None:
    run_id = store.begin_run("monitor", "threads", {}, {})

    def sampler(gpu: int) -> None:
        for i in range(40):
            store.add_samples(run_id, [{"t_s": i * 0.05, "gpu_index": gpu}])

    threads = [threading.Thread(target=sampler, args=(g,)) for g in range(3)]
    for t in threads:
        t.start()
    for i in range(20):
        store.add_result(run_id, "step_s", 0.01 * i, "s")
    for t in threads:
        t.join()
    samples = store.samples(run_id)
    assert len(samples) == 120 and len(store.results(run_id)) == 20
    for g in range(3):
        assert [s["t_s"] for s in samples if s["gpu_index"] == g] == [i * 0.05 for i in range(40)]


def test_default_path_comes_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store() as s:
        assert s.path == tmp_path / "gpumatch-home" / "results.sqlite" and s.journal_mode == "wal"
    monkeypatch.setenv("GPUMATCH_STORE", f"sqlite:///{tmp_path}/elsewhere.db")
    with open_store() as s:
        assert s.path == tmp_path / "elsewhere.db"
    assert (tmp_path / "elsewhere.db").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_store_is_not_used_across_fork(store: Store) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    q = ctx.Queue()

    def child() -> None:
        try:
            store.runs()
            q.put("no error")
        except StoreError as e:
            q.put(str(e))

    p = ctx.Process(target=child)
    p.start()
    p.join(timeout=20)
    assert "another process" in q.get(timeout=5)
    assert store.runs() == []  # the parent's connection still works
