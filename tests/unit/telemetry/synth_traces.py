"""Synthetic traces with known answers, for the analysis, verdict, replay and CLI tests.

The numbers imitate the H200 probe of ../shared/notes/benchmark-method.md section 3 (idle 86 W at
900 MHz; dense GEMM 685 W at 1470 MHz under SwPowerCap; spin kernel 100% NVML util, 0.76% GPM SM).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import DeviceInfo, EdgeCounters, Sample, SystemInfo, XidEvent

H200_INFO = DeviceInfo(
    index=0, name="NVIDIA H200", uuid="GPU-test", compute_capability=(9, 0), memory_total_bytes=150_000_000_000,
    power_limit_default_w=700.0, power_limit_enforced_w=700.0, power_limit_set_w=700.0, sm_clock_max_mhz=1980.0,
    mem_clock_max_mhz=3201.0, ecc_enabled=True, ecc_pending_enabled=True, mig_enabled=False,
    persistence_enabled=True, pcie_gen=5, pcie_width=16, pcie_max_gen_system=5, pcie_max_width_system=16,
    pcie_max_gen_gpu=5, temp_slowdown_c=89.0, temp_shutdown_c=95.0, gpm_supported=True,
)
SYSTEM = SystemInfo(driver_version="580.159.04", cuda_driver_version=13000, nvml_version="13.580.159.04",
                    device_count=1)

PROFILES: dict[str, dict[str, Any]] = {
    "idle": dict(power_avg_w=86.0, sm_clock_mhz=900.0, clock_event_reasons=0x1, util_gpu_pct=0.0, util_mem_pct=0.0,
                 gpm_sm_active=0.0, gpm_tensor_active=0.0, gpm_dram_bw_util=0.0, gpu_temp_c=30.0),
    "gemm": dict(power_avg_w=685.0, sm_clock_mhz=1470.0, clock_event_reasons=0x4, util_gpu_pct=100.0,
                 util_mem_pct=24.0, gpm_sm_active=96.5, gpm_tensor_active=93.7, gpm_dram_bw_util=17.7, gpu_temp_c=57.0),
    "copy": dict(power_avg_w=420.0, sm_clock_mhz=1980.0, clock_event_reasons=0x0, util_gpu_pct=100.0,
                 util_mem_pct=90.0, gpm_sm_active=80.0, gpm_tensor_active=0.0, gpm_dram_bw_util=88.0, gpu_temp_c=45.0),
    "tiny": dict(power_avg_w=125.0, sm_clock_mhz=1980.0, clock_event_reasons=0x0, util_gpu_pct=100.0,
                 util_mem_pct=0.0, gpm_sm_active=0.76, gpm_tensor_active=0.0, gpm_dram_bw_util=0.1, gpu_temp_c=35.0),
}


def make_samples(profile: str, seconds: float = 20.0, dt: float = 0.1, t0: float = 0.0, gpu: int = 0,
                 gpm_every: int = 10, **override: Any) -> list[Sample]:
    """Constant samples of a profile; GPM values only on every ``gpm_every``-th sample (as recorded)."""
    p = {**PROFILES[profile], **override}
    out = []
    for i in range(round(seconds / dt) + 1):
        d = dict(p)
        d.setdefault("power_instant_w", p["power_avg_w"])
        if i % gpm_every:
            d.update(gpm_sm_active=None, gpm_tensor_active=None, gpm_dram_bw_util=None)
        out.append(Sample(t_s=round(t0 + i * dt, 6), gpu_index=gpu, **d))
    return out


def edges(t0: float, t1: float, energy_j: float | None = None, power_viol_s: float = 0.0, gpu: int = 0,
          **end: Any) -> tuple[EdgeCounters, EdgeCounters]:
    """A start/end pair of edge counters over [t0, t1]."""
    base = 1_000_000_000
    a = EdgeCounters(t_s=t0, gpu_index=gpu, label="start", energy_mj=base if energy_j is not None else None,
                     violation_ns={"power": 5_000_000_000, "thermal": 0}, ecc_corrected=0, ecc_uncorrected=0,
                     pcie_replays=0, remapped_rows=(0, 0, 0, 0), pcie_gen=5, pcie_width=16)
    b = EdgeCounters(t_s=t1, gpu_index=gpu, label="end",
                     energy_mj=base + round(energy_j * 1000) if energy_j is not None else None,
                     violation_ns={"power": 5_000_000_000 + round(power_viol_s * 1e9),
                                   "thermal": end.pop("thermal_ns", 0)},
                     ecc_corrected=0, ecc_uncorrected=end.pop("ecc_uncorrected", 0),
                     pcie_replays=end.pop("pcie_replays", 0), remapped_rows=end.pop("remapped_rows", (0, 0, 0, 0)),
                     pcie_gen=5, pcie_width=16)
    return a, b


def build(samples: list[Sample], edge_pair: tuple[EdgeCounters, ...] = (), info: DeviceInfo = H200_INFO,
          xids: tuple[XidEvent, ...] = (), meta: dict[str, Any] | None = None) -> Trace:
    return Trace(samples=tuple(samples), devices=(info,), system=SYSTEM, edges=edge_pair, xid_events=xids,
                 interval_s=0.1, meta=meta or {"what_ran": "synthetic"})


@pytest.fixture
def make_trace() -> Callable[..., Trace]:
    """make_trace(profile, seconds=20, with_edges=True, **sample_overrides) -> Trace."""

    def _make(profile: str, seconds: float = 20.0, with_edges: bool = True, viol_frac: float | None = None,
              **override: Any) -> Trace:
        samples = make_samples(profile, seconds, **override)
        if not with_edges:
            return build(samples)
        p = {**PROFILES[profile], **override}
        frac = viol_frac if viol_frac is not None else (0.97 if p["clock_event_reasons"] & 0x4 else 0.0)
        return build(samples, edges(0.0, seconds, energy_j=p["power_avg_w"] * seconds, power_viol_s=frac * seconds))

    return _make
