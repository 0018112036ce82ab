"""The torchrun launcher: environment, command line, input errors, and the kill on a timeout."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpumatch.bench.dist.launch import NVLS_OFF, child_env, launch, resolve_device
from gpumatch.bench.dist.torchrun import torchrun_command
from gpumatch.bench.dist.spec import DistSpec
from gpumatch.errors import DistLaunchError, GpumatchError, InputError

SLEEPER = '''
import os, sys, time
from pathlib import Path
Path(sys.argv[2], "pid-" + os.environ["RANK"]).write_text(str(os.getpid()))
time.sleep(600)
'''

FAILER = '''
import os, sys
print("rank", os.environ["RANK"], "NCCL_NVLS_ENABLE=" + os.environ.get("NCCL_NVLS_ENABLE", "unset"), flush=True)
sys.exit(3)
'''


def test_env_always_turns_nvls_off() -> None:
    env = child_env("cuda", {"NCCL_NVLS_ENABLE": "1", "PATH": "/bin"})
    assert {k: env[k] for k in NVLS_OFF} == NVLS_OFF
    assert "OMP_NUM_THREADS" not in env
    assert child_env("cpu", {})["OMP_NUM_THREADS"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[0].endswith("src")


def test_command_lines() -> None:
    one = torchrun_command(2, 1, None, ["a"])
    assert "--standalone" in one and one[-3:] == ["--module", "gpumatch.bench.dist.worker", "a"]
    multi = torchrun_command(8, 2, "head:29500", [])
    assert multi[multi.index("--rdzv-endpoint") + 1] == "head:29500" and "--standalone" not in multi
    with pytest.raises(InputError):
        torchrun_command(8, 2, None, [])


def test_device_errors() -> None:
    assert resolve_device("cpu", 4) == ("cpu", "gloo")
    with pytest.raises(InputError):
        resolve_device("tpu", 1)
    with pytest.raises(InputError):
        resolve_device("cpu", 0)


def test_distlaunch_error_is_a_gpumatch_error() -> None:
    assert issubclass(DistLaunchError, GpumatchError)


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    (tmp_path / "mods").mkdir(exist_ok=True)
    (tmp_path / "mods" / f"{name}.py").write_text(text)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'mods'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_timeout_kills_every_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, monkeypatch, "gm_sleeper", SLEEPER)
    out = tmp_path / "out"
    t0 = time.monotonic()
    with pytest.raises(DistLaunchError, match="ran past 6 s") as info:
        launch(DistSpec("collectives"), 2, out_dir=out, device="cpu", timeout_s=6, module="gm_sleeper")
    assert time.monotonic() - t0 < 6 + 8  # the timeout, the kill grace (3 s) and the wait for exit
    assert info.value.returncode is None
    pids = [int(p.read_text()) for p in out.glob("pid-*")]
    assert len(pids) == 2
    deadline = time.monotonic() + 2
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def test_failure_raises_with_log_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(tmp_path, monkeypatch, "gm_failer", FAILER)
    with pytest.raises(DistLaunchError, match="failed") as info:
        launch(DistSpec("collectives"), 2, out_dir=tmp_path / "out", device="cpu", timeout_s=60, module="gm_failer")
    assert info.value.returncode not in (0, None)
    assert "NCCL_NVLS_ENABLE=0" in info.value.log_tail


DRIVER = '''
import sys
from pathlib import Path
from gpumatch.bench.dist.launch import launch
from gpumatch.bench.dist.spec import DistSpec
try:
    launch(DistSpec("collectives"), 2, out_dir=Path(sys.argv[1]), device="cpu", timeout_s=120, module="gm_sleeper")
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
'''


def test_ctrl_c_kills_every_rank_and_reraises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal
    import subprocess
    import sys

    _module(tmp_path, monkeypatch, "gm_sleeper", SLEEPER)
    out = tmp_path / "out"
    (tmp_path / "driver.py").write_text(DRIVER)
    proc = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(out)], stdout=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        while len(list(out.glob("pid-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in out.glob("pid-*")]
        assert len(pids) == 2
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted" in stdout
    assert not any(_alive(p) for p in pids)
