"""Workload classes and validity verdicts (rules in gpumatch.telemetry.verdict's docstring)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from synth_traces import H200_INFO, build, edges, make_samples

from gpumatch.telemetry.types import XidEvent
from gpumatch.telemetry.verdict import analyze, classify, judge


def _one(trace):
    (v,) = analyze(trace)
    return v


@pytest.mark.parametrize(("profile", "workload", "verdict"), [
    ("idle", "idle", "valid"),
    ("gemm", "compute-bound", "valid-power-capped"),
    ("copy", "memory-bound", "valid"),
    ("tiny", "host-bound", "valid"),
])
def test_reference_profiles(make_trace, profile: str, workload: str, verdict: str) -> None:
    v = _one(make_trace(profile))
    assert (v.workload.label, v.verdict.label) == (workload, verdict)


def test_power_cap_duty_reported_and_not_a_failure(make_trace) -> None:
    v = _one(make_trace("gemm", viol_frac=0.97))
    assert v.verdict.label == "valid-power-capped"
    assert "97%" in v.verdict.reasons[0] and "violation counter" in v.verdict.reasons[0]


def test_small_power_cap_duty_stays_valid(make_trace) -> None:
    v = _one(make_trace("gemm", viol_frac=0.01, clock_event_reasons=0x0))
    assert v.verdict.label == "valid"


def test_hw_slowdown_invalidates(make_trace) -> None:
    assert _one(make_trace("gemm", clock_event_reasons=0x4 | 0x8)).verdict.label == "invalid-hw-slowdown"
    assert _one(make_trace("gemm", clock_event_reasons=0x80)).verdict.label == "invalid-hw-slowdown"


def test_one_hw_slowdown_sample_is_tolerated() -> None:
    s = make_samples("gemm", 20.0)
    s[50] = replace(s[50], clock_event_reasons=0x4 | 0x8)  # 1 of 201 samples: a P-state change
    assert _one(build(s)).verdict.label == "valid-power-capped"


def test_thermal_from_counter_bitmask_or_headroom(make_trace) -> None:
    s = make_samples("gemm", 20.0)
    t = build(s, edges(0.0, 20.0, power_viol_s=19.0, thermal_ns=2_000_000_000))
    assert _one(t).verdict.label == "degraded-thermal"
    assert _one(make_trace("gemm", with_edges=False, clock_event_reasons=0x20)).verdict.label == "degraded-thermal"
    assert _one(make_trace("gemm", gpu_temp_c=86.0)).verdict.label == "degraded-thermal"  # 3 °C from 89


@pytest.mark.parametrize("end", [{"ecc_uncorrected": 1}, {"remapped_rows": (0, 1, 1, 0)},
                                 {"remapped_rows": (0, 0, 0, 1)}])
def test_errors_invalidate(end) -> None:
    t = build(make_samples("gemm", 10.0), edges(0.0, 10.0, **end))
    assert _one(t).verdict.label == "invalid-errors"


def test_xid_invalidates_and_errors_win_over_slowdown() -> None:
    t = build(make_samples("gemm", 10.0, clock_event_reasons=0x8), xids=(XidEvent(3.0, 0, 79),))
    v = _one(t)
    assert v.verdict.label == "invalid-errors"
    assert "79" in v.verdict.reasons[0]


def test_pcie_replays_are_a_note() -> None:
    t = build(make_samples("copy", 10.0), edges(0.0, 10.0, pcie_replays=4))
    v = _one(t)
    assert v.verdict.label == "valid"
    assert any("replays" in r for r in v.verdict.reasons)


def test_classification_without_gpm_uses_nvml_fields(make_trace) -> None:
    none = {"gpm_sm_active": None, "gpm_tensor_active": None, "gpm_dram_bw_util": None}
    assert _one(make_trace("gemm", **none)).workload.label == "compute-bound"
    assert _one(make_trace("copy", **none)).workload.label == "memory-bound"
    low = _one(make_trace("tiny", util_gpu_pct=40.0, **none)).workload
    assert low.label == "host-bound" and "weaker" in low.reasons[0]
    # the spin kernel: 100% NVML util without GPM is indistinguishable from work -> not called compute-bound
    assert _one(make_trace("tiny", **none)).workload.label == "mixed"


def test_classify_and_judge_are_total_functions(make_trace) -> None:
    s = analyze(build(make_samples("idle", 1.0, util_gpu_pct=None)))[0].summary
    assert classify(s).label == "mixed"
    assert judge(s).label == "valid"


def test_multi_gpu_traces_are_judged_per_gpu() -> None:
    s = make_samples("gemm", 10.0, gpu=0) + make_samples("idle", 10.0, gpu=1)
    info1 = replace(H200_INFO, index=1)
    t = build(s)
    t = replace(t, devices=(H200_INFO, info1))
    got = {v.summary.gpu_index: v.workload.label for v in analyze(t)}
    assert got == {0: "compute-bound", 1: "idle"}


def _monitor_window(work: str, **work_fields: object) -> list:
    """`gpumatch monitor -- CMD`: 5 s of start-up before the first kernel, 10 s of work, 1 s of tail."""
    return (make_samples("idle", 4.9) + make_samples(work, 10.0, t0=5.0, **work_fields)
            + make_samples("idle", 1.0, t0=15.1))


def test_start_up_does_not_dilute_the_workload_class() -> None:
    # the H200 tiny-kernel loop (2026-12-03): 20-27% NVML utilization, 0.03% SM-active, after 5 s of CUDA init
    v = _one(build(_monitor_window("tiny", util_gpu_pct=22.0, gpm_sm_active=0.03)))
    assert v.summary.util_gpu_pct_mean is not None and v.summary.util_gpu_pct_mean < 15  # the whole window
    assert v.workload.label == "host-bound"
    assert any("active 10.0 s of 16.1 s" in r and "start-up 5.0 s" in r for r in v.workload.reasons)
    g = _one(build(_monitor_window("gemm"), edges(0.0, 16.1, power_viol_s=9.7)))
    assert (g.workload.label, g.verdict.label) == ("compute-bound", "valid-power-capped")
    assert g.summary.power_avg_w_mean is not None and g.summary.power_avg_w_mean < 500  # whole-window values kept


@pytest.mark.parametrize(("util", "sm", "dram", "label"), [
    (12.0, 0.03, 0.0, "host-bound"),   # SM-active under a tenth of utilization: a few SMs busy
    (12.0, 1.0, 0.0, "host-bound"),
    (12.0, 2.0, 0.0, "mixed"),         # 2% SM-active is not tiny against 12%: no evidence either way
    (30.0, 10.0, 0.0, "host-bound"),   # the utilization >= 20% rule
    (30.0, 10.0, 80.0, "memory-bound"),  # SMs idle but memory busy: not starved by the host
])
def test_host_bound_when_sm_active_is_tiny_against_utilization(util: float, sm: float, dram: float,
                                                               label: str) -> None:
    t = build(make_samples("tiny", 20.0, util_gpu_pct=util, gpm_sm_active=sm, gpm_dram_bw_util=dram))
    assert _one(t).workload.label == label
