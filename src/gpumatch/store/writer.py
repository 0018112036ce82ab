"""Who wrote a run, and whether that process is still alive.

A run records its writer (host, pid, the pid's start time, the boot id and the PID namespace on Linux).
A run still marked ``running`` whose writer is provably gone on this host (process exited, pid reused
by another process, or the machine rebooted) reads as ``interrupted``. On another host, in another PID
namespace (a container), or where liveness cannot be proven either way, it reads as ``running``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from gpumatch.errors import DataFileError
from gpumatch.files import read_bytes


def _read(path: str) -> str | None:
    try:
        return read_bytes(path, path, 1_000_000).decode("ascii", errors="replace").strip()
    except DataFileError:  # gpumatch.files: missing, unreadable, not a regular file, over 1 MB
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (field 3 = state onwards), or None."""
    text = _read(f"/proc/{pid}/stat")
    if text is None or ")" not in text:
        return None
    return text.rsplit(")", 1)[1].split()


def _start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22; proc(5))."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def _pid_namespace() -> str | None:
    """The PID namespace (``pid:[inode]``): pids of a container mean nothing outside it (namespaces(7))."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def current_writer() -> dict[str, Any]:
    """Identity of this process, stored with every run it begins."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "pid_start_ticks": _start_ticks(pid),
        "boot_id": _boot_id(),
        "pid_namespace": _pid_namespace(),
    }


def _boot_id() -> str | None:
    return _read("/proc/sys/kernel/random/boot_id")


def writer_alive(writer: dict[str, Any]) -> bool | None:
    """True/False when this host can tell whether ``writer`` still runs; None when it cannot."""
    if writer.get("host") != socket.gethostname():
        return None
    boot = _boot_id()
    if boot is not None and writer.get("boot_id") not in (None, boot):
        return False  # the machine rebooted since
    if writer.get("pid_namespace") != _pid_namespace():
        return None  # another container (or an older record): its pids are not ours to check
    pid = writer.get("pid")
    if not isinstance(pid, int):
        return None
    fields = _stat_fields(pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):  # zombie or dead: exited, not yet reaped
            return False
        want = writer.get("pid_start_ticks")
        return want is None or len(fields) <= 19 or int(fields[19]) == want
    if Path("/proc/self/stat").exists():
        return False  # procfs works here and the pid has no entry: gone
    if os.name == "nt":
        return None  # os.kill(pid, 0) would send CTRL_C_EVENT on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists but belongs to someone else
    return True
