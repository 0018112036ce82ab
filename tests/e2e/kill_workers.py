"""Children and helpers of the kill/race tests of the writing commands (no pytest import: children start fast).

``python -m kill_workers MODE MARKER [N] [--fake-nvml] -- ARGS...`` runs ``gpumatch ARGS`` in this process with one
point of the write made to stall there: it creates ``MARKER`` and sleeps, and the parent SIGKILLs it at that
instant. Modes (N: how many of those points pass normally first):

- ``run``: no stall (the parent times its kill by polling the store's rows);
- ``write ACTION N``: inside the (N+1)-th store transaction whose action contains ACTION, after its rows were
  written and before COMMIT (``Db.write``: ``adding calibration``, ``adding result``...);
- ``migration N``: inside the (N+1)-th migration step applied, after its statements, before COMMIT;
- ``recover N``: ``runs recover`` after N tables were copied into its new store;
- ``halfway``: the first ``os.write`` to a regular file writes half its bytes, then stalls (an output file
  half-written);
- ``publish N``: an output file written whole to its temporary, just before it is published under its name.

``--fake-nvml`` installs the fake pynvml of ``tests/unit/telemetry/test_nvml_backend.py`` (``gpumatch monitor``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _stall(marker: str) -> None:
    Path(marker).write_text("stalled")
    time.sleep(600)


def _counting(real: Callable[..., Any], marker: str, after: int, when: Callable[..., bool]) -> Callable[..., Any]:
    """``real`` that stalls once it has returned ``after`` times for calls where ``when(*args)``."""
    seen = {"n": 0}

    def wrapped(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        if when(*args):
            seen["n"] += 1
            if seen["n"] > after:
                _stall(marker)
        return out
    return wrapped


def _patch_write(marker: str, action: str, after: int) -> None:
    from gpumatch.store import db

    real = db.Db.write

    def write(self: Any, what: str, fn: Callable[[Any], Any]) -> Any:
        if action not in what:
            return real(self, what, fn)
        return real(self, what, _counting(fn, marker, after, lambda *_: True))
    db.Db.write = write  # type: ignore[method-assign]


def _patch_migration(marker: str, after: int) -> None:
    from gpumatch.store import migrations

    real = migrations.split_statements
    seen = {"n": 0}

    def split(sql: str) -> Any:
        yield from real(sql)  # the caller executes each statement; the code below runs after the last one
        seen["n"] += 1
        if seen["n"] > after:
            _stall(marker)
    migrations.split_statements = split  # type: ignore[assignment]


def _patch_recover(marker: str, after: int) -> None:
    from gpumatch.store import recover

    recover._copy = _counting(recover._copy, marker, after, lambda *_: True)  # type: ignore[assignment]


def _patch_halfway(marker: str) -> None:
    real = os.write

    def write(fd: int, data: Any) -> int:
        if stat.S_ISREG(os.fstat(fd).st_mode) and len(data) > 1:
            real(fd, bytes(data[: len(data) // 2]))
            _stall(marker)
        return real(fd, data)
    os.write = write


def _patch_publish(marker: str, after: int) -> None:
    from gpumatch import outfiles

    real = outfiles._publish
    seen = {"n": 0}

    def publish(*args: Any) -> None:
        seen["n"] += 1
        if seen["n"] > after:
            _stall(marker)
        real(*args)
    outfiles._publish = publish  # type: ignore[assignment]


def fake_nvml() -> None:
    sys.path.insert(0, str(HERE.parent / "unit" / "telemetry"))
    from test_nvml_backend import _fake_pynvml

    sys.modules["pynvml"] = _fake_pynvml()


def child(argv: list[str]) -> int:
    """The child's entry point (module docstring)."""
    cut = argv.index("--")
    head, rest = argv[:cut], argv[cut + 1:]
    if "--fake-nvml" in head:
        head.remove("--fake-nvml")
        fake_nvml()
    mode, marker = head[0], head[1]
    if mode == "write":
        _patch_write(marker, head[2], int(head[3]))
    elif mode == "migration":
        _patch_migration(marker, int(head[2]))
    elif mode == "recover":
        _patch_recover(marker, int(head[2]))
    elif mode == "halfway":
        _patch_halfway(marker)
    elif mode == "publish":
        _patch_publish(marker, int(head[2]))
    from gpumatch.cli.app import main

    return main(rest)


# --- helpers of the parent (the tests) --------------------------------------------------------------------------

def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{HERE}"}


def start(cwd: Path, mode: str, marker: Path | None, *argv: str, extra: tuple[str, ...] = (),
          store: Path | None = None) -> subprocess.Popen[str]:
    """``gpumatch ARGV`` in a child (module docstring), in its own session (its case children are found by
    :func:`descendants`); ``store`` is given as ``$GPUMATCH_STORE`` (``monitor`` has no ``--store``)."""
    environ = {**env(), **({"GPUMATCH_STORE": str(store)} if store else {})}
    return subprocess.Popen([sys.executable, "-m", "kill_workers", mode, str(marker or "-"), *extra, "--", *argv],
                            cwd=cwd, env=environ, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_until(proc: subprocess.Popen[str], ready: Callable[[], bool], what: str, timeout_s: float = 90.0) -> None:
    """Poll ``ready`` every 20 ms until it holds; fails if ``proc`` ends first or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the child ended (exit {proc.returncode}) before {what}: {out[-2000:]}{err[-2000:]}")
        if time.monotonic() > deadline:
            kill(proc)
            raise AssertionError(f"the child never reached {what}")
        time.sleep(0.02)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc), deepest last."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` (and then, by pid, the processes it had started: case children, monitored commands)."""
    below = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for pid in below:  # they hold the child's stdout and stderr open
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def kill_at_marker(proc: subprocess.Popen[str], marker: Path) -> None:
    wait_until(proc, marker.exists, "the stall")
    kill(proc)


def _connect(path: Path) -> sqlite3.Connection:
    """A connection that changes nothing (``query_only``) but, unlike ``mode=ro``, removes the ``-wal`` and
    ``-shm`` when it is the last one to close (https://www.sqlite.org/wal.html#readonly): the tests' own reads
    leave no side files for the tests to find."""
    conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30)
    conn.execute("PRAGMA query_only = 1")
    return conn


def integrity(path: Path) -> str:
    conn = _connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def count(path: Path, sql: str) -> int:
    """One number read from the store as it is now (0 where the file or table is not there yet)."""
    if not path.exists():
        return 0
    conn = _connect(path)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):
            return 0
        raise
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
