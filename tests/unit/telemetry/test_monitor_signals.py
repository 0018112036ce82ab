"""Stop signals to ``gpumatch monitor``: forwarded to the command, samples flushed, run closed, exit 128 + N.

The CLI cases run the real command line in a subprocess (a fake pynvml, as in test_monitor_doctor.py), with a
command that starts a grandchild, and send the signal to the monitor's pid only (as ``kill PID``,
systemd, docker stop or a batch scheduler would).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpumatch.store import open_store
from gpumatch.telemetry import child as child_mod
from gpumatch.telemetry.fake import FakeBackend
from gpumatch.telemetry.monitor import monitor_command

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and process groups")

_MONITOR = """
import sys
sys.path.insert(0, {tests!r})
from test_nvml_backend import _fake_pynvml
sys.modules["pynvml"] = _fake_pynvml()
from gpumatch.cli.app import main
sys.exit(main(sys.argv[1:]))
"""

# The monitored command: records its pid, starts a grandchild (a shell's background job would ignore
# SIGINT), records that pid, then waits.
_COMMAND = (
    "import os, subprocess, sys, time; d = sys.argv[1]; "
    "open(os.path.join(d, 'child.pid'), 'w').write(str(os.getpid())); "
    "g = subprocess.Popen(['sleep', '60']); open(os.path.join(d, 'grandchild.pid'), 'w').write(str(g.pid)); "
    "time.sleep(60)"
)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a busy init to reap it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_for(path: Path, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _start_monitor(tmp_path: Path, *command: str) -> subprocess.Popen[str]:
    env = dict(os.environ, GPUMATCH_HOME=str(tmp_path / "home"))
    return subprocess.Popen(
        [sys.executable, "-c", _MONITOR.format(tests=str(Path(__file__).parent)), "monitor", "-i", "0.02",
         *(["--", *command] if command else [])],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # the test's own process group stays out of it
    )


def _cleanup(proc: subprocess.Popen[str], pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_stop_signal_reaches_the_command_and_the_run_is_closed_interrupted(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    proc = _start_monitor(tmp_path, sys.executable, "-c", _COMMAND, str(tmp_path))
    pids: list[int] = []
    try:
        _wait_for(tmp_path / "grandchild.pid")
        pids = [int((tmp_path / n).read_text()) for n in ("child.pid", "grandchild.pid")]
        time.sleep(0.5)  # some samples (every 0.02 s), fewer than the 2-s flush: only the final flush saves them
        os.kill(proc.pid, sig)  # the monitor's pid only: nothing else got the signal
        _, err = proc.communicate(timeout=20)
    finally:
        _cleanup(proc, pids)
    assert proc.returncode == code, err
    assert not [p for p in pids if _alive(p)], "the command (or its child) runs on"
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"gpumatch: interrupted by {sig.name}") and "saved" in last
    with open_store(tmp_path / "home" / "results.sqlite", mode="read") as st:
        (run,) = st.runs()
        assert (run.stored_status, run.status) == ("interrupted", "interrupted")  # closed, not left 'running'
        assert run.summary is not None and run.summary["stopped_by"] == sig.name
        assert run.n_samples >= 10 and run.n_results >= 1  # the last samples and the results were saved
        assert [e.kind for e in st.events(run.run_id)].count("edge") >= 2  # window edges: start and end


def test_without_a_command_sigint_ends_the_measurement_normally_and_sigterm_exits_143(tmp_path: Path) -> None:
    for sig, code in ((signal.SIGINT, 0), (signal.SIGTERM, 143)):
        proc = _start_monitor(tmp_path)
        try:
            line = ""
            while "monitoring" not in line:  # sampling has started
                line = proc.stderr.readline() if proc.stderr else ""
                assert line, "the monitor ended before it started"
            time.sleep(0.3)
            os.kill(proc.pid, sig)
            _, err = proc.communicate(timeout=20)
        finally:
            _cleanup(proc, [])
        assert proc.returncode == code, err
    with open_store(tmp_path / "home" / "results.sqlite", mode="read") as st:
        runs = st.runs()
        assert [r.stored_status for r in runs] == ["completed", "completed"]  # the window ends when told
        assert all(r.n_samples >= 5 for r in runs)


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace_period(
    monkeypatch: pytest.MonkeyPatch, make_trace
) -> None:
    monkeypatch.setattr(child_mod, "interactive", lambda: False)  # batch mode, whatever runs the tests
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
             "time.sleep(60)"
    timer = threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGTERM))  # to this process: the monitor
    timer.start()
    try:
        t0 = time.monotonic()
        r = monitor_command(FakeBackend(make_trace("idle", 120.0)), [sys.executable, "-c", script], 0.05,
                            grace_s=0.5)
        took_s = time.monotonic() - t0
    finally:
        timer.cancel()
    assert r.signal == signal.SIGTERM and r.interrupted
    assert r.exit_code == 128 + signal.SIGKILL  # it outlived the grace period
    assert took_s < 10 and len(r.trace.samples) >= 5
    assert signal.getsignal(signal.SIGTERM) is not None  # handlers restored (not left as the monitor's)


def test_signals_are_forwarded_to_the_group_in_batch_mode_and_only_sigterm_interactively(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pid, s: sent.append(("group", s)))

    class _Proc:
        pid = 12345

        def poll(self) -> None:
            return None

        def send_signal(self, s: int) -> None:
            sent.append(("pid", s))

    batch, term = child_mod.Child(_Proc(), own_group=True), child_mod.Child(_Proc(), own_group=False)  # type: ignore[arg-type]
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        batch.forward(s)
    assert sent == [("group", signal.SIGINT), ("group", signal.SIGTERM), ("group", signal.SIGHUP)]
    sent.clear()
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the terminal already sent SIGINT/SIGHUP to it
        term.forward(s)
    assert sent == [("pid", signal.SIGTERM)]
