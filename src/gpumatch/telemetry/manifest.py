"""The environment manifest: what ran where, frozen into a dict with a stable hash.

Contents (benchmark-method.md section 4.8): gpumatch version and git commit; host (CPU model and
count, governor, NUMA nodes, kernel, OS, Python); software (torch, nvidia-ml-py, numpy versions read
with importlib.metadata, never by importing them; the torch CUDA build and arch list when a probe
ran); driver, CUDA driver and NVML versions; per GPU the name, UUID, serial, VBIOS, PCI bus id,
compute capability, memory, power limits, max and application clocks, ECC, MIG, persistence, PCIe
maxima and temperature thresholds.

``manifest_hash`` is the SHA-256 of the canonical JSON of everything except the volatile keys
(:data:`VOLATILE_KEYS`: capture time, hostname, the current PCIe link, which drops at idle, and
health flags that change without any configuration change). Two runs with equal hashes ran on the
same cards with the same settings and software.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from gpumatch.errors import DataFileError
from gpumatch.files import read_text
from gpumatch.telemetry.device import Backend
from gpumatch.telemetry.probe import TorchBuild
from gpumatch.telemetry.trace import Trace

VOLATILE_KEYS = frozenset({"captured_utc", "hostname", "pcie_gen", "pcie_width", "retired_pages_pending",
                           "manifest_hash"})


def _pkg_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _read(path: str) -> str | None:
    try:
        return read_text(path, path, 8_000_000).strip()  # /proc/cpuinfo of a 256-core host is ~0.5 MB
    except DataFileError:  # gpumatch.files: missing, unreadable, not a regular file, not UTF-8, over 8 MB
        return None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform reports."""
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def host_facts() -> dict[str, Any]:
    nodes = [p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*")]
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "numa_nodes": len(nodes) or None,
        "kernel": platform.release(),
        "os": platform.system(),
        "python": platform.python_version(),
    }


def git_commit(start: Path | None = None) -> dict[str, Any]:
    """The gpumatch checkout's commit and whether it has uncommitted changes (None when not a checkout)."""
    here = (start or Path(__file__)).resolve()
    root = next((p for p in here.parents if (p / ".git").exists()), None)
    if root is None:
        return {"commit": None, "dirty": None}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    commit = head.stdout.strip() or None if head.returncode == 0 else None
    return {"commit": commit, "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


def software_facts(torch: TorchBuild | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {name: _pkg_version(name) for name in ("torch", "nvidia-ml-py", "numpy", "pynvml")}
    if torch is not None:
        out["torch_cuda_build"] = torch.cuda
        out["torch_arch_list"] = list(torch.arch_list)
    return out


def build_manifest(backend: Backend | None, torch: TorchBuild | None = None) -> dict[str, Any]:
    """The manifest of this machine now (``backend`` None: no GPU/NVML here)."""
    from gpumatch import __version__

    m: dict[str, Any] = {
        "captured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "gpumatch": {"version": __version__, **git_commit()},
        "host": host_facts(),
        "software": software_facts(torch),
        "driver": backend.system().to_dict() if backend is not None else None,
        "gpus": [d.info().to_dict() for d in backend.devices()] if backend is not None else [],
    }
    m["manifest_hash"] = manifest_hash(m)
    return m


def trace_manifest(trace: Trace) -> dict[str, Any]:
    """The manifest of a replayed trace: the recorded driver and GPUs (not this machine's)."""
    m: dict[str, Any] = {
        "captured_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "replay_of": {k: v for k, v in trace.meta.items() if isinstance(v, str | int | float)},
        "driver": trace.system.to_dict(),
        "gpus": [d.to_dict() for d in trace.devices],
    }
    m["manifest_hash"] = manifest_hash(m)
    return m


def _strip(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if k not in VOLATILE_KEYS}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    return o


def manifest_hash(manifest: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the manifest without its volatile keys."""
    canon = json.dumps(_strip(manifest), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()
