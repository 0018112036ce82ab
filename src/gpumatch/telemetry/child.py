"""The command ``gpumatch monitor`` runs, and the stop signals (SIGINT, SIGTERM, SIGHUP) it passes on.

A stop signal must not kill the monitor before the command: the command would run on unmeasured, the
run would stay ``running`` and the last samples would be lost. So while :class:`StopSignals` is
installed, a stop signal is recorded and forwarded, the monitor waits for the command to end (at most
:data:`GRACE_S`, then SIGKILL), saves everything and exits 128 + the signal number. How it is forwarded
depends on where gpumatch runs (the choice GNU ``timeout`` makes with and without ``--foreground``):

- **Batch** (stdin is not a terminal, or gpumatch is not in the terminal's foreground process group:
  a job script, ``nohup``, systemd, a container): the command gets its own process group, and every stop
  signal is sent to that whole group, so a shell script's children stop too.
- **Interactive** (gpumatch in the terminal's foreground group): the command stays in gpumatch's group,
  so it can read the terminal, and Ctrl-C (or a hang-up) reaches it from the terminal directly; sending it
  again would make it a second Ctrl-C, which many programs take as "quit now, skip the cleanup". Only
  SIGTERM, which a terminal never sends, is forwarded, to the command's pid.

After a stop signal the command has :data:`GRACE_S` to exit, then it (its group in batch mode) is
SIGKILLed; in batch mode what is left of its group when it has exited gets SIGTERM (a shell's background
jobs ignore SIGINT and would run on).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any

from gpumatch.errors import InputError

GRACE_S = 10.0
"""Seconds a command has to exit after a stop signal before it (its process group in batch mode) is killed."""

STOP_SIGNALS: tuple[int, ...] = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if isinstance(s, int)
)


def interactive() -> bool:
    """True when gpumatch is in the foreground process group of the terminal on stdin."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except (OSError, AttributeError):
        return False


class Child:
    """The monitored command: a ``Popen`` and whether it leads a process group of its own."""

    def __init__(self, proc: subprocess.Popen[bytes], own_group: bool) -> None:
        self.proc = proc
        self.own_group = own_group

    def forward(self, signum: int) -> None:
        """Pass a stop signal on (see the module docstring for which and to whom)."""
        if self.own_group:
            self._send(signum)
        elif signum == getattr(signal, "SIGTERM", None):
            self._send(signum, group=False)

    def end_stragglers(self) -> None:
        """After a stop signal, once the command itself has exited: SIGTERM what is left of its process group
        (batch mode; e.g. a shell's background job, which ignores SIGINT) so nothing of it runs on unmeasured."""
        if self.own_group:
            self._send(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the command (its process group in batch mode): it outlived :data:`GRACE_S`."""
        self._send(getattr(signal, "SIGKILL", signal.SIGTERM))

    def _send(self, signum: int, group: bool = True) -> None:
        if self.proc.poll() is not None and not self.own_group:
            return  # gone, and its pid may be reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group and self.own_group:
                os.killpg(self.proc.pid, signum)  # the group id is the leader's pid (setpgid(0, 0))
            else:
                self.proc.send_signal(signum)


def spawn(command: Sequence[str]) -> Child:
    """Start ``command``; in batch mode as the leader of a new process group (see the module docstring)."""
    own_group = os.name == "posix" and not interactive()
    try:
        proc = subprocess.Popen(list(command), process_group=0) if own_group else subprocess.Popen(list(command))
    except FileNotFoundError as e:
        raise InputError(f"command not found: {command[0]}", "check the name and PATH (the command goes after "
                         "'--', e.g. gpumatch monitor -- python train.py)") from e
    except PermissionError as e:
        raise InputError(f"cannot run {command[0]}: permission denied", "make it executable") from e
    return Child(proc, own_group)


class StopSignals:
    """A context manager that turns stop signals into a flag (and forwards them to an attached child).

    Installed only in the main thread (Python delivers signals there); elsewhere it installs nothing and
    the default behaviour (KeyboardInterrupt) stays. ``received`` is the first stop signal, ``at`` when.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.at: float | None = None
        self.count = 0
        self._child: Child | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                with contextlib.suppress(OSError, ValueError):
                    self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        for s, previous in self._previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(s, previous)
        self._previous.clear()

    @property
    def installed(self) -> bool:
        return bool(self._previous)

    def attach(self, child: Child | None) -> None:
        self._child = child
        if child is not None and self.received is not None:  # arrived while the command was starting
            child.forward(self.received)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.received is None:
            self.received, self.at = signum, time.monotonic()
        if self._child is not None:
            self._child.forward(signum)

    def overdue(self, grace_s: float) -> bool:
        """A stop signal came more than ``grace_s`` ago (the child should be killed)."""
        return self.at is not None and time.monotonic() - self.at > grace_s
