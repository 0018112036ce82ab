"""Is the process that began a run still alive? (decides 'running' vs 'interrupted' on read)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpumatch.store.writer import current_writer, writer_alive

linux = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_this_process_is_alive() -> None:
    assert writer_alive(current_writer()) is True


@linux
def test_exited_process_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert writer_alive(current_writer() | {"pid": proc.pid}) is False


@linux
def test_reused_pid_is_gone() -> None:
    me = current_writer()
    assert writer_alive(me | {"pid_start_ticks": me["pid_start_ticks"] - 1}) is False


@linux
def test_reboot_means_gone() -> None:
    assert writer_alive(current_writer() | {"boot_id": "00000000-0000-0000-0000-000000000000"}) is False


def test_other_host_or_container_cannot_tell() -> None:
    assert writer_alive(current_writer() | {"host": "some-other-host", "pid": 1}) is None
    assert writer_alive(current_writer() | {"pid_namespace": "pid:[1]"}) is None
    assert writer_alive(current_writer() | {"pid": "12"}) is None
