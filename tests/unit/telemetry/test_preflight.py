"""Preflight checks: every rule's pass / warn / fail / skip, with made-up facts."""

from __future__ import annotations

from dataclasses import replace

import pytest
from synth_traces import H200_INFO, SYSTEM, make_samples

from gpumatch.telemetry.preflight import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    GpuFacts,
    MachineFacts,
    check_clocks,
    check_ecc,
    check_modes,
    check_pcie,
    check_power_limit,
    check_processes,
    check_psu,
    check_temperature,
    check_torch,
    run_checks,
    worst,
)
from gpumatch.telemetry.probe import TorchBuild
from gpumatch.telemetry.types import DeviceInfo, EdgeCounters, GpuProcess

IDLE = make_samples("idle", 0.0)[0]
GOOD = GpuFacts(info=H200_INFO, sample=IDLE, edges=EdgeCounters(0.0, 0, remapped_rows=(0, 0, 0, 0), ecc_uncorrected=0))
TORCH = TorchBuild("2.11.0+cu130", "13.0", True, ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"))


def _g(**info) -> GpuFacts:
    return replace(GOOD, info=replace(H200_INFO, **info))


def test_a_healthy_h200_passes_everything() -> None:
    checks = run_checks(MachineFacts(SYSTEM, (GOOD,), TORCH, frozenset(), psu_w=1200.0))
    assert {c.verdict for c in checks} == {PASS}, [c for c in checks if c.verdict != PASS]
    assert worst(checks) == PASS


@pytest.mark.parametrize(("facts", "verdict"), [
    (_g(), PASS),
    (_g(pcie_gen=1, pcie_width=16), WARN),                                        # idle power saving
    (replace(_g(pcie_gen=1), pcie_under_load=(4, 16)), FAIL),                      # downtrained under load
    (replace(_g(pcie_gen=1), pcie_under_load=(5, 16)), PASS),                      # came up under load
    (_g(pcie_max_gen_system=4, pcie_gen=4), WARN),                                 # Gen4 slot, Gen5 GPU
    (_g(pcie_max_width_system=4, pcie_width=4), WARN),                             # x4 slot (seed)
    (_g(pcie_gen=None, pcie_max_gen_system=None), SKIP),
])
def test_pcie(facts: GpuFacts, verdict: str) -> None:
    assert check_pcie(facts).verdict == verdict


@pytest.mark.parametrize(("enforced", "verdict"), [(700.0, PASS), (650.0, WARN), (450.0, FAIL), (None, SKIP)])
def test_power_limit(enforced: float | None, verdict: str) -> None:
    c = check_power_limit(_g(power_limit_enforced_w=enforced))
    assert c.verdict == verdict
    if verdict == FAIL:
        assert "8pin" in c.hint  # the seed's missing power cable


def test_clocks() -> None:
    assert check_clocks(_g(app_sm_clock_mhz=1980.0, app_sm_clock_default_mhz=1980.0)).verdict == PASS
    assert check_clocks(_g(app_sm_clock_mhz=1500.0, app_sm_clock_default_mhz=1980.0)).verdict == WARN
    locked = replace(GOOD, sample=replace(IDLE, clock_event_reasons=0x2))
    assert check_clocks(locked).verdict == WARN


@pytest.mark.parametrize(("rows", "unc", "info", "verdict"), [
    ((0, 0, 0, 0), 0, {}, PASS),
    ((0, 1, 1, 0), 0, {}, FAIL),                  # pending remap
    ((5, 3, 0, 1), 0, {}, FAIL),                  # failed remap
    ((0, 0, 0, 0), 2, {}, FAIL),                  # uncorrectable errors
    ((0, 0, 0, 0), 0, {"ecc_enabled": False, "ecc_pending_enabled": False}, WARN),
    ((0, 0, 0, 0), 0, {"ecc_pending_enabled": False}, WARN),
    (None, None, {"ecc_enabled": None}, SKIP),
])
def test_ecc(rows, unc, info, verdict) -> None:
    g = replace(_g(**info), edges=EdgeCounters(0.0, 0, remapped_rows=rows, ecc_uncorrected=unc))
    assert check_ecc(g).verdict == verdict


def test_modes() -> None:
    assert check_modes(GOOD).verdict == PASS
    assert check_modes(_g(mig_enabled=True)).verdict == WARN
    assert check_modes(_g(persistence_enabled=False)).verdict == WARN
    assert check_modes(_g(mig_enabled=None, persistence_enabled=None)).verdict == SKIP


def test_foreign_processes() -> None:
    procs = (GpuProcess(100, "python", 2**33), GpuProcess(200, "me", None))
    g = replace(GOOD, processes=procs)
    c = check_processes(g, frozenset({200}))
    assert c.verdict == FAIL and "100 python (8.0 GiB)" in c.detail
    assert check_processes(g, frozenset({100, 200})).verdict == PASS


@pytest.mark.parametrize(("temp", "verdict"), [(30.0, PASS), (75.0, WARN), (85.0, FAIL), (None, SKIP)])
def test_temperature(temp, verdict) -> None:
    assert check_temperature(replace(GOOD, sample=replace(IDLE, gpu_temp_c=temp))).verdict == verdict


def _torch_checks(tb, system=SYSTEM, info=H200_INFO):
    return {c.name: c.verdict for c in check_torch(MachineFacts(system, (replace(GOOD, info=info),), tb))}


def test_torch_build_against_driver_and_arch() -> None:
    assert _torch_checks(TORCH) == {"driver-cuda": PASS, "torch-arch": PASS}
    newer = replace(TORCH, cuda="14.0")
    assert _torch_checks(newer)["driver-cuda"] == FAIL
    assert _torch_checks(replace(TORCH, cuda="13.1"))["driver-cuda"] == WARN
    # 旧卡不跑新框架: a Pascal card (6.1) with a torch built from sm_75 up
    pascal = DeviceInfo(index=0, name="Tesla P100", compute_capability=(6, 0))
    assert _torch_checks(TORCH, info=pascal)["torch-arch"] == FAIL
    # same major, newer minor: the sm_86 cubin runs on 8.9 -> warn, not fail
    ada = DeviceInfo(index=0, name="L40S", compute_capability=(8, 9))
    assert _torch_checks(TORCH, info=ada)["torch-arch"] == WARN
    ptx = replace(TORCH, arch_list=("sm_80", "compute_80"))
    assert _torch_checks(ptx)["torch-arch"] == WARN


def test_torch_missing_cpu_only_or_broken() -> None:
    assert _torch_checks(None) == {"torch-build": SKIP}
    assert _torch_checks(TorchBuild("2.13.0+cpu", None, False, ())) == {"torch-build": WARN}
    assert _torch_checks(TorchBuild(None, None, False, (), error="ImportError: x")) == {"torch-build": WARN}


@pytest.mark.parametrize(("psu", "other", "verdict"), [
    (1200.0, 0.0, PASS),      # 1.5 x 700 = 1050
    (1200.0, 200.0, WARN),    # 1.5 x 900 = 1350 > 1200 >= 900
    (800.0, 200.0, FAIL),     # less than the load itself
    (None, 0.0, SKIP),
])
def test_psu_rule(psu, other, verdict) -> None:
    assert check_psu(MachineFacts(SYSTEM, (GOOD,), psu_w=psu, other_load_w=other)).verdict == verdict


def test_psu_sums_every_gpu() -> None:
    two = (GOOD, replace(GOOD, info=replace(H200_INFO, index=1)))
    c = check_psu(MachineFacts(SYSTEM, two, psu_w=1600.0))
    assert c.verdict == WARN and "2100 W" in c.detail


def test_no_gpu_machine() -> None:
    checks = run_checks(MachineFacts(None, (), None, psu_w=1000.0))
    assert [c.name for c in checks] == ["gpu", "torch-build", "psu"]
    assert {c.verdict for c in checks} == {SKIP}
    assert worst(checks) == PASS
