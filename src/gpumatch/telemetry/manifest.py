"""The machine manifest: what ran where, one frozen flat mapping for every measuring command.

One type (:class:`Manifest`) and one builder (:func:`machine_manifest`) for ``monitor``, ``doctor``, ``bench
run`` and ``bench scale``. Fields are dotted names (schema :data:`SCHEMA`) mapped to JSON values, so two
manifests compare field by field (:func:`compare_manifests`):

- ``host.*``: ``name`` (hostname), ``cpu`` (model), ``cpu_count``, ``cpu_governor``, ``numa_nodes``,
  ``kernel``, ``os``, ``machine``;
- ``software.*``: ``python``, ``gpumatch`` with ``gpumatch_commit`` and ``gpumatch_dirty``, and ``torch``,
  ``numpy``, ``nvidia-ml-py``, ``pynvml`` read with importlib.metadata (never imported); a torch probe adds
  ``cuda`` (the CUDA torch was built for) and ``torch_arch_list``; the bench's child adds ``cudnn``, ``nccl``,
  ``cublas`` and ``device.*`` (torch's own view of the card, :mod:`gpumatch.bench.manifest`);
- ``gpu.*``: GPU 0 under nvidia-smi's names (:data:`gpumatch.telemetry.smi.SMI_FIELDS`: ``name``, ``uuid``,
  ``vbios``, ``driver``, power limits in W, clocks in MHz, ``memory_total_mib``, ECC / MIG / persistence as
  ``Enabled``/``Disabled``, PCIe maxima and current link), ``gpu.count`` (GPUs on the machine), and from NVML
  also ``cuda_driver``, ``nvml``, ``serial``, ``pci_bus_id``, ``compute_capability`` and ``gpu.devices``
  (every recorded GPU's :meth:`DeviceInfo.to_dict`, what a replay rebuilds its devices from);
- the run's own fields (``suite.*``, ``model.*``, ``run.*``, ``scale.*``), added by its command.

Sources: NVML through a :class:`~gpumatch.telemetry.device.Backend` when one is open (monitor, doctor), else
``nvidia-smi --query-gpu`` (the bench's child); ``/proc/cpuinfo``, ``uname`` and ``importlib.metadata``.
Standard library only at import (the GPU machine may have no numpy or pydantic).

Stored manifests of the two older shapes read through :func:`from_stored`: the flat bench manifest
(``gpumatch.bench.manifest/1``, already these names) and the nested monitor/doctor manifest (sections
``gpumatch``, ``host``, ``software``, ``driver``, ``gpus``). Stored rows are never rewritten: the store's key
is the SHA-256 of the manifest as stored (:attr:`Manifest.sha256`, the rule of :mod:`gpumatch.store.codec`).
:attr:`Manifest.machine_sha256` leaves out the :data:`VOLATILE` fields: two equal ones ran on the same cards
with the same settings and software.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gpumatch.errors import DataFileError
from gpumatch.files import read_text
from gpumatch.telemetry.types import DeviceInfo, SystemInfo

if TYPE_CHECKING:
    from gpumatch.telemetry.device import Backend
    from gpumatch.telemetry.probe import TorchBuild
    from gpumatch.telemetry.trace import Trace

SCHEMA = "gpumatch.manifest/2"

VOLATILE = frozenset({"captured_utc", "host.name", "gpu.pcie_gen_current", "gpu.pcie_width_current",
                      "pcie_gen", "pcie_width", "retired_pages_pending", "hostname", "manifest_hash"})
"""Left out of :attr:`Manifest.machine_sha256`, at any depth: the capture time, the hostname, the current PCIe
link (it drops at idle) and health flags that change without any configuration change (and, in the older
nested shape, the hash it carried of itself)."""

MACHINE_FIELDS: tuple[str, ...] = (
    "gpu.name", "gpu.driver", "gpu.vbios", "gpu.power_enforced_limit_w", "gpu.clocks_max_sm_mhz",
    "gpu.clocks_max_mem_mhz", "gpu.clocks_app_sm_mhz", "gpu.ecc_mode", "gpu.mig_mode", "gpu.pcie_gen_max",
    "gpu.pcie_width_max", "gpu.count", "software.torch", "software.cuda", "software.cudnn", "software.nccl",
    "software.cublas", "device.kind",
)
"""Machine fields whose difference makes two runs' numbers incomparable. Left out on purpose: the UUID and serial
(two cards of one SKU are what a comparison is for), the CPU model and kernel (recorded; they move launch-bound
numbers, which the report shows, but do not make a GEMM incomparable), the current PCIe link (it drops at idle),
the hostname and the gpumatch version."""
PERFORMANCE_FIELDS: tuple[str, ...] = (*MACHINE_FIELDS, "suite.name", "suite.tiny", "model.name",
                                       "model.architecture", "run.precisions")
""":data:`MACHINE_FIELDS` and the run's own fields that change what a bench suite measures (``bench compare``)."""


@dataclass(frozen=True)
class Manifest:
    """An immutable manifest: ``fields`` (dotted name -> JSON value)."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    @property
    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of every field: the results store's key of this manifest."""
        return record_sha256(self.fields)

    @property
    def machine_sha256(self) -> str:
        """SHA-256 of the canonical JSON without the :data:`VOLATILE` fields (module docstring)."""
        return manifest_hash(self.fields)

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def merged(self, extra: Mapping[str, Any]) -> Manifest:
        """This manifest with ``extra``'s fields added (``extra`` wins on a name both have)."""
        return Manifest({**self.fields, **extra})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.fields)

    def devices(self) -> tuple[DeviceInfo, ...]:
        """The recorded GPUs (``gpu.devices``; NVML-built manifests and the older nested shape have them)."""
        return tuple(DeviceInfo.from_dict(d) for d in self.fields.get("gpu.devices") or [] if isinstance(d, dict))

    def system(self) -> SystemInfo:
        """The driver facts (``gpu.driver``, ``gpu.cuda_driver`` "13.0" -> NVML's 13000, ``gpu.nvml``)."""
        cuda = self.fields.get("gpu.cuda_driver")
        major, _, minor = str(cuda).partition(".")
        whole = int(major) * 1000 + int(minor or 0) * 10 if cuda is not None and major.isdigit() else None
        return SystemInfo(driver_version=self.fields.get("gpu.driver"), cuda_driver_version=whole,
                          nvml_version=self.fields.get("gpu.nvml"), device_count=int(self.fields.get("gpu.count") or 0))


def record_sha256(fields: Mapping[str, Any]) -> str:
    """SHA-256 hex of ``json.dumps(sort_keys, (",", ":"), ensure_ascii=False)`` of ``fields``, UTF-8: the rule
    :func:`gpumatch.store.codec.manifest_sha256` keys stored manifests by."""
    text = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _strip(o: Any) -> Any:
    if isinstance(o, Mapping):
        return {k: _strip(v) for k, v in o.items() if k not in VOLATILE}
    if isinstance(o, list | tuple):
        return [_strip(v) for v in o]
    return o


def manifest_hash(manifest: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``manifest`` without its :data:`VOLATILE` fields (either shape)."""
    canon = json.dumps(_strip(manifest), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def from_stored(stored: Mapping[str, Any] | Manifest | None) -> Manifest:
    """A stored manifest of any shape as a :class:`Manifest` under the current names (module docstring): the
    older nested monitor/doctor shape is flattened, the flat bench shape and others are taken as they are."""
    if isinstance(stored, Manifest):
        return stored
    data = dict(stored or {})
    return Manifest(_flatten_nested(data) if _is_nested(data) else data)


def _is_nested(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is the older nested monitor/doctor shape (sections, no ``schema``)."""
    return "schema" not in data and (isinstance(data.get("gpus"), list) or isinstance(data.get("driver"), dict)
                                     or isinstance(data.get("host"), dict))


_NESTED = {"host": {"hostname": "host.name", "cpu_model": "host.cpu", "cpu_count": "host.cpu_count",
                    "cpu_governor": "host.cpu_governor", "numa_nodes": "host.numa_nodes", "kernel": "host.kernel",
                    "os": "host.os", "python": "software.python"},
           "gpumatch": {"version": "software.gpumatch", "commit": "software.gpumatch_commit",
                        "dirty": "software.gpumatch_dirty"},
           "software": {"torch": "software.torch", "numpy": "software.numpy", "nvidia-ml-py": "software.nvidia-ml-py",
                        "pynvml": "software.pynvml", "torch_cuda_build": "software.cuda",
                        "torch_arch_list": "software.torch_arch_list"}}
"""The older nested shape's sections: their keys -> the current names."""


def _flatten_nested(data: Mapping[str, Any]) -> dict[str, Any]:
    """The nested monitor/doctor manifest (gpumatch before the one manifest) under the current names; its own
    ``manifest_hash`` is dropped (:attr:`Manifest.machine_sha256` recomputes it), unknown keys are kept."""
    out: dict[str, Any] = {"captured_utc": data["captured_utc"]} if "captured_utc" in data else {}
    for section, names in _NESTED.items():
        for key, value in (data.get(section) or {}).items():
            out[names.get(key, f"{section}.{key}")] = value
    devices = tuple(DeviceInfo.from_dict(g) for g in data.get("gpus") or [] if isinstance(g, dict))
    driver = data.get("driver")
    out.update(gpu_fields(devices, SystemInfo.from_dict(driver) if isinstance(driver, dict) else None))
    out.update({f"replay.{k}": v for k, v in (data.get("replay_of") or {}).items()})
    known = {*_NESTED, "captured_utc", "gpus", "driver", "replay_of", "manifest_hash"}
    out.update({k: v for k, v in data.items() if k not in known})
    return out


# --- comparing ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestDiff:
    """How two manifests differ in the compared fields: ``differing`` (recorded in both, unequal) and
    ``unrecorded`` (recorded in one only)."""

    differing: tuple[str, ...]
    unrecorded: tuple[str, ...]

    @property
    def comparable(self) -> bool:
        """Whether no compared field recorded in both differs."""
        return not self.differing


def compare_manifests(a: Mapping[str, Any] | Manifest, b: Mapping[str, Any] | Manifest,
                      names: Sequence[str] = PERFORMANCE_FIELDS) -> ManifestDiff:
    """The :class:`ManifestDiff` of ``a`` and ``b`` (stored dicts of any shape, or manifests) in ``names``."""
    x, y = from_stored(a), from_stored(b)
    pairs = [(n, _compared(n, x.get(n)), _compared(n, y.get(n))) for n in names]
    return ManifestDiff(tuple(n for n, p, q in pairs if p is not None and q is not None and p != q),
                        tuple(n for n, p, q in pairs if (p is None) != (q is None)))


def _compared(name: str, value: Any) -> Any:
    """``value`` as compared: ``software.torch`` without its local part (``2.11.0+cu130`` is ``2.11.0``: package
    metadata and ``torch.__version__`` differ in it; the CUDA build is ``software.cuda``, compared apart)."""
    return value.split("+", 1)[0] if name == "software.torch" and isinstance(value, str) else value


def differing_fields(a: Mapping[str, Any] | Manifest, b: Mapping[str, Any] | Manifest,
                     names: Sequence[str] = PERFORMANCE_FIELDS) -> list[str]:
    """The ``names`` in which ``a`` and ``b`` differ, a field recorded in one only counting (``bench compare``'s
    rule: a run that did not record its driver is not known to share it)."""
    diff = compare_manifests(a, b, names)
    return [n for n in names if n in diff.differing or n in diff.unrecorded]


# --- building -------------------------------------------------------------------------------------------------


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
    """The host as a plain section (``bench serve`` records its client machine with it)."""
    nodes = [p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*")]
    return {"hostname": platform.node(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "cpu_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            "numa_nodes": len(nodes) or None, "kernel": platform.release(), "os": platform.system(),
            "python": platform.python_version()}


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


def _host_fields() -> dict[str, Any]:
    h = host_facts()
    return {"host.name": h["hostname"], "host.cpu": h["cpu_model"] or None, "host.cpu_count": h["cpu_count"],
            "host.cpu_governor": h["cpu_governor"], "host.numa_nodes": h["numa_nodes"], "host.kernel": h["kernel"],
            "host.os": h["os"], "host.machine": platform.machine()}


def _software_fields(torch: TorchBuild | None) -> dict[str, Any]:
    from gpumatch import __version__

    git = git_commit()
    out: dict[str, Any] = {"software.python": platform.python_version(), "software.gpumatch": __version__,
                           "software.gpumatch_commit": git["commit"], "software.gpumatch_dirty": git["dirty"]}
    out.update({f"software.{name}": _pkg_version(name) for name in ("torch", "numpy", "nvidia-ml-py", "pynvml")})
    if torch is not None:
        out.update({"software.cuda": torch.cuda, "software.torch_arch_list": list(torch.arch_list)})
    return out


def _whole(x: Any) -> Any:
    """Integral floats as ints (NVML's 700.0 W reads as nvidia-smi's 700), so the two sources compare equal."""
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _mode(on: bool | None) -> str | None:
    return None if on is None else "Enabled" if on else "Disabled"


def device_fields(d: DeviceInfo) -> dict[str, Any]:
    """One GPU's :class:`DeviceInfo` under the manifest's ``gpu.*`` names (nvidia-smi's, module docstring)."""
    cc = d.compute_capability
    mib = None if d.memory_total_bytes is None else d.memory_total_bytes // (1 << 20)
    values = {
        "gpu.name": d.name, "gpu.uuid": d.uuid, "gpu.serial": d.serial, "gpu.vbios": d.vbios,
        "gpu.pci_bus_id": d.pci_bus_id, "gpu.compute_capability": None if cc is None else f"{cc[0]}.{cc[1]}",
        "gpu.memory_total_mib": mib, "gpu.power_limit_w": d.power_limit_set_w,
        "gpu.power_default_limit_w": d.power_limit_default_w, "gpu.power_enforced_limit_w": d.power_limit_enforced_w,
        "gpu.clocks_max_sm_mhz": d.sm_clock_max_mhz, "gpu.clocks_max_mem_mhz": d.mem_clock_max_mhz,
        "gpu.clocks_app_sm_mhz": d.app_sm_clock_mhz, "gpu.persistence_mode": _mode(d.persistence_enabled),
        "gpu.ecc_mode": _mode(d.ecc_enabled), "gpu.mig_mode": _mode(d.mig_enabled),
        "gpu.pcie_gen_max": d.pcie_max_gen_system, "gpu.pcie_width_max": d.pcie_max_width_system,
        "gpu.pcie_gen_current": d.pcie_gen, "gpu.pcie_width_current": d.pcie_width,
    }
    return {k: _whole(v) for k, v in values.items()}


def gpu_fields(devices: Sequence[DeviceInfo], system: SystemInfo | None) -> dict[str, Any]:
    """``gpu.*`` of the first recorded GPU, the driver, ``gpu.count`` (the GPUs on the machine: ``system``'s
    count, else the recorded ones) and ``gpu.devices`` (every recorded GPU in full)."""
    out: dict[str, Any] = device_fields(devices[0]) if devices else {}
    if system is not None:
        out.update({"gpu.driver": system.driver_version, "gpu.cuda_driver": system.cuda_driver_version_str,
                    "gpu.nvml": system.nvml_version})
    out["gpu.count"] = system.device_count if system is not None else len(devices)  # the machine's, as NVML says
    out["gpu.devices"] = [d.to_dict() for d in devices]
    return out


def machine_manifest(backend: Backend | None = None, torch: TorchBuild | None = None, *,
                     smi: bool = True) -> Manifest:
    """The manifest of this machine now: host and software, and the GPUs from ``backend`` (NVML) when given,
    else from nvidia-smi (``smi``; none when it is absent). ``torch``: a probe's result (``software.cuda``)."""
    from gpumatch.telemetry.smi import smi_gpu_fields

    fields: dict[str, Any] = {"schema": SCHEMA}
    fields.update(_host_fields())
    fields.update(_software_fields(torch))
    if backend is not None:
        fields.update(gpu_fields([d.info() for d in backend.devices()], backend.system()))
    elif smi:
        fields.update(smi_gpu_fields())
    return Manifest(fields)


def trace_manifest(trace: Trace) -> Manifest:
    """The manifest of a replayed trace: the recorded driver and GPUs (not this machine's), and ``replay.*``
    (the trace's own scalar metadata)."""
    fields: dict[str, Any] = {"schema": SCHEMA, **gpu_fields(trace.devices, trace.system)}
    fields.update({f"replay.{k}": v for k, v in trace.meta.items() if isinstance(v, str | int | float)})
    return Manifest(fields)
