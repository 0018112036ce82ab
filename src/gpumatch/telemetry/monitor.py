"""``gpumatch monitor`` as library calls: sample around a command (or until Ctrl-C), or replay a trace.

The command runs as a child process in the same process group, so Ctrl-C reaches it too; the
sampler stops after the child has exited and the trace keeps everything sampled up to then.
Exit codes follow the shell: a child killed by signal N gives 128 + N.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.telemetry.device import Backend
from gpumatch.telemetry.fake import FakeBackend, VirtualClock
from gpumatch.telemetry.sampler import Sampler
from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import Sample
from gpumatch.telemetry.verdict import GpuVerdict, analyze


@dataclass(frozen=True)
class MonitorResult:
    """The trace, its per-GPU verdicts, and how the command ended (None when there was none)."""

    trace: Trace
    verdicts: list[GpuVerdict]
    exit_code: int | None
    interrupted: bool
    command: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "duration_s": self.trace.duration_s,
            "n_samples": len(self.trace.samples),
            "interval_s": self.trace.interval_s,
            "sampler": self.trace.stats.__dict__,
            "gpus": [v.to_dict() for v in self.verdicts],
            "xid_events": [x.__dict__ for x in self.trace.xid_events],
        }


def _shell_code(code: int) -> int:
    return 128 - code if code < 0 else code


def monitor_command(
    backend: Backend,
    command: Sequence[str] | None,
    interval_s: float = 0.1,
    on_samples: Callable[[list[Sample]], None] | None = None,
    flush_every_s: float = 2.0,
) -> MonitorResult:
    """Sample ``backend`` while ``command`` runs (or, without one, until KeyboardInterrupt).

    ``on_samples`` receives the new samples every ``flush_every_s`` and once at the end, so a caller
    can save them as the run goes (a killed monitor keeps what it had saved).
    """
    sampler = Sampler(backend, interval_s, meta={"command": list(command or [])})
    flushed = 0

    def flush() -> None:
        nonlocal flushed
        new = sampler.samples_since(flushed)
        if new and on_samples is not None:
            on_samples(new)
        flushed += len(new)

    sampler.start()
    code: int | None = None
    interrupted = False
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc = _spawn(command) if command else None
        while proc is None or proc.poll() is None:
            _wait(proc, flush_every_s)
            flush()
        code = _shell_code(proc.returncode)
    except KeyboardInterrupt:
        interrupted = True
        if proc is not None:
            code = _shell_code(_reap(proc))
    finally:
        trace = sampler.stop()
        flush()
    return MonitorResult(trace, analyze(trace), code, interrupted, list(command or []))


def _wait(proc: subprocess.Popen[bytes] | None, seconds: float) -> None:
    if proc is None:
        time.sleep(seconds)
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)


def _spawn(command: Sequence[str]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(list(command))
    except FileNotFoundError as e:
        raise InputError(f"command not found: {command[0]}", "check the name and PATH (the command goes after "
                         "'--', e.g. gpumatch monitor -- python train.py)") from e
    except PermissionError as e:
        raise InputError(f"cannot run {command[0]}: permission denied", "make it executable") from e


def _reap(proc: subprocess.Popen[bytes]) -> int:
    """Wait for a child that also got Ctrl-C; terminate it if it has not ended within 10 s."""
    try:
        return proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.terminate()
        return proc.wait()


def replay_trace(path: Path, interval_s: float | None = None) -> MonitorResult:
    """Run the sampler over a recorded trace through the fake device, on a virtual clock."""
    backend = FakeBackend.from_file(path)
    if not backend.trace.samples:
        raise InputError(f"trace '{path}' has no samples", "record one with 'gpumatch monitor --output F -- CMD'")
    clock = VirtualClock()
    meta = dict(backend.trace.meta, replayed_from=str(path), recorded_sampler=backend.trace.stats.__dict__)
    interval = backend.trace.interval_s if interval_s is None else interval_s
    backend.check_replay(interval, f"trace '{path}'")  # billions of samples from a long span: refused first
    sampler = Sampler(backend, interval, clock=clock.now, sleep=clock.sleep, meta=meta)
    trace = sampler.run_for(backend.duration_s)
    return MonitorResult(trace, analyze(trace), None, False, [])
