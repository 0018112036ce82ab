"""``gpumatch monitor`` as library calls: sample around a command (or until Ctrl-C), or replay a trace.

The command runs as a child process (:mod:`gpumatch.telemetry.child`). A stop signal (SIGINT, SIGTERM,
SIGHUP) is recorded and forwarded to it; the sampler stops after the child has exited (killed after
:data:`~gpumatch.telemetry.child.GRACE_S` if it does not), and the trace keeps everything sampled up to
then. Exit codes follow the shell: a child killed by signal N gives 128 + N.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError
from gpumatch.telemetry.child import GRACE_S, Child, StopSignals, spawn
from gpumatch.telemetry.device import Backend
from gpumatch.telemetry.fake import FakeBackend, VirtualClock
from gpumatch.telemetry.sampler import Sampler
from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import Sample
from gpumatch.telemetry.verdict import GpuVerdict, analyze


@dataclass(frozen=True)
class MonitorResult:
    """The trace, its per-GPU verdicts, and how the command ended (None when there was none).

    ``signal`` is the stop signal that ended the monitoring (its number), None when the command ended
    by itself; ``interrupted`` is True when a signal (or a KeyboardInterrupt) ended it."""

    trace: Trace
    verdicts: list[GpuVerdict]
    exit_code: int | None
    interrupted: bool
    command: list[str] = field(default_factory=list)
    signal: int | None = None

    @property
    def signal_name(self) -> str | None:
        return None if self.signal is None else signal_name(self.signal)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
            "stopped_by": self.signal_name,
            "duration_s": self.trace.duration_s,
            "n_samples": len(self.trace.samples),
            "interval_s": self.trace.interval_s,
            "sampler": self.trace.stats.__dict__,
            "gpus": [v.to_dict() for v in self.verdicts],
            "xid_events": [x.__dict__ for x in self.trace.xid_events],
        }


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _shell_code(code: int) -> int:
    return 128 - code if code < 0 else code


_TICK_S = 0.1
"""How often the wait loop looks at the child and at stop signals (seconds)."""


def monitor_command(
    backend: Backend,
    command: Sequence[str] | None,
    interval_s: float = 0.1,
    on_samples: Callable[[list[Sample]], None] | None = None,
    flush_every_s: float = 2.0,
    *,
    stop: StopSignals | None = None,
    grace_s: float = GRACE_S,
) -> MonitorResult:
    """Sample ``backend`` while ``command`` runs (or, without one, until a stop signal or KeyboardInterrupt).

    ``on_samples`` receives the new samples every ``flush_every_s`` and once at the end, so a caller
    can save them as the run goes (a killed monitor keeps what it had saved). ``stop`` catches SIGINT,
    SIGTERM and SIGHUP and forwards them to the command (a caller that saves after this returns passes
    its own, installed around both); without it one is installed for this call. A command still alive
    ``grace_s`` after a stop signal is killed.
    """
    sampler = Sampler(backend, interval_s, meta={"command": list(command or [])})
    flushed = 0

    def flush() -> None:
        nonlocal flushed
        new = sampler.samples_since(flushed)
        if new and on_samples is not None:
            on_samples(new)
        flushed += len(new)

    own = stop is None
    signals = StopSignals() if stop is None else stop
    code: int | None = None
    interrupted = False
    child: Child | None = None
    with signals if own else contextlib.nullcontext(signals):
        sampler.start()
        try:
            child = spawn(command) if command else None
            signals.attach(child)
            _wait_loop(child, signals, flush, flush_every_s, grace_s)
            code = None if child is None else _shell_code(child.proc.returncode)
            if child is not None and signals.received is not None:
                child.end_stragglers()
        except KeyboardInterrupt:  # no handler installed (not the main thread), or during spawn
            interrupted = True
            if child is not None:
                code = _shell_code(_reap(child.proc))
        finally:
            signals.attach(None)
            trace = sampler.stop()
            flush()
    received = signals.received
    return MonitorResult(trace, analyze(trace), code, interrupted or received is not None, list(command or []),
                         signal=received)


def _wait_loop(child: Child | None, signals: StopSignals, flush: Callable[[], None], flush_every_s: float,
               grace_s: float) -> None:
    """Until the child exits (without one: until a stop signal), flushing every ``flush_every_s``."""
    last = time.monotonic()
    killed = False
    while True:
        if child is None:
            if signals.received is not None:
                return
            time.sleep(_TICK_S)
        else:
            _wait(child.proc, _TICK_S)
            if child.proc.poll() is not None:
                return
            if not killed and signals.overdue(grace_s):
                child.kill()
                killed = True
        if time.monotonic() - last >= flush_every_s:
            flush()
            last = time.monotonic()


def _wait(proc: subprocess.Popen[bytes], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)


def _reap(proc: subprocess.Popen[bytes]) -> int:
    """Wait for a child that also got Ctrl-C; terminate it if it has not ended within 10 s."""
    try:
        return proc.wait(timeout=GRACE_S)
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
