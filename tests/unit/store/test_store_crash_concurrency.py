"""A writer killed with SIGKILL mid-write, and two processes writing at once, leave a consistent store."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_workers import N_SAMPLES, concurrent_writer  # importable by spawned children; no pytest import

import gpumatch
from gpumatch.store import open_store

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

_SRC = str(Path(gpumatch.__file__).resolve().parents[1])

# Appends batches of BATCH samples, one transaction each, then one result per batch; prints after commits.
_LOOP_WRITER = textwrap.dedent(
    """
    import sys
    from gpumatch.store import open_store
    path, batch = sys.argv[1], int(sys.argv[2])
    store = open_store(path)
    run_id = store.begin_run("bench", "killed-mid-loop", {"host": "test"}, {"batch": batch})
    print("run", run_id, flush=True)
    n = 0
    while True:
        store.add_samples(run_id, [{"t_s": float(n + k), "power_instant_w": 100.0 + k} for k in range(batch)])
        n += batch
        store.add_result(run_id, "samples_written", float(n), "1")
        print("committed", n, flush=True)
    """
)

# Opens a write transaction, inserts rows, says so, and waits to be killed inside it.
_TX_WRITER = textwrap.dedent(
    """
    import sys, time
    from gpumatch.store import open_store
    from gpumatch.store.samples import INSERT_SQL, sample_rows
    store = open_store(sys.argv[1])
    run_id = store.begin_run("bench", "killed-in-transaction", {}, {})
    store.add_samples(run_id, [{"t_s": 0.0}])
    def tx(c):
        c.executemany(INSERT_SQL, sample_rows(run_id, [{"t_s": float(i)} for i in range(1, 5001)]))
        print("inside", run_id, flush=True)
        time.sleep(60)
    store._db.write("test", tx)
    """
)


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    env = os.environ | {"PYTHONPATH": _SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True, env=env)


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def test_writer_killed_mid_loop_keeps_committed_rows(store_path: Path) -> None:
    batch = 500
    proc = _spawn(_LOOP_WRITER, str(store_path), str(batch))
    assert proc.stdout is not None
    run_id = int(proc.stdout.readline().split()[1])
    seen = 0
    while seen < 4 * batch:
        seen = int(proc.stdout.readline().split()[1])
    _kill(proc)  # the writer is busy in its next batch or result now

    with open_store(store_path) as s:
        assert s.integrity_check() == "ok"
        run = s.run(run_id)
        assert (run.status, run.stored_status, run.ended_at) == ("interrupted", "running", None)
        samples = s.samples(run_id)
        n = len(samples)
        assert n >= seen and n % batch == 0  # everything reported committed is there; no half batch
        assert [x["t_s"] for x in samples] == [float(i) for i in range(n)]
        assert len(s.results(run_id)) in (n // batch - 1, n // batch)
        assert s.close_stale_runs() == [run_id]
        assert s.run(run_id).stored_status == "interrupted"
        assert s.close_stale_runs() == []
        later = s.begin_run("bench", "after the crash", {}, {})  # the store stays writable
        s.end_run(later, "completed")


def test_writer_killed_inside_a_transaction_loses_only_that_transaction(store_path: Path) -> None:
    proc = _spawn(_TX_WRITER, str(store_path))
    assert proc.stdout is not None
    run_id = int(proc.stdout.readline().split()[1])
    _kill(proc)
    with open_store(store_path, busy_timeout_s=5) as s:  # the dead writer's lock is gone with it
        assert s.integrity_check() == "ok"
        assert [x["t_s"] for x in s.samples(run_id)] == [0.0]
        assert s.run(run_id).status == "interrupted"
        s.add_result(run_id, "m", 1.0, "s")  # writable at once


def test_two_processes_write_at_once(store_path: Path) -> None:
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=concurrent_writer, args=(str(store_path), w, start, out)) for w in (0, 1)]
    for p in procs:
        p.start()
    reports = sorted(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert [r[4] for r in reports] == [None, None], reports  # no error surfaced in either writer
    assert max(r[2] for r in reports) < min(r[3] for r in reports), "the writers did not overlap in time"

    with open_store(store_path) as s:
        assert s.integrity_check() == "ok"
        assert [m.name for m in s.migrations()] == [m[0] for m in gpumatch.store.MIGRATIONS]  # migrated once
        for who, run_id, *_ in reports:
            run = s.run(run_id)
            assert (run.status, run.name, run.summary) == ("completed", f"writer-{who}", {"who": who})
            samples = s.samples(run_id)
            assert [x["t_s"] for x in samples] == [float(i) for i in range(N_SAMPLES)]
            assert {x["gpu_index"] for x in samples} == {who}
            assert [r.value for r in s.results(run_id)] == [float(i) for i in range(0, N_SAMPLES, 10)]
            assert [f.config for f in s.failures(run_id)] == [{"who": who}]
            cal = s.latest_calibration(f"cal-{who}")
            assert cal is not None and cal.run_ids == (run_id,)
        assert len(s.runs()) == 2
    with sqlite3.connect(store_path) as raw:  # the two runs' rows interleave: the writes really alternated
        spans = raw.execute("SELECT MIN(sample_id), MAX(sample_id) FROM samples GROUP BY run_id").fetchall()
    assert len(spans) == 2 and spans[0][1] > spans[1][0] and spans[1][1] > spans[0][0], spans
