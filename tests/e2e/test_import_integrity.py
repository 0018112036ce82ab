"""Data integrity of the writing commands (issue 25, "Data"): ``bench import`` is one transaction (a SIGKILL
mid-way leaves nothing and the next import goes through), six concurrent imports of one file store it once
(the UNIQUE ``run_uuid``), and every writing command killed mid-write (``bench import``, ``runs import``,
``runs merge``, ``runs push``) leaves a store that passes ``PRAGMA integrity_check`` with whole runs only."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from integrity_workers import importer  # importable by spawned children; no pytest import

from gpumatch.cli.app import main
from gpumatch.store import open_store

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BENCH = ROOT / "tests" / "data" / "measurements" / "bench" / "2026-12-04-h200-quick.json"
SERVE = sorted((ROOT / "tests" / "data" / "measurements" / "serve").glob("2026-12-05-h200-serve-*.json"))[0]
IMPORTS = ROOT / "tests" / "data" / "imports"
VLLM = IMPORTS / "vllm-bench-serve.json"


def _counts(store: str) -> list[tuple[str, int, int, int, int]]:
    """(status, results, failures, events, samples) of every run, in run order."""
    with open_store(store, mode="read") as st:
        runs = sorted(st.runs(limit=1000), key=lambda r: r.run_id)
        return [(r.stored_status, r.n_results, r.n_failures, len(st.events(r.run_id)), r.n_samples) for r in runs]


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _kill_mid_write(tmp_path: Path, module: str, argv: list[str], after: int = 0) -> None:
    """Run ``gpumatch ARGV`` in a child whose ``module.write_bundle`` stalls inside the transaction, and SIGKILL
    it there (after ``after`` bundles went through whole)."""
    marker = tmp_path / f"marker-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{HERE}"}
    child = subprocess.Popen([sys.executable, "-m", "integrity_workers", "stall", module,
                              str(marker), "--after", str(after), "--", *argv], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not marker.exists():
        if child.poll() is not None:
            raise AssertionError(f"child ended before the stall: {child.communicate()}")
        assert time.monotonic() < deadline, "child never reached the write"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("source", [BENCH, SERVE], ids=["bench-export", "serve-file"])
def test_bench_import_killed_mid_way_leaves_nothing_and_reimports(tmp_path: Path, source: Path) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["bench", "import", str(BENCH if source is SERVE else SERVE), "--store", str(store)]) == 0
    before = _counts(str(store))
    _kill_mid_write(tmp_path, "gpumatch.store.store", ["bench", "import", str(source), "--store", str(store)])
    assert _integrity(store) == "ok"
    assert _counts(str(store)) == before  # no empty 'interrupted' run, nothing half-written
    assert main(["bench", "import", str(source), "--store", str(store)]) == 0
    after = _counts(str(store))
    assert len(after) == 2 and after[0] == before[0]
    data = json.loads(source.read_text())
    if source is BENCH:
        assert after[1] == ("completed", len(data["results"]), len(data["failures"]), len(data["cases"]), 0)
    else:
        requests = sum(len(lv.get("requests") or []) for lv in data["levels"])
        assert after[1][3] == requests + len(data["levels"]) and after[1][1] > 0
    assert main(["bench", "import", str(source), "--store", str(store)]) == 2  # now it is in: refused
    assert _integrity(store) == "ok"


def _race(url: str, files: list[Path], n_procs: int = 6) -> list[list[tuple[str, int | None, str | None]]]:
    """For each file (a round), ``n_procs`` processes import it at the same instant; their answers."""
    ctx = mp.get_context("spawn")
    rounds = []
    for f in files:
        start, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=importer, args=(str(f), url, start, out)) for _ in range(n_procs)]
        for p in procs:
            p.start()
        time.sleep(0.5)
        start.set()
        answers = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        rounds.append(answers)
    return rounds


def _round_files(tmp_path: Path, n: int) -> list[Path]:
    """``n`` distinct exports of one run (each its own original start time: a distinct run to import)."""
    base = json.loads(BENCH.read_text())
    files = []
    for i in range(n):
        data = {**base, "run": {**base["run"], "started_at": f"2026-12-04T0{i}:00:00+00:00"}}
        f = tmp_path / f"export-{i}.json"
        f.write_text(json.dumps(data))
        files.append(f)
    return files


def _check_races(url: str, files: list[Path]) -> None:
    rounds = _race(url, files)
    for answers in rounds:
        stored = [a for a in answers if a[0] == "stored"]
        assert len(stored) == 1, answers
        assert all("already in" in str(a[2]) for a in answers if a[0] == "refused"), answers
    counts = _counts(url)
    n_results = len(json.loads(BENCH.read_text())["results"])
    assert counts == [("completed", n_results, 0, len(json.loads(BENCH.read_text())["cases"]), 0)] * len(files)


def test_six_concurrent_bench_imports_store_each_file_once_sqlite(tmp_path: Path) -> None:
    store = tmp_path / "race.sqlite"
    _check_races(str(store), _round_files(tmp_path, 3))
    assert _integrity(store) == "ok"


def test_six_concurrent_bench_imports_store_each_file_once_postgres(tmp_path: Path, pg_url: str) -> None:
    _check_races(pg_url, _round_files(tmp_path, 2))


def test_an_import_left_behind_by_an_older_killed_importer_does_not_block(tmp_path: Path) -> None:
    """Before one-transaction imports a killed importer left an empty run (config.imported, no summary): that run
    is no longer taken for the import, so the file goes in."""
    store = tmp_path / "s.sqlite"
    data = json.loads(BENCH.read_text())
    config = {**data["run"]["config"], "imported": {"file": BENCH.name, "run_id": data["run"]["run_id"],
                                                    "started_at": data["run"]["started_at"]}}
    with open_store(store) as st:
        st.begin_run("bench", "left-behind", data["manifest"], config)  # closed 'interrupted' by close()
    assert main(["bench", "import", str(BENCH), "--store", str(store)]) == 0
    assert [c[0] for c in _counts(str(store))] == ["interrupted", "completed"]


def test_runs_import_killed_mid_way_leaves_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    assert main(["runs", "import", str(IMPORTS / "nccl-tests-all-reduce.json"), "--store", str(store)]) == 0
    before = _counts(str(store))
    _kill_mid_write(tmp_path, "gpumatch.store.imports", ["runs", "import", str(VLLM), "--store", str(store)])
    assert _integrity(store) == "ok" and _counts(str(store)) == before
    assert main(["runs", "import", str(VLLM), "--store", str(store)]) == 0
    assert len(_counts(str(store))) == len(before) + 1


def _three_run_store(path: Path) -> list[tuple[str, int, int, int, int]]:
    with open_store(path) as st:
        for k in range(3):
            rid = st.begin_run("bench", f"r{k}", {"k": k}, {"k": k})
            st.add_samples(rid, [{"t_s": float(i), "power_instant_w": 100.0 + i} for i in range(50)])
            st.add_result(rid, "x", float(k), "1")
            st.add_event(rid, 0.0, "edge", {"k": k})
            st.end_run(rid, "completed")
    return _counts(str(path))


def test_merge_into_a_new_file_killed_mid_way_leaves_no_file(tmp_path: Path) -> None:
    src, into = tmp_path / "a.sqlite", tmp_path / "pooled.sqlite"
    source = _three_run_store(src)
    _kill_mid_write(tmp_path, "gpumatch.store.merge", ["runs", "merge", str(src), "--into", str(into)], after=1)
    assert not into.exists()  # the new file appears whole, by rename, or not at all
    assert main(["runs", "merge", str(src), "--into", str(into)]) == 0
    assert _counts(str(into)) == source and _integrity(into) == "ok"
    assert not any(p.name.startswith(".pooled.sqlite") for p in tmp_path.iterdir())  # no temporary left


def test_merge_into_an_existing_store_killed_mid_way_keeps_whole_runs(tmp_path: Path) -> None:
    src, into = tmp_path / "a.sqlite", tmp_path / "pooled.sqlite"
    source = _three_run_store(src)
    with open_store(into):
        pass
    _kill_mid_write(tmp_path, "gpumatch.store.merge", ["runs", "merge", str(src), "--into", str(into)], after=1)
    assert _integrity(into) == "ok"
    assert _counts(str(into)) == source[:1]  # the run it finished, whole; nothing of the one in flight
    assert main(["runs", "merge", str(src), "--into", str(into)]) == 0
    assert _counts(str(into)) == source


def test_push_killed_mid_way_keeps_whole_runs(tmp_path: Path, pg_url: str) -> None:
    src = tmp_path / "a.sqlite"
    source = _three_run_store(src)
    _kill_mid_write(tmp_path, "gpumatch.store.merge", ["runs", "push", "--store", str(src), "--to", pg_url], after=2)
    assert _counts(pg_url) == source[:2]
    with open_store(pg_url, mode="read") as st:
        assert st.integrity_check() == "ok"
    assert main(["runs", "push", "--store", str(src), "--to", pg_url]) == 0
    assert _counts(pg_url) == source


def test_pull_killed_mid_way_keeps_whole_runs(tmp_path: Path, pg_url: str) -> None:
    src, mine = tmp_path / "a.sqlite", tmp_path / "mine.sqlite"
    source = _three_run_store(src)
    assert main(["runs", "push", "--store", str(src), "--to", pg_url]) == 0
    _kill_mid_write(tmp_path, "gpumatch.store.merge", ["runs", "pull", "--from", pg_url, "--store", str(mine)],
                    after=1)
    assert _integrity(mine) == "ok" and _counts(str(mine)) == source[:1]
    assert main(["runs", "pull", "--from", pg_url, "--store", str(mine)]) == 0
    assert _counts(str(mine)) == source and _integrity(mine) == "ok"
