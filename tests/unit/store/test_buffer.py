"""SampleBuffer: batches commits, bounds what a crash can lose, rejects bad samples at add()."""

from __future__ import annotations

import pytest

from gpumatch.errors import StoreError
from gpumatch.store import Store


def test_commits_every_max_rows_and_on_exit(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    with store.sample_buffer(run_id, flush_interval_s=3600, max_rows=3) as buf:
        for i in range(5):
            buf.add({"t_s": float(i), "power_instant_w": 100.0})
            assert len(store.samples(run_id)) == (3 if i >= 2 else 0)
    assert [s["t_s"] for s in store.samples(run_id)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert buf.rows_written == 5 and buf.flush() == 0


def test_commits_when_the_interval_has_passed(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    buf = store.sample_buffer(run_id, flush_interval_s=0.0, max_rows=10**6)
    buf.add({"t_s": 0.0})
    assert len(store.samples(run_id)) == 1


def test_bad_sample_fails_at_add_and_does_not_poison_the_batch(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    with store.sample_buffer(run_id, flush_interval_s=3600) as buf:
        buf.add({"t_s": 0.0})
        with pytest.raises(StoreError, match="sm_clock_mhz"):
            buf.add({"t_s": 1.0, "sm_clock_mhz": "fast"})  # type: ignore[dict-item]
        buf.add({"t_s": 2.0})
    assert [s["t_s"] for s in store.samples(run_id)] == [0.0, 2.0]


def test_the_buffer_needs_no_store_only_a_write_callable() -> None:
    from gpumatch.store.buffer import SampleBuffer

    batches: list[int] = []
    fail = [True]

    def write(rows: object) -> None:
        if fail[0]:
            raise StoreError("disk full")
        batches.append(len(rows))  # type: ignore[arg-type]

    buf = SampleBuffer(write, run_id=7, flush_interval_s=3600, max_rows=10**6)
    buf.extend([{"t_s": 0.0}, {"t_s": 1.0}])
    with pytest.raises(StoreError):
        buf.flush()
    assert buf.pending == 2 and buf.rows_written == 0  # a failed write keeps its rows queued, in order
    fail[0] = False
    buf.add({"t_s": 2.0})
    assert buf.flush() == 3 and batches == [3] and buf.rows_written == 3


def test_extend_is_all_or_none_at_validation(store: Store) -> None:
    run_id = store.begin_run("monitor", "x", {}, {})
    buf = store.sample_buffer(run_id, flush_interval_s=3600)
    with pytest.raises(StoreError, match="sample 1"):
        buf.extend([{"t_s": 0.0}, {"t_s": 1.0, "gpu_temp_c": "hot"}])  # type: ignore[list-item]
    assert buf.pending == 0 and buf.flush() == 0
