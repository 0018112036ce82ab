"""Both backends (SQLite file, PostgreSQL server): the same API and guarantees, version checks, copying runs
between stores (push/pull/merge, a push killed half-way), and 8 concurrent writer processes with one killed."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pg_workers import RUNS_PER_WRITER, SAMPLES_PER_RUN, writer

from gpumatch.errors import StoreError
from gpumatch.store import MIGRATIONS, open_store
from gpumatch.store.merge import copy_store
from gpumatch.store.pg_schema import PG_MIGRATIONS

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


def _fill(url: str, n: int, samples: int = 3) -> list[str]:
    uuids = []
    with open_store(url) as s:
        for k in range(n):
            rid = s.begin_run("bench", f"run-{k}", {"gpu": "H200", "k": k % 2}, {"k": k})
            s.add_samples(rid, [{"t_s": float(i), "power_instant_w": 400.0 + i, "x_extra": k} for i in range(samples)])
            s.add_result(rid, "gemm_flops_per_s", 1e14 * (k + 1), "flop/s", config={"m": k}, extra={"n": 3})
            s.add_event(rid, 0.5, "xid", {"xid": 79}, gpu_index=0)
            s.add_failure(rid, {"batch": 64}, "OutOfMemoryError", "CUDA out of memory", "log")
            s.end_run(rid, "completed", {"verdict": "ok"})
            uuids.append(s.run(rid).run_uuid)
    return uuids


def _content(url: str) -> dict[str, Any]:
    """Each run by global id: what a reader sees of it, without the per-store numbers."""
    out = {}
    with open_store(url, mode="read") as s:
        for r in s.runs(limit=10_000):
            d = s.export_run(r.run_id, samples=True)
            run = {k: v for k, v in d["run"].items() if k not in ("run_id",)}
            strip = ("result_id", "run_id", "failure_id", "event_id")
            rows = {k: [{f: v for f, v in x.items() if f not in strip} for x in d[k]]
                    for k in ("results", "failures", "events")}
            out[r.run_uuid] = {"run": run, **rows, "samples": d["samples"]}
    return out


def test_round_trip_and_append_only_on_both(store_url: str) -> None:
    uuids = _fill(store_url, 2)
    with open_store(store_url) as s:
        runs = s.runs()
        assert [r.name for r in runs] == ["run-1", "run-0"] and {r.run_uuid for r in runs} == set(uuids)
        assert runs[0].n_samples == 3 and runs[0].n_results == 1 and runs[0].n_failures == 1
        assert s.samples(runs[0].run_id)[2] == {**s.samples(runs[0].run_id)[2], "power_instant_w": 402.0,
                                                 "x_extra": 1}
        with pytest.raises(StoreError, match="already closed"):
            s.end_run(runs[0].run_id, "failed")
        with pytest.raises(StoreError, match="run is closed"):
            s.add_result(runs[0].run_id, "late", 1.0, "s")
        assert s.verify() == {"integrity": "ok", "manifests": 2, "manifest_mismatches": [],
                              "damaged_rows": [], "damaged_row_count": 0}
    with open_store(store_url, mode="read") as r, pytest.raises(StoreError, match="read-only"):
        r.begin_run("bench", "x", {}, {})


def test_postgres_refuses_update_and_delete_from_any_client(pg_url: str) -> None:
    import psycopg

    _fill(pg_url, 1)
    with psycopg.connect(pg_url, autocommit=True) as c:
        for sql in ("UPDATE results SET value = 0", "DELETE FROM samples", "DELETE FROM runs",
                    "UPDATE runs SET name = 'x'"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                c.execute(sql)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_newer_schema_is_refused_by_an_older_version(backend: str, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    url = str(tmp_path / "s.sqlite") if backend == "sqlite" else str(request.getfixturevalue("pg_url"))
    older = (MIGRATIONS if backend == "sqlite" else PG_MIGRATIONS)[:3]
    _fill(url, 1)  # written by this version: 4 migrations
    for mode in ("read", "write"):
        with pytest.raises(StoreError, match=r"newer gpumatch \(schema migration '0004_run_uuid' is unknown"):
            open_store(url, mode=mode, migrations=older)  # type: ignore[arg-type]


def test_older_postgres_store_is_upgraded_by_a_writer(pg_url: str) -> None:
    with open_store(pg_url, migrations=PG_MIGRATIONS[:3]) as old:
        assert len(old.schema) == 3
    with open_store(pg_url) as s:
        assert s.schema[-1] == "0004_run_uuid"
        rid = s.begin_run("bench", "after upgrade", {}, {})
        assert len(s.run(rid).run_uuid) == 36


def test_foreign_and_missing_postgres_databases_are_refused(pg_url: str) -> None:
    import psycopg

    with pytest.raises(StoreError, match="empty"):
        open_store(pg_url, mode="read")
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("CREATE TABLE accounts (id int)")
    with pytest.raises(StoreError, match="not a gpumatch results store"):
        open_store(pg_url)
    with pytest.raises(StoreError, match=r"cannot open PostgreSQL results store .*does not exist"):
        open_store(pg_url.rsplit("/", 1)[0] + "/no_such_db", mode="read")


def test_pooling_sqlite_and_postgres_both_ways_is_idempotent(pg_url: str, tmp_path: Path) -> None:
    lite = str(tmp_path / "laptop.sqlite")
    a, b = _fill(lite, 3), _fill(pg_url, 2)
    first = copy_store(lite, pg_url)
    assert set(first.copied) == set(a) and first.already_there == 0
    again = copy_store(lite, pg_url)
    assert again.copied == () and again.already_there == 3
    pulled = copy_store(pg_url, lite)
    assert set(pulled.copied) == set(b) and pulled.already_there == 3
    pooled_pg, pooled_lite = _content(pg_url), _content(lite)
    assert set(pooled_pg) == set(a + b) == set(pooled_lite)
    assert pooled_pg == pooled_lite  # every field of every run, row for row, on both backends


def test_running_runs_wait_and_dead_writers_travel_as_interrupted(tmp_path: Path, pg_url: str) -> None:
    lite = str(tmp_path / "s.sqlite")
    with open_store(lite) as s:
        live = s.begin_run("bench", "still going", {}, {})
        report = copy_store(lite, pg_url)
        assert report.copied == () and report.still_running == (s.run(live).run_uuid,)
        s._open_runs.clear()  # leave it running, as a writer killed mid-run would
    proc = subprocess.run([sys.executable, "-c", f"""
from gpumatch.store import open_store
s = open_store({lite!r}); s.begin_run("bench", "dead writer", {{}}, {{}}); import os; os._exit(0)"""], check=True)
    assert proc.returncode == 0
    report = copy_store(lite, pg_url)
    assert len(report.copied) == 1 and len(report.still_running) == 1
    with open_store(pg_url, mode="read") as r:
        (run,) = r.runs()
        assert (run.name, run.stored_status) == ("dead writer", "interrupted")


_PUSH = """
import sys
from gpumatch.store.merge import copy_store
copy_store(sys.argv[1], sys.argv[2], lambda done, todo: print(done, flush=True))
"""


def test_push_killed_half_way_resumes_without_duplicates(tmp_path: Path, pg_url: str) -> None:
    lite = str(tmp_path / "big.sqlite")
    uuids = _fill(lite, 20, samples=2000)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", _PUSH, lite, pg_url], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    while int(proc.stdout.readline() or 20) < 3:  # let it copy a few runs, then kill it mid-copy
        pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with open_store(pg_url, mode="read") as r:
        part = r.runs(limit=100)
        assert 3 <= len(part) < 20, "the push was not killed half-way"
        assert all(x.n_samples == 2000 and x.status == "completed" for x in part)  # never half a run
    rest = copy_store(lite, pg_url)
    assert len(rest.copied) == 20 - len(part) and rest.already_there == len(part)
    assert _content(pg_url) == _content(lite) and set(_content(pg_url)) == set(uuids)


def test_eight_writers_one_killed_lose_no_committed_row_and_readers_never_see_half_a_run(store_url: str) -> None:
    with open_store(store_url):
        pass  # created and migrated once, before the writers race
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(store_url, w, start, out, w == 7)) for w in range(8)]
    for p in procs:
        p.start()
    start.set()
    closed: dict[str, tuple[int, int]] = {}
    killed = False
    deadline = time.monotonic() + 90
    with open_store(store_url, mode="read") as reader:
        while any(p.is_alive() for p in procs[:7]) or not killed:
            assert time.monotonic() < deadline
            for r in reader.runs(limit=1000):
                if r.stored_status == "completed":  # a closed run is whole, and stays as it was first seen
                    seen = (r.n_samples, r.n_results)
                    assert seen == (SAMPLES_PER_RUN, 1), f"half a run visible: {r.name} {seen}"
                    assert closed.setdefault(r.run_uuid, seen) == seen
                elif r.name.startswith("w7-") and r.n_samples >= 5 and not killed:
                    os.kill(procs[7].pid, signal.SIGKILL)  # the slow writer, mid-run
                    killed = True
            time.sleep(0.02)
    for p in procs:
        p.join(timeout=30)
    reports = [out.get(timeout=10) for _ in range(7 * RUNS_PER_WRITER)]
    assert [e for _, _, e in reports if e] == []
    committed = {u for w, u, _ in reports}
    with open_store(store_url, mode="read") as r:
        runs = r.runs(limit=1000)
        done = {x.run_uuid for x in runs if x.stored_status == "completed"}
        assert committed <= done  # every run a writer saw committed is there, whole
        assert all(x.n_samples == SAMPLES_PER_RUN for x in runs if x.run_uuid in done)
        victim = [x for x in runs if x.name.startswith("w7-") and x.stored_status == "running"]
        assert len(victim) == 1 and 5 <= victim[0].n_samples < SAMPLES_PER_RUN
        assert victim[0].status == "interrupted"  # its writer is provably gone
