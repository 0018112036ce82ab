"""The environment a measurement ran in: card, driver, CUDA, torch, clocks, power limit.

Reads ``nvidia-smi --query-gpu`` through a subprocess (no pynvml here: only telemetry.nvml imports it)
and torch's own version strings. Never changes any setting of the card.
"""

from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
import sys
from typing import Any

import torch

_SMI_FIELDS = (
    "name", "uuid", "driver_version", "memory.total", "power.limit", "power.default_limit",
    "enforced.power.limit", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
    "temperature.gpu", "persistence_mode", "pstate", "pcie.link.gen.current", "pcie.link.width.current",
)


def nvidia_smi(fields: tuple[str, ...] = _SMI_FIELDS) -> list[dict[str, str]]:
    """One dict per GPU from ``nvidia-smi --query-gpu``; empty when nvidia-smi is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    rows = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        rows.append(dict(zip(fields, parts, strict=False)))
    return rows


def _cpu_model() -> str:
    """The host CPU's model name (/proc/cpuinfo), which sets eager-dispatch speed; '' where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _cudnn_version() -> int | None:
    cudnn: Any = torch.backends.cudnn
    return int(cudnn.version()) if cudnn.is_available() else None


def environment() -> dict[str, Any]:
    """Software and card description for a results file (UTC time, versions, nvidia-smi fields)."""
    env: dict[str, Any] = {
        "utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": _cudnn_version(),
        "cuda_available": torch.cuda.is_available(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=props.name,
            gpu_memory_bytes=int(props.total_memory),
            multiprocessors=int(props.multi_processor_count),
            compute_capability=f"{props.major}.{props.minor}",
            l2_cache_bytes=int(getattr(props, "L2_cache_size", 0)),
        )
        try:
            import triton  # type: ignore[import-not-found,unused-ignore]

            env["triton"] = triton.__version__
        except ImportError:
            env["triton"] = None
    env["nvidia_smi"] = nvidia_smi()
    return env
