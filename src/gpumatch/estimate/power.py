"""Power and energy at the predicted utilization (estimator-formulas.md section F).

GPU board power is interpolated between idle and TDP by what the GPU is busy with during a step:
``P = TDP · (idle + (1 − idle) · Σ_i share_i · a_i)`` where ``share_i`` is the fraction of the step that is
compute-bound, memory-bound, communicating or host-bound, and ``a_i`` how close each drives the card to its
limit (Calibration: compute-bound GEMMs run at the power cap -- an H200 held 681-689 W of 700 W in a bf16
GEMM; idle is 12 % of TDP -- 86 W on the same card; benchmark-method.md section 3; the memory, comm and host
fractions are assumed). Facility energy adds the host's share per GPU and multiplies by the PUE
(The Green Grid, "PUE: A Comprehensive Examination of the Metric", 2012).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpumatch.estimate._num import Num, vmax
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case


@dataclass(frozen=True)
class Site:
    """Where the GPUs run. All defaults are assumptions; pass your own.

    ``pue`` 1.3 (a modern colocation facility; Uptime Institute's 2024 survey average is about 1.56);
    ``host_power_w_per_gpu`` 150 W (CPUs, memory, fans, NICs of an 8-GPU server shared per GPU);
    ``electricity_usd_per_kwh`` 0.12; ``lifetime_years`` 4 and ``duty_fraction`` 0.7 for amortizing a
    purchase; ``facility_usd_per_gpu_hour`` 0.05 for rack space, cooling plant and staff.
    """

    pue: float = 1.3
    host_power_w_per_gpu: float = 150.0
    electricity_usd_per_kwh: float = 0.12
    lifetime_years: float = 4.0
    duty_fraction: float = 0.7
    facility_usd_per_gpu_hour: float = 0.05


DEFAULT_SITE = Site()


def gpu_power_w(c: Case, t: dict[str, Num], cal: Calibration) -> Num:
    """Mean board power of one GPU (W) over a step whose time split is ``t`` (roofline result dict)."""
    total = vmax(t["time_s"], 1e-12)
    activity = (
        t["compute_s"] * cal.compute_power_fraction
        + t["memory_s"] * cal.memory_power_fraction
        + t["comm_s"] * cal.comm_power_fraction
        + t["host_s"] * cal.host_power_fraction
    ) / total
    idle = cal.idle_power_fraction
    return c.tdp_w * (idle + (1.0 - idle) * activity)


def idle_power_w(c: Case, cal: Calibration) -> Num:
    return c.tdp_w * cal.idle_power_fraction


def facility_power_w(gpu_w: Num, count: Num, site: Site) -> Num:
    """Wall power of ``count`` GPUs plus their hosts' share, times the PUE."""
    return (gpu_w + site.host_power_w_per_gpu) * count * site.pue
