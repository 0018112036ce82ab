"""Kills, concurrent writers and readers of the measuring commands (issue 25, "Data"): ``bench run --tiny``,
``bench serve`` against the loopback server and ``gpumatch monitor -- CMD`` (fake pynvml), on one SQLite store.

Each is SIGKILLed early (its run just begun) and mid-run (timed by polling the store's rows, no fixed sleep):
the store then passes ``PRAGMA integrity_check``, the killed runs read ``interrupted`` (stored ``running``: their
writer is gone, docs/store.md "Run states"), never ``completed``, and the command run again completes a run with
the same rows as an undisturbed one. Four of the same command at once all succeed, each run whole. A reader
during a live run sees it ``running``, and once everyone closed no ``-wal``/``-shm`` is left."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import kill_workers as kw
import pytest

from gpumatch.store import open_store

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc, POSIX signals")


def _runs(store: Path) -> list[tuple[str, str, int, Counter[str]]]:
    """(status, stored status, results, events by kind) of every run, in run order, as a reader sees them."""
    with open_store(store, mode="read") as st:
        runs = sorted(st.runs(limit=1000), key=lambda r: r.run_id)
        return [(r.status, r.stored_status, r.n_results, Counter(e.kind for e in st.events(r.run_id)))
                for r in runs]


def _side_files(store: Path) -> list[str]:
    return [p.name for p in store.parent.iterdir() if p.name.startswith(store.name + "-")]


def _all(procs: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    errs = [p.communicate(timeout=120)[1] for p in procs]
    return [(p.returncode, e) for p, e in zip(procs, errs, strict=True)]


def _killed_twice(tmp_path: Path, store: Path, argv: list[str], mid: str, extra: tuple[str, ...] = ()) -> None:
    """Kill ``argv`` once its run is begun, then again once ``mid`` (SQL) counts one row of the second run."""
    proc = kw.start(tmp_path, "run", None, *argv, extra=extra, store=store)
    kw.wait_until(proc, lambda: kw.count(store, "SELECT count(*) FROM runs") >= 1, "the run's start")
    kw.kill(proc)
    proc = kw.start(tmp_path, "run", None, *argv, extra=extra, store=store)
    kw.wait_until(proc, lambda: kw.count(store, mid) >= 1, "the middle of the run")
    kw.kill(proc)
    assert kw.integrity(store) == "ok"


def _check_killed(runs: list[tuple[str, str, int, Counter[str]]], whole: tuple[str, str, int, Counter[str]]) -> None:
    """The two killed runs read interrupted and hold at most what a whole run holds; the last one is whole."""
    assert [r[:2] for r in runs] == [("interrupted", "running")] * 2 + [("completed", "completed")]
    for _, _, n_results, events in runs[:2]:
        assert n_results <= whole[2] and all(events[k] <= n for k, n in whole[3].items())
    assert runs[2] == whole


# --- bench run --tiny ------------------------------------------------------------------------------------------

TINY = ["bench", "run", "--tiny", "--case", "launch", "--case", "copy"]


def test_bench_run_killed_early_and_mid_run_then_rerun(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    argv = [*TINY, "--store", str(store)]
    _killed_twice(tmp_path, store, argv, "SELECT count(*) FROM results WHERE run_id = 2")
    proc = kw.start(tmp_path, "run", None, *argv)
    assert proc.wait(timeout=120) == 0, proc.communicate()
    runs = _runs(store)
    last = runs[2]
    assert last[3]["case"] == 2 and last[2] >= 2  # each case's event, launch's and copy's results
    _check_killed(runs, last)
    assert runs[1][2] >= 1 and runs[1][3]["case"] < 2  # killed between its results and its end
    assert _side_files(store) == [] and kw.integrity(store) == "ok"


def test_four_concurrent_bench_runs(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    procs = [kw.start(tmp_path, "run", None, "bench", "run", "--tiny", "--case", "launch", "--store", str(store))
             for _ in range(4)]
    for p in procs:
        p.wait(timeout=180)
    assert [code for code, _ in _all(procs)] == [0] * 4
    runs = _runs(store)
    assert len(runs) == 4 and all(r == runs[0] for r in runs)  # none lost, none doubled, each whole
    assert runs[0][:3] == ("completed", "completed", 1) and runs[0][3]["case"] == 1
    assert _side_files(store) == [] and kw.integrity(store) == "ok"


# --- bench serve against the loopback server --------------------------------------------------------------------

@pytest.fixture(scope="module")
def loopback() -> Iterator[str]:
    from gpumatch.loadgen.loopback import Loopback, LoopbackConfig

    with Loopback(LoopbackConfig(itl_s=0.01)) as url:
        yield url


def _serve(url: str, store: Path) -> list[str]:
    return ["bench", "serve", "--endpoint", url, "--model", "gpumatch-loopback", "--concurrency", "1",
            "--concurrency", "2", "-n", "12", "--prompt-tokens", "16", "--output-tokens", "8", "--warmup", "0",
            "--no-selftest", "--store", str(store)]


def test_bench_serve_killed_early_and_mid_run_then_rerun(tmp_path: Path, loopback: str) -> None:
    store = tmp_path / "s.sqlite"
    _killed_twice(tmp_path, store, _serve(loopback, store),
                  "SELECT count(*) FROM events WHERE run_id = 2 AND kind = 'level'")  # level 1 in, level 2 running
    proc = kw.start(tmp_path, "run", None, *_serve(loopback, store))
    assert proc.wait(timeout=120) == 0, proc.communicate()
    runs = _runs(store)
    assert runs[2][3] == Counter(level=2, request=24)
    _check_killed(runs, runs[2])
    assert runs[1][3]["level"] == 1 and runs[1][3]["request"] >= 12
    assert _side_files(store) == [] and kw.integrity(store) == "ok"


def test_four_concurrent_bench_serves(tmp_path: Path, loopback: str) -> None:
    store = tmp_path / "s.sqlite"
    procs = [kw.start(tmp_path, "run", None, *_serve(loopback, store)) for _ in range(4)]
    assert [code for code, _ in _all(procs)] == [0] * 4
    runs = _runs(store)
    assert len(runs) == 4 and all(r == runs[0] for r in runs)
    assert runs[0][:2] == ("completed", "completed") and runs[0][3] == Counter(level=2, request=24)
    assert _side_files(store) == [] and kw.integrity(store) == "ok"


# --- gpumatch monitor -- CMD (fake pynvml) ----------------------------------------------------------------------

def _monitor(*command: str) -> list[str]:
    return ["monitor", "-i", "0.02", "--", sys.executable, "-c", *command]


SLEEP = "import time; time.sleep(30)"
SHORT = "import time; time.sleep(0.5)"
UNTIL = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)"


def test_monitor_killed_early_and_mid_run_then_rerun(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    _killed_twice(tmp_path, store, _monitor(SLEEP), "SELECT count(*) >= 20 FROM samples WHERE run_id = 2",
                  extra=("--fake-nvml",))
    proc = kw.start(tmp_path, "run", None, *_monitor(SHORT), extra=("--fake-nvml",), store=store)
    assert proc.wait(timeout=60) == 0, proc.communicate()
    with open_store(store, mode="read") as st:
        runs = sorted(st.runs(), key=lambda r: r.run_id)
        assert [(r.status, r.stored_status) for r in runs] == [("interrupted", "running")] * 2 + [
            ("completed", "completed")]
        assert runs[1].n_samples >= 20 and runs[2].n_samples > 0
        assert "edge" in {e.kind for e in st.events(3)}  # its closing window-edge reads
    assert kw.integrity(store) == "ok"


def test_four_concurrent_monitors(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    procs = [kw.start(tmp_path, "run", None, *_monitor(SHORT), extra=("--fake-nvml",), store=store) for _ in range(4)]
    assert [code for code, _ in _all(procs)] == [0] * 4
    with open_store(store, mode="read") as st:
        runs = st.runs()
        assert len(runs) == 4 and {(r.status, r.kind) for r in runs} == {("completed", "monitor")}
        assert all(r.n_samples > 0 and r.n_results == runs[0].n_results for r in runs)
    assert _side_files(store) == [] and kw.integrity(store) == "ok"


def test_a_reader_during_a_monitor_run_sees_it_running_and_leaves_no_side_files(tmp_path: Path) -> None:
    store, stop = tmp_path / "s.sqlite", tmp_path / "stop"
    proc = kw.start(tmp_path, "run", None, *_monitor(UNTIL, str(stop)), extra=("--fake-nvml",), store=store)
    kw.wait_until(proc, lambda: kw.count(store, "SELECT count(*) FROM samples") >= 10, "its first samples")
    mid = _cli_json(tmp_path, "runs", "list", "--store", str(store), "--format", "json")
    assert [(r["status"], r["ended_at"]) for r in mid] == [("running", None)]  # shown running, not as finished
    stop.write_text("")
    assert proc.wait(timeout=60) == 0, proc.communicate()
    done = _cli_json(tmp_path, "runs", "list", "--store", str(store), "--format", "json")
    assert done[0]["status"] == "completed" and done[0]["n_samples"] >= mid[0]["n_samples"]
    assert _side_files(store) == []  # the writer and both readers closed: no -wal, no -shm
    assert kw.integrity(store) == "ok"


def _cli_json(cwd: Path, *argv: str) -> list[dict[str, object]]:
    """A reader in its own process: ``gpumatch ARGV`` as parsed JSON."""
    r = subprocess.run([sys.executable, "-m", "gpumatch", *argv], cwd=cwd, env=kw.env(), capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert isinstance(out, list)
    return out
