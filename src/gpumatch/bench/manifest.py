"""What only torch can tell of a machine, added to the one machine manifest (:mod:`gpumatch.telemetry.manifest`).

``gpumatch bench run`` and ``bench scale`` describe their machine in a child process (the parent never imports
torch): :func:`collect` is :func:`gpumatch.telemetry.manifest.machine_manifest` (host, software, GPUs from
nvidia-smi) with :func:`torch_fields` and the run's own fields merged in, as one
:class:`~gpumatch.telemetry.manifest.Manifest`. Sources here: torch's version strings (CUDA, cuDNN, NCCL), the
installed ``nvidia-*`` wheels for cuBLAS (torch does not report the cuBLAS it loads) and
``torch.cuda.get_device_properties``. A field the machine cannot tell is ``None``. Standard library and torch
only (the device has no pydantic).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from gpumatch.telemetry.manifest import Manifest, machine_manifest


def _wheel(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _software() -> dict[str, Any]:
    import torch

    cudnn: Any = torch.backends.cudnn
    nccl: Any = None
    try:
        if torch.cuda.is_available():
            nccl = ".".join(str(x) for x in torch.cuda.nccl.version())  # type: ignore[no-untyped-call]
    except (AttributeError, RuntimeError, TypeError):
        nccl = None
    return {
        "software.torch": torch.__version__, "software.cuda": torch.version.cuda,
        "software.cudnn": int(cudnn.version()) if cudnn.is_available() else None, "software.nccl": nccl,
        "software.cublas": _wheel("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas"),
    }


def _device() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"device.kind": "cpu", "device.capability": None, "device.name": platform.processor() or "cpu"}
    props = torch.cuda.get_device_properties(0)
    return {"device.kind": "cuda", "device.capability": f"{props.major}.{props.minor}", "device.name": props.name,
            "device.multiprocessors": int(props.multi_processor_count)}


def torch_fields() -> dict[str, Any]:
    """``software.torch`` (torch's own version string), ``cuda``, ``cudnn``, ``nccl``, ``cublas`` and torch's
    view of device 0 (``device.kind`` ``cuda``/``cpu``, ``capability``, ``name``, ``multiprocessors``)."""
    return {**_software(), **_device()}


def collect(run: Mapping[str, Any]) -> Manifest:
    """The machine manifest with :func:`torch_fields` and ``run``'s own fields (``suite.name``, ``suite.tiny``,
    ``model.name``, ``model.architecture``, ``run.precisions``, ``run.seed``...; JSON values) merged in."""
    return machine_manifest().merged({**torch_fields(), **run})


def collect_case(case: dict[str, Any]) -> dict[str, Any]:
    """:func:`collect` as a child-process target (``{"run": {...}}`` in, the manifest's fields out)."""
    return collect(dict(case.get("run", {}))).to_dict()
