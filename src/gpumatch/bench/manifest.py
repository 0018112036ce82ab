"""The frozen, hashed environment manifest of a benchmark run (``gpumatch bench run``).

One flat mapping of dotted names (``gpu.name``, ``software.torch``, ``host.kernel`` ...) to JSON scalars, so two
runs compare field by field. :data:`PERFORMANCE_FIELDS` names the fields that change the numbers a suite
measures: ``gpumatch bench compare`` refuses (or, with ``--force``, flags) two runs that differ in any of them.
The hash is SHA-256 of the canonical JSON (``sort_keys``, ``(",", ":")`` separators, UTF-8), the same rule the
results store keys manifests by (docs/store.md), so the manifest's ``sha256`` is its key in the store.

Sources: ``nvidia-smi --query-gpu`` (driver, VBIOS, UUID, power limits, clocks, ECC, MIG, PCIe; no pynvml here:
only ``gpumatch.telemetry.nvml`` imports it), torch's version strings (CUDA, cuDNN, NCCL), the installed
``nvidia-*`` wheels for cuBLAS (torch does not report the cuBLAS it loads), ``/proc/cpuinfo`` and ``uname``.
A field the machine cannot tell is ``None``. Standard library and torch only (the device has no pydantic).
"""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Any

SCHEMA = "gpumatch.bench.manifest/1"

_SMI = {  # manifest name -> nvidia-smi --query-gpu field
    "gpu.name": "name", "gpu.uuid": "uuid", "gpu.vbios": "vbios_version", "gpu.driver": "driver_version",
    "gpu.memory_total_mib": "memory.total", "gpu.power_limit_w": "power.limit",
    "gpu.power_default_limit_w": "power.default_limit", "gpu.power_enforced_limit_w": "enforced.power.limit",
    "gpu.clocks_max_sm_mhz": "clocks.max.sm", "gpu.clocks_max_mem_mhz": "clocks.max.mem",
    "gpu.clocks_app_sm_mhz": "clocks.applications.graphics", "gpu.persistence_mode": "persistence_mode",
    "gpu.ecc_mode": "ecc.mode.current", "gpu.mig_mode": "mig.mode.current", "gpu.compute_mode": "compute_mode",
    "gpu.pcie_gen_max": "pcie.link.gen.max", "gpu.pcie_width_max": "pcie.link.width.max",
    "gpu.pcie_gen_current": "pcie.link.gen.current", "gpu.pcie_width_current": "pcie.link.width.current",
}

PERFORMANCE_FIELDS: tuple[str, ...] = (
    "gpu.name", "gpu.driver", "gpu.vbios", "gpu.power_enforced_limit_w", "gpu.clocks_max_sm_mhz",
    "gpu.clocks_max_mem_mhz", "gpu.clocks_app_sm_mhz", "gpu.ecc_mode", "gpu.mig_mode", "gpu.pcie_gen_max",
    "gpu.pcie_width_max", "gpu.count", "software.torch", "software.cuda", "software.cudnn", "software.nccl",
    "software.cublas", "device.kind", "suite.name", "suite.tiny", "model.name", "model.architecture",
    "run.precisions",
)
"""Fields whose difference makes two runs' numbers incomparable (``bench compare`` names them). Left out on
purpose: the UUID and serial (two cards of one SKU are what a comparison is for), the CPU model and kernel
(recorded; they move launch-bound numbers, which the report shows, but do not make a GEMM incomparable), the
current PCIe link (it drops at idle), the time and the gpumatch version."""


@dataclass(frozen=True)
class Manifest:
    """An immutable manifest: ``fields`` (dotted name -> JSON scalar) and its SHA-256."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    @property
    def sha256(self) -> str:
        return manifest_hash(self.fields)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.fields)


def manifest_hash(fields: Mapping[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``fields`` (the results store's manifest key)."""
    text = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def differing_fields(a: Mapping[str, Any], b: Mapping[str, Any],
                     names: tuple[str, ...] = PERFORMANCE_FIELDS) -> list[str]:
    """The ``names`` whose values differ between manifests ``a`` and ``b`` (a field missing in one counts)."""
    return [n for n in names if a.get(n) != b.get(n)]


def _number(text: str | None) -> Any:
    if text is None or text.strip() in ("", "[N/A]", "N/A", "[Not Supported]"):
        return None
    try:
        value = float(text)
    except ValueError:
        return text.strip()
    return int(value) if value.is_integer() else value


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
        "software.python": platform.python_version(), "software.gpumatch": _gpumatch_version(),
    }


def _gpumatch_version() -> str:
    import gpumatch

    return str(gpumatch.__version__)


def _gpus() -> dict[str, Any]:
    """The ``gpu.*`` fields of GPU 0 and the count. One query; if nvidia-smi refuses it (a driver that does not
    know one field refuses the whole query), one query per field, so the others are still recorded."""
    from gpumatch.bench.env import nvidia_smi  # imports torch: only where a manifest is collected

    rows = nvidia_smi(tuple(_SMI.values()))
    count = len(rows)
    if not rows and shutil.which("nvidia-smi"):
        per_field = {smi: nvidia_smi((smi,)) for smi in _SMI.values()}
        count = max((len(r) for r in per_field.values()), default=0)
        rows = [{smi: got[0].get(smi, "") for smi, got in per_field.items() if got}]
    out: dict[str, Any] = {"gpu.count": count}
    first = rows[0] if rows else {}
    for name, smi in _SMI.items():
        text = first.get(smi)
        out[name] = _number(text) if name in _NUMERIC else _text(text)
    return out


_NUMERIC = frozenset(n for n in _SMI if n.endswith(("_mib", "_w", "_mhz")) or n.startswith("gpu.pcie_"))
"""Fields read as numbers; the others (name, UUID, VBIOS, driver version "580.10", modes) stay strings."""


def _text(text: str | None) -> str | None:
    value = _number(text)
    return None if value is None else text.strip() if text is not None else None


def _device() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"device.kind": "cpu", "device.capability": None, "device.name": platform.processor() or "cpu"}
    props = torch.cuda.get_device_properties(0)
    return {"device.kind": "cuda", "device.capability": f"{props.major}.{props.minor}", "device.name": props.name,
            "device.multiprocessors": int(props.multi_processor_count)}


def collect(run: Mapping[str, Any]) -> Manifest:
    """The manifest of this machine plus ``run``'s own fields (``suite.name``, ``suite.tiny``, ``model.name``,
    ``model.architecture``, ``run.precisions``, ``run.seed``...; JSON scalars or lists)."""
    from gpumatch.bench.env import _cpu_model  # imports torch (reading stored manifests needs none)

    fields: dict[str, Any] = {"schema": SCHEMA}
    fields.update(_gpus())
    fields.update(_software())
    fields.update(_device())
    fields.update({"host.cpu": _cpu_model() or None, "host.kernel": platform.release(),
                   "host.machine": platform.machine(), "host.os": platform.system()})
    fields.update(run)
    return Manifest(fields)


def collect_case(case: dict[str, Any]) -> dict[str, Any]:
    """:func:`collect` as a child-process target (``{"run": {...}}`` in, the manifest's fields out)."""
    return collect(dict(case.get("run", {}))).to_dict()
