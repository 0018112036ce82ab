"""One case in a child process: a crash, a hang or an out-of-memory error of the case cannot take the suite with
it.

The child is ``python -m gpumatch.lab.child CASE.json RESULT.json TARGET`` in its own session (process group),
so Ctrl-C at the terminal reaches only the parent, which decides what happens and kills the child's whole group
(torch.compile's workers included). A fresh interpreter rather than ``multiprocessing``: nothing of the parent
(its ``__main__``, its store connection, its CUDA state) is re-imported or inherited. The child writes its stdout
and stderr to a log file (its tail goes with a failure), runs ``TARGET`` (default
:func:`gpumatch.bench.cases.run_case`) on the case and writes the outcome as JSON. :func:`run_in_child` returns a
:class:`ChildOutcome`: the case's outcome, or a failure with its class (``oom``, ``error``, ``timeout``,
``crash``), message and the log's tail.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.files import tail_text

LOG_TAIL_CHARS = 4000
DEFAULT_TARGET = "gpumatch.bench.cases:run_case"
_OOM_WORDS = ("out of memory", "can't allocate memory", "not enough memory", "failed to allocate")


@dataclass(frozen=True)
class ChildOutcome:
    """``outcome`` (the target's dict) when the case returned, else ``error_class`` / ``message`` / ``log_tail``;
    ``wall_s`` the seconds the child lived."""

    outcome: dict[str, Any] | None
    wall_s: float
    error_class: str = ""
    message: str = ""
    log_tail: str = ""


def classify(exc: BaseException) -> str:
    """``oom`` for MemoryError, torch's OutOfMemoryError or an allocator's out-of-memory message; else ``error``."""
    names = {c.__name__ for c in type(exc).__mro__}
    text = str(exc).lower()
    if "OutOfMemoryError" in names or isinstance(exc, MemoryError) or any(w in text for w in _OOM_WORDS):
        return "oom"
    return "error"


def _child(case_path: str, result_path: str, target: str) -> int:
    """The child's body: run ``target`` on the case; the outcome (or the error) goes to ``result_path``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    case = json.loads(Path(case_path).read_text(encoding="utf-8"))
    try:
        module, name = target.rsplit(":", 1)
        fn = getattr(__import__(module, fromlist=[name]), name)
        payload: dict[str, Any] = {"status": "returned", "outcome": fn(case)}
    except BaseException as e:  # everything the case raised goes back as its failure
        traceback.print_exc()
        payload = {"status": "raised", "error_class": classify(e), "message": f"{type(e).__name__}: {e}"[:2000]}
    tmp = Path(result_path + ".tmp")
    tmp.write_text(json.dumps(payload, default=str), encoding="utf-8")
    tmp.replace(result_path)
    sys.stdout.flush()
    return 0


def _env() -> dict[str, str]:
    """The parent's environment, with the folder gpumatch was imported from first on PYTHONPATH."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_in_child(case: dict[str, Any], timeout_s: float, target: str = DEFAULT_TARGET) -> ChildOutcome:
    """Run ``case`` in a child for at most ``timeout_s`` seconds. KeyboardInterrupt kills the child's process
    group and propagates."""
    with tempfile.TemporaryDirectory(prefix="gpumatch-case-") as tmp:
        case_path, result_path, log_path = Path(tmp) / "case.json", Path(tmp) / "result.json", Path(tmp) / "log"
        case_path.write_text(json.dumps(case), encoding="utf-8")
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gpumatch.lab.child", str(case_path), str(result_path), target],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return ChildOutcome(None, time.monotonic() - t0, "timeout",
                                f"no result within the case's {timeout_s:.0f} s limit",
                                tail_text(log_path, LOG_TAIL_CHARS))
        except BaseException:
            _kill(proc)
            raise
        finally:
            _kill_group(proc.pid)
        return _read(result_path, code, time.monotonic() - t0, tail_text(log_path, LOG_TAIL_CHARS))


def _read(result_path: Path, code: int, wall_s: float, tail: str) -> ChildOutcome:
    try:
        payload = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ChildOutcome(None, wall_s, "crash", _death(code), tail)
    if payload["status"] == "returned":
        return ChildOutcome(payload["outcome"], wall_s)
    return ChildOutcome(None, wall_s, payload["error_class"], payload["message"], tail)


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the kernel's OOM killer sends SIGKILL)" if -exitcode == signal.SIGKILL else ""
        return f"the case's process was killed by {name}{hint}"
    return f"the case's process exited with code {exitcode} without a result"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    _kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (its session: the case and anything it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else DEFAULT_TARGET))
