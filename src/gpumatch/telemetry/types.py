"""Runtime records of the telemetry layer: samples, window-edge counters, static device facts.

All quantities are SI (W, Hz as MHz where the name says so, bytes, seconds, °C as ``_c``) and every
field is ``None`` where the device or driver does not report it. The sample keys are the contract
shared with the results store (``SAMPLE_FIELDS``).

Clock-event reason bits are NVML's ``nvmlClocksEventReason*`` constants (nvml.h / nvidia-ml-py;
see ../shared/notes/benchmark-method.md section 2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Keys of one telemetry sample, in column order (the store and the trace CSV use them as-is).
SAMPLE_FIELDS: tuple[str, ...] = (
    "t_s",
    "gpu_index",
    "power_instant_w",
    "power_avg_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "clock_event_reasons",
    "gpu_temp_c",
    "mem_temp_c",
    "memory_used_bytes",
    "util_gpu_pct",
    "util_mem_pct",
    "gpm_sm_active",
    "gpm_tensor_active",
    "gpm_dram_bw_util",
)

#: Integer-valued sample keys (everything else is float).
INT_FIELDS: frozenset[str] = frozenset({"gpu_index", "clock_event_reasons", "memory_used_bytes"})

# NVML clock-event reasons (nvmlClocksEventReason*), bit -> short name.
REASON_GPU_IDLE = 0x1
REASON_APP_CLOCKS = 0x2
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SYNC_BOOST = 0x10
REASON_SW_THERMAL = 0x20
REASON_HW_THERMAL = 0x40
REASON_HW_POWER_BRAKE = 0x80
REASON_DISPLAY_CLOCKS = 0x100

REASON_NAMES: dict[int, str] = {
    REASON_GPU_IDLE: "gpu_idle",
    REASON_APP_CLOCKS: "app_clocks",
    REASON_SW_POWER_CAP: "sw_power_cap",
    REASON_HW_SLOWDOWN: "hw_slowdown",
    REASON_SYNC_BOOST: "sync_boost",
    REASON_SW_THERMAL: "sw_thermal",
    REASON_HW_THERMAL: "hw_thermal",
    REASON_HW_POWER_BRAKE: "hw_power_brake",
    REASON_DISPLAY_CLOCKS: "display_clocks",
}

#: Clock-event reason groups counted as shares of a window's samples (:func:`gpumatch.telemetry.window.reason_shares`),
#: share name -> bits: the SW power cap (expected for dense GEMMs on an H200), HW slowdown or power brake, thermal.
REASON_GROUPS: dict[str, int] = {
    "power_cap_frac": REASON_SW_POWER_CAP,
    "hw_slowdown_frac": REASON_HW_SLOWDOWN | REASON_HW_POWER_BRAKE,
    "thermal_frac": REASON_SW_THERMAL | REASON_HW_THERMAL,
}

#: NVML perf policies read with nvmlDeviceGetViolationStatus (NVML_PERF_POLICY_*), name -> id.
VIOLATION_POLICIES: dict[str, int] = {
    "power": 0,
    "thermal": 1,
    "sync_boost": 2,
    "board_limit": 3,
    "low_utilization": 4,
    "reliability": 5,
    "total_app_clocks": 10,
    "total_base_clocks": 11,
}


def reason_names(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock-event-reason mask (unknown bits as hex)."""
    names = [name for bit, name in REASON_NAMES.items() if mask & bit]
    unknown = mask & ~sum(REASON_NAMES)
    if unknown:
        names.append(hex(unknown))
    return names


@dataclass(frozen=True, slots=True)
class Sample:
    """One cheap-field reading of one GPU (``t_s``: seconds since the sampler started).

    Slotted: a replay of a 2-million-row trace holds two of these per row."""

    t_s: float
    gpu_index: int
    power_instant_w: float | None = None
    power_avg_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    clock_event_reasons: int | None = None
    gpu_temp_c: float | None = None
    mem_temp_c: float | None = None
    memory_used_bytes: int | None = None
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    gpm_sm_active: float | None = None
    gpm_tensor_active: float | None = None
    gpm_dram_bw_util: float | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return {k: getattr(self, k) for k in SAMPLE_FIELDS}  # asdict() deep-copies: 10x slower

    def with_time(self, t_s: float) -> Sample:
        d = self.to_dict()
        d["t_s"] = t_s
        return Sample(**d)  # type: ignore[arg-type]


@dataclass(frozen=True)
class GpmMetrics:
    """GPM metrics over one interval (percent, 0-100), from a pair of nvmlGpmSampleGet samples."""

    sm_active_pct: float | None
    tensor_active_pct: float | None
    dram_bw_util_pct: float | None
    interval_s: float


@dataclass(frozen=True)
class EdgeCounters:
    """Cumulative counters read only at window edges (the energy read alone costs ~4 ms on an H200).

    ``energy_mj``: mJ since driver load (nvmlDeviceGetTotalEnergyConsumption). ``violation_ns``:
    ns of clock limitation per policy (nvmlDeviceGetViolationStatus). ECC counts are volatile
    (since driver load) totals. ``remapped_rows``: correctable, uncorrectable, pending (0/1),
    failed (0/1). ``pcie_gen``/``pcie_width``: the link now (to catch downtraining under load).
    """

    t_s: float
    gpu_index: int
    label: str = ""
    energy_mj: int | None = None
    violation_ns: dict[str, int] = field(default_factory=dict)
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    pcie_replays: int | None = None
    remapped_rows: tuple[int, int, int, int] | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EdgeCounters:
        rows = d.get("remapped_rows")
        return cls(
            t_s=float(d["t_s"]),
            gpu_index=int(d["gpu_index"]),
            label=str(d.get("label", "")),
            energy_mj=_opt_int(d.get("energy_mj")),
            violation_ns={str(k): int(v) for k, v in (d.get("violation_ns") or {}).items()},
            ecc_corrected=_opt_int(d.get("ecc_corrected")),
            ecc_uncorrected=_opt_int(d.get("ecc_uncorrected")),
            pcie_replays=_opt_int(d.get("pcie_replays")),
            remapped_rows=None if rows is None else (int(rows[0]), int(rows[1]), int(rows[2]), int(rows[3])),
            pcie_gen=_opt_int(d.get("pcie_gen")),
            pcie_width=_opt_int(d.get("pcie_width")),
        )


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


@dataclass(frozen=True)
class XidEvent:
    """A critical Xid error reported by NVML's event set during a run."""

    t_s: float
    gpu_index: int
    xid: int


@dataclass(frozen=True)
class GpuProcess:
    """A process with a context on the GPU (``used_memory_bytes`` None where hidden, e.g. containers)."""

    pid: int
    name: str
    used_memory_bytes: int | None


@dataclass(frozen=True)
class DeviceInfo:
    """Static (or slowly changing) facts about one GPU, for the manifest and the preflight checks.

    Power in W, clocks in MHz, memory in bytes, temperatures in °C. ``pcie_max_gen_system`` /
    ``pcie_max_width_system`` are the link maxima of GPU *and* slot (nvmlDeviceGetMaxPcieLink*);
    ``pcie_max_gen_gpu`` is the GPU's own capability (nvmlDeviceGetGpuMaxPcieLinkGeneration).
    """

    index: int
    name: str
    uuid: str | None = None
    serial: str | None = None
    vbios: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, int] | None = None
    memory_total_bytes: int | None = None
    power_limit_default_w: float | None = None
    power_limit_enforced_w: float | None = None
    power_limit_set_w: float | None = None
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    app_sm_clock_mhz: float | None = None
    app_sm_clock_default_mhz: float | None = None
    app_mem_clock_mhz: float | None = None
    app_mem_clock_default_mhz: float | None = None
    ecc_enabled: bool | None = None
    ecc_pending_enabled: bool | None = None
    mig_enabled: bool | None = None
    persistence_enabled: bool | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_max_gen_system: int | None = None
    pcie_max_width_system: int | None = None
    pcie_max_gen_gpu: int | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    temp_gpu_max_c: float | None = None
    temp_mem_max_c: float | None = None
    gpm_supported: bool | None = None
    retired_pages_pending: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.compute_capability is not None:
            d["compute_capability"] = f"{self.compute_capability[0]}.{self.compute_capability[1]}"
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceInfo:
        """Inverse of :meth:`to_dict` (unknown keys are ignored, so older sidecars still load)."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        cc = kw.get("compute_capability")
        if isinstance(cc, str):
            major, _, minor = cc.partition(".")
            kw["compute_capability"] = (int(major), int(minor or 0))
        elif isinstance(cc, list | tuple):
            kw["compute_capability"] = (int(cc[0]), int(cc[1]))
        return cls(**kw)


@dataclass(frozen=True)
class SystemInfo:
    """Driver-level facts (``cuda_driver_version``: NVML's integer, e.g. 13000 for CUDA 13.0)."""

    driver_version: str | None = None
    cuda_driver_version: int | None = None
    nvml_version: str | None = None
    device_count: int = 0

    @property
    def cuda_driver_version_str(self) -> str | None:
        v = self.cuda_driver_version
        return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cuda_driver_version_str"] = self.cuda_driver_version_str
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SystemInfo:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
