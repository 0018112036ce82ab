"""What the store survives, through the command line (issue 10, item 16; docs/store.md "What it survives"):
writers SIGKILLed at random moments, and a disk that really fills up (a tiny tmpfs in a private mount
namespace; skipped where that needs privileges this machine does not give)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import gpumatch
from gpumatch.store import open_store
from gpumatch.telemetry.trace import read_trace

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

TRACE = Path(__file__).parents[1] / "data" / "traces" / "h200-2026-12-02-gemm-bf16.csv"
_SRC = str(Path(gpumatch.__file__).resolve().parents[1])
_REPLAY = "import sys; from gpumatch.cli.app import main; sys.exit(main(['monitor', '--replay', sys.argv[1]]))"


def _replay(store: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, GPUMATCH_STORE=str(store), PYTHONPATH=_SRC)
    return subprocess.Popen([sys.executable, "-c", _REPLAY, str(TRACE)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def test_writers_killed_at_random_moments_lose_no_committed_run(tmp_path: Path) -> None:
    store = tmp_path / "results.sqlite"
    t0 = time.monotonic()
    first = _replay(store)
    _, err = first.communicate(timeout=60)
    whole_s = time.monotonic() - t0  # start-up (most of it), then the writes near the end
    assert first.returncode == 0, err
    with open_store(store, mode="read") as st:
        (whole,) = st.runs()
        n_events = len(st.events(whole.run_id))
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    saved: list[int] = []
    for _ in range(5):
        proc = _replay(store)
        time.sleep(rng.uniform(0.6, 1.0) * whole_s)  # late: where the writes are
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        saved += [int(line.split("saved as run ")[1].split()[0]) for line in err.splitlines() if "saved as run" in line]
    why = f"seed {seed}"
    with open_store(store, mode="write") as st:  # opens for writing (quick_check passes): whole
        assert st.integrity_check() == "ok", why
        runs = st.runs()
        for r in runs:
            if r.stored_status == "completed":
                assert (r.n_samples, r.n_results, len(st.events(r.run_id))) == (
                    whole.n_samples, whole.n_results, n_events), why
            else:  # killed: begun, then each call all or nothing (the samples are one transaction)
                assert r.stored_status == "running" and r.status == "interrupted", why
                assert r.n_samples in (0, whole.n_samples) and r.n_results <= whole.n_results, why
        assert set(saved) <= {r.run_id for r in runs if r.stored_status == "completed"}, why
        assert sorted(st.close_stale_runs()) == sorted(r.run_id for r in runs if r.stored_status == "running")
    last = _replay(store)  # and it goes on taking runs
    _, err = last.communicate(timeout=60)
    assert last.returncode == 0, err


_FULL_DISK = textwrap.dedent(
    """
    import json, os, sys
    folder, trace, free_kib = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ["GPUMATCH_STORE"] = os.path.join(folder, "results.sqlite")
    from gpumatch.cli.app import main
    first = main(["monitor", "--replay", trace])
    filler = os.path.join(folder, "filler")
    with open(filler, "wb") as f:  # fill the disk, then give back free_kib
        try:
            while True:
                f.write(bytes(65536))
                f.flush()
        except OSError:
            pass
    os.truncate(filler, max(0, os.path.getsize(filler) - free_kib * 1024))
    second = main(["monitor", "--replay", trace])
    os.remove(filler)
    from gpumatch.store import open_store
    with open_store(mode="write") as st:
        runs = [(r.n_samples, r.n_results, r.stored_status) for r in st.runs()]
        print("RESULT", json.dumps({"first": first, "second": second, "integrity": st.integrity_check(), "runs": runs}))
    """
)


@pytest.mark.parametrize("free_kib", [0, 120])  # full before SQLite opens (-shm); full while adding samples
def test_a_full_disk_is_one_line_and_loses_nothing_committed(tmp_path: Path, free_kib: int) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "full_disk.py"
    script.write_text(_FULL_DISK)
    shell = 'mount -t tmpfs -o size=1m tmpfs "$1" && shift && exec "$@"'
    try:
        r = subprocess.run(["unshare", "-m", "sh", "-c", shell, "sh", str(disk), sys.executable, str(script),
                            str(disk), str(TRACE), str(free_kib)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=_SRC))
    except OSError:
        pytest.skip("no unshare(1) here")
    if r.returncode != 0 and "mount" in r.stderr and "RESULT" not in r.stdout:
        pytest.skip(f"cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): {r.stderr.strip()[:100]}")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.split("RESULT ", 1)[1])
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    assert got["first"] == 0 and got["second"] == 2 and len(errors) == 1, r.stderr
    assert "disk full" in errors[0] and "free disk space" in errors[0] and f"the trace is in {TRACE}" in errors[0]
    assert got["integrity"] == "ok"
    n = len(read_trace(TRACE).samples)
    assert got["runs"][-1] == [n, 4, "completed"]  # the run committed before the disk filled: whole
    assert all(s in (0, n) and status == "interrupted" for s, _, status in got["runs"][:-1])  # the failed one
