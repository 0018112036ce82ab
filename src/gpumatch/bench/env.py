"""The environment a measurement ran in: card, driver, CUDA, torch, clocks, power limit.

Reads ``nvidia-smi --query-gpu`` through :mod:`gpumatch.telemetry.smi` (no pynvml here: only telemetry.nvml
imports it) and torch's own version strings. Never changes any setting of the card.
"""

from __future__ import annotations

import datetime as _dt
import platform
import sys
from typing import Any

import torch

from gpumatch.telemetry.manifest import cpu_model
from gpumatch.telemetry.smi import query

_SMI_FIELDS = (
    "name", "uuid", "driver_version", "memory.total", "power.limit", "power.default_limit",
    "enforced.power.limit", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
    "temperature.gpu", "persistence_mode", "pstate", "pcie.link.gen.current", "pcie.link.width.current",
)


def nvidia_smi(fields: tuple[str, ...] = _SMI_FIELDS) -> list[dict[str, str]]:
    """One dict per GPU from ``nvidia-smi --query-gpu`` (:func:`gpumatch.telemetry.smi.query`); empty when
    nvidia-smi is absent or fails."""
    return query(fields)


def _cudnn_version() -> int | None:
    cudnn: Any = torch.backends.cudnn
    return int(cudnn.version()) if cudnn.is_available() else None


def environment() -> dict[str, Any]:
    """Software and card description for a results file (UTC time, versions, nvidia-smi fields)."""
    env: dict[str, Any] = {
        "utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
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
