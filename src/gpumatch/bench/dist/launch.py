"""Start a distributed benchmark under torchrun and collect each rank's JSON (no torch in this process).

This module is the launcher-independent part (the environment with NVLink multicast off, the device and backend,
the rank files, stopping the process tree); the command line that starts the ranks is
:mod:`gpumatch.bench.dist.torchrun`'s (another launcher, e.g. Slurm's ``srun``, is a module beside it).

``launch`` runs ``python -m torch.distributed.run`` (torchrun,
https://pytorch.org/docs/stable/elastic/run.html) with :mod:`gpumatch.bench.dist.worker` as the module: one
node (``--standalone``, a local rendezvous on a free port) or several through the c10d rendezvous at
``rdzv_endpoint`` (``host:port``, the same on every node; run ``launch`` on each node, e.g. one Slurm task per
node or one Kubernetes pod per node). Its environment ALWAYS switches NVLink multicast (NVLS) off, as the
device machines require: ``NCCL_NVLS_ENABLE=0`` (NCCL env docs), ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` (torch
symmetric memory), ``NVSHMEM_DISABLE_NVLS=1`` (NVSHMEM env docs); on the CPU also ``OMP_NUM_THREADS=1`` so N
ranks do not oversubscribe the cores. torchrun's ranks inherit that environment.

torchrun starts each rank in a session of its own, so killing torchrun's process group alone would orphan them:
on a timeout or Ctrl-C the launcher sends SIGTERM to torchrun's group and to every descendant's group
(found through ``/proc``), waits :data:`KILL_GRACE_S`, then SIGKILLs whatever is left, and raises
:class:`~gpumatch.errors.DistLaunchError` (KeyboardInterrupt is re-raised). Wall times are host seconds
(``time.monotonic``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.bench.dist.spec import DistSpec
from gpumatch.files import tail_text
from gpumatch.errors import DistLaunchError, InputError

WORKER_MODULE = "gpumatch.bench.dist.worker"
SPEC_FILE = "spec.json"
LOG_FILE = "launch.log"
KILL_GRACE_S = 3.0
"""Seconds between SIGTERM and SIGKILL when a launch is stopped."""
LOG_TAIL_CHARS = 4000

NVLS_OFF: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
"""NVLink multicast off, in every environment the launcher builds (module docstring)."""

DEVICES = ("auto", "cuda", "cpu")


@dataclass(frozen=True)
class LaunchResult:
    """One finished launch: ``ranks`` are the parsed ``rank-{r}.json`` sorted by rank; ``wall_s`` seconds from
    start to torchrun's exit; ``log_tail`` the end of torchrun's combined output."""

    nprocs: int
    backend: str
    device: str
    ranks: list[dict[str, Any]]
    returncode: int
    log_tail: str
    wall_s: float


def child_env(device: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment torchrun (and so every rank) gets: ``base`` (default ``os.environ``), NVLS off, this
    gpumatch's source folder first on PYTHONPATH, and ``OMP_NUM_THREADS=1`` on the CPU unless already set."""
    env = dict(os.environ if base is None else base)
    env.update(NVLS_OFF)
    src = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([src, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]])
    if device == "cpu":
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def visible_gpus() -> int:
    """CUDA devices torch sees in a child process (honours CUDA_VISIBLE_DEVICES); 0 without torch or CUDA."""
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             check=False, env=child_env("cpu"))
    except (OSError, subprocess.TimeoutExpired):
        return 0
    try:
        return int(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def resolve_device(device: str, nprocs: int) -> tuple[str, str]:
    """(device, backend): ``auto`` is cuda when a GPU is visible, else cpu; nccl on cuda, gloo on cpu.
    More ranks per node than visible GPUs on cuda is an input error."""
    if device not in DEVICES:
        raise InputError(f"unknown device {device!r}", f"one of {', '.join(DEVICES)}")
    if nprocs < 1:
        raise InputError(f"nprocs must be >= 1, not {nprocs}", "give the ranks per node")
    if device == "cpu":
        return "cpu", "gloo"
    gpus = visible_gpus()
    if device == "auto" and gpus == 0:
        return "cpu", "gloo"
    if nprocs > gpus:
        raise InputError(f"{nprocs} ranks per node but {gpus} visible GPU(s)",
                         "lower nprocs, set CUDA_VISIBLE_DEVICES, or use device cpu")
    return "cuda", "nccl"


def launch(spec: DistSpec, nprocs: int, *, out_dir: Path, device: str = "auto", timeout_s: float = 600.0,
           nnodes: int = 1, rdzv_endpoint: str | None = None, module: str = WORKER_MODULE) -> LaunchResult:
    """Run ``spec`` on ``nprocs`` ranks per node (``nnodes`` nodes) and return every rank's JSON.

    Writes ``out_dir/spec.json``, ``out_dir/launch.log`` and (the ranks) ``out_dir/rank-{r}.json``. A non-zero
    exit, a missing rank file or ``timeout_s`` seconds passing raise DistLaunchError with the log's tail.
    ``module`` replaces the worker module (tests use it). With several nodes ``out_dir`` should be shared for
    every rank's file to arrive; at least this node's ``nprocs`` are required.
    """
    if nnodes < 1 or timeout_s <= 0:
        raise InputError(f"nnodes {nnodes} / timeout {timeout_s} s must be positive", "give values > 0")
    spec.check_world(nprocs * nnodes)
    dev, backend = resolve_device(device, nprocs)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("rank-*.json"):
        stale.unlink()
    spec_path = out_dir / SPEC_FILE
    spec_path.write_text(json.dumps(spec.to_json(), indent=1))
    from gpumatch.bench.dist.torchrun import torchrun_command

    cmd = torchrun_command(nprocs, nnodes, rdzv_endpoint, [str(spec_path), str(out_dir), dev, backend], module)
    log_path = out_dir / LOG_FILE
    t0 = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=child_env(dev), start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_tree(proc)
            tail = tail_text(log_path, LOG_TAIL_CHARS)
            raise DistLaunchError(f"distributed {spec.workload} on {nprocs} rank(s) ran past {timeout_s:g} s and "
                                  f"was killed; log tail:\n{tail}", "raise the timeout or shrink the spec",
                                  None, tail) from None
        except BaseException:
            stop_tree(proc)
            raise
    wall = time.monotonic() - t0
    tail = tail_text(log_path, LOG_TAIL_CHARS)
    if rc != 0:
        raise DistLaunchError(f"distributed {spec.workload} on {nprocs} rank(s) failed (torchrun exit {rc}); "
                              f"log tail:\n{tail}", f"full log: {log_path}", rc, tail)
    ranks = _read_ranks(out_dir)
    want = nprocs * nnodes if nnodes == 1 else nprocs
    if len(ranks) < want:
        raise DistLaunchError(f"distributed {spec.workload}: {len(ranks)} of {want} rank files written; "
                              f"log tail:\n{tail}", f"full log: {log_path}", rc, tail)
    return LaunchResult(nprocs=nprocs, backend=backend, device=dev, ranks=ranks, returncode=rc, log_tail=tail,
                        wall_s=wall)


def _read_ranks(out_dir: Path) -> list[dict[str, Any]]:
    ranks: list[dict[str, Any]] = []
    for path in out_dir.glob("rank-*.json"):
        try:
            ranks.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise DistLaunchError(f"rank file {path} unreadable: {exc}", "see launch.log beside it") from exc
    return sorted(ranks, key=lambda r: int(r.get("rank", 0)))


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``; empty elsewhere), parents before children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # field 4 (ppid) follows the ")" that closes the command name, which may itself hold spaces
        fields = stat[stat.rfind(")") + 2:].split()
        with contextlib.suppress(ValueError, IndexError):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)  # a group led by pid (torchrun's ranks lead their own sessions)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_tree(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM torchrun's group and every descendant's group, then SIGKILL after ``grace_s`` what remains."""
    pids = [proc.pid, *descendants(proc.pid)]
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    pids += [p for p in descendants(proc.pid) if p not in pids]
    _signal_all(pids, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
