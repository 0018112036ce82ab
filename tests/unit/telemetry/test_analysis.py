"""Trace analysis: duty cycles, energy, dips, burst vs sustained, settled idle power."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from synth_traces import build, edges, make_samples

from gpumatch.telemetry.analysis import (
    active_span,
    bitmask_duty,
    burst_vs_sustained,
    find_dips,
    percentile,
    summarize_gpu,
    violation_duty,
)
from gpumatch.telemetry.types import Sample
from gpumatch.telemetry.window import settled_idle_power
from gpumatch.telemetry.window import window_energy_j as energy_j


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_matches_numpy_linear(xs: list[float], q: float) -> None:
    assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-9, abs=1e-6)


def test_violation_duty_is_delta_ns_over_window() -> None:
    a, b = edges(0.0, 7.01, power_viol_s=6.81)  # the H200 probe: 6.81 s of 7.01 s
    assert violation_duty((a, b))["power"] == pytest.approx(6.81 / 7.01, rel=1e-6)
    assert violation_duty((a, b))["thermal"] == 0.0
    assert violation_duty(None) == {}


def test_bitmask_duty_counts_samples_with_the_bit() -> None:
    s = make_samples("gemm", 9.9) + make_samples("idle", 9.9, t0=10.0)
    duty = bitmask_duty(s)
    assert duty["sw_power_cap"] == pytest.approx(0.5)
    assert duty["gpu_idle"] == pytest.approx(0.5)
    assert duty["hw_slowdown"] == 0.0


def test_summary_prefers_violation_counters_over_bitmask(make_trace) -> None:
    tr = make_trace("gemm", 20.0, viol_frac=0.6)  # bitmask says 100%, counter 60%
    s = summarize_gpu(tr, 0)
    assert s.throttle_source == "violation_counters"
    assert s.violation_duty["power"] == pytest.approx(0.6, abs=1e-6)
    assert s.throttle_duty["sw_power_cap"] == 1.0
    assert summarize_gpu(make_trace("gemm", with_edges=False), 0).throttle_source == "sampled_bitmask"


def test_energy_from_counter_else_integrated() -> None:
    s = make_samples("gemm", 10.0)
    e, src = energy_j(s, edges(0.0, 10.0, energy_j=6850.0))
    assert (e, src) == (pytest.approx(6850.0), "counter")
    e2, src2 = energy_j(s, None)
    assert src2 == "integrated" and e2 == pytest.approx(685.0 * 10.0, rel=1e-9)
    a, b = edges(0.0, 10.0, energy_j=100.0)
    reset = (b, a)  # counter went backwards: driver reloaded -> fall back to integration
    assert energy_j(s, reset)[1] == "integrated"


def test_dips_found_in_utilization_and_power() -> None:
    s = (make_samples("gemm", 5.0) + make_samples("idle", 1.9, t0=5.1)
         + make_samples("gemm", 5.0, t0=7.1) + make_samples("idle", 0.9, t0=12.2) + make_samples("gemm", 3.0, t0=13.2))
    d = find_dips(s, "util_gpu_pct")
    assert d is not None and d.count == 2
    assert d.longest_s == pytest.approx(2.0, abs=0.11)
    assert 0.15 < d.time_fraction < 0.25
    assert find_dips(make_samples("gemm", 5.0), "util_gpu_pct").count == 0  # type: ignore[union-attr]


def _start_up_work_tail(work: str = "gemm", **work_fields: object) -> list[Sample]:
    """5 s of start-up (idle, no kernel yet), 10 s of work, 1 s of tail: a `gpumatch monitor -- CMD` window."""
    return (make_samples("idle", 4.9) + make_samples(work, 10.0, t0=5.0, **work_fields)
            + make_samples("idle", 1.0, t0=15.1))


def test_active_span_leaves_out_start_up_and_tail() -> None:
    a = active_span(_start_up_work_tail(), power_limit_w=700.0)
    assert a is not None
    assert (a.t0_s, a.t1_s) == (5.0, 15.0)
    assert a.lead_in_s == pytest.approx(5.0) and a.tail_s == pytest.approx(1.1)
    assert a.util_gpu_pct_mean == 100.0 and a.gpm_tensor_active_mean == pytest.approx(93.7)
    assert active_span(make_samples("idle", 10.0), 700.0) is None


def test_active_span_takes_power_as_evidence_before_utilization_catches_up() -> None:
    # on the H200 the first GEMM samples read 739 W at 1% utilization (utilization averages the last period)
    s = make_samples("idle", 4.9) + make_samples("gemm", 0.2, t0=5.0, util_gpu_pct=1.0, power_instant_w=739.0) \
        + make_samples("gemm", 5.0, t0=5.3)
    a = active_span(s, 700.0)
    assert a is not None and a.t0_s == 5.0
    b = active_span(s, None)  # no limit known: utilization alone
    assert b is not None and b.t0_s == 5.3


def test_a_short_utilization_blip_is_not_an_active_span() -> None:
    # the previous process's utilization window, read for 0.25 s at the start of an idle H200 trace
    s = make_samples("idle", 0.2, dt=0.05, util_gpu_pct=25.0) + make_samples("idle", 40.0, t0=0.25)
    assert active_span(s, 700.0) is None
    assert summarize_gpu(build(s), 0).active is None


def test_start_up_and_tail_are_not_dips_but_waits_between_work_are() -> None:
    s = summarize_gpu(build(_start_up_work_tail()), 0)
    assert s.active is not None and s.active.lead_in_s == pytest.approx(5.0)
    assert [d.count for d in s.dips] == [0, 0]
    assert s.duration_s == pytest.approx(16.1) and s.util_gpu_pct_mean is not None and s.util_gpu_pct_mean < 70
    # on the whole window, runs touching its ends are ramp-up and tail too
    assert find_dips(_start_up_work_tail(), "util_gpu_pct").count == 0  # type: ignore[union-attr]
    waits = make_samples("gemm", 5.0) + make_samples("idle", 1.9, t0=5.1) + make_samples("gemm", 5.0, t0=7.1)
    d = find_dips(waits, "util_gpu_pct")
    assert d is not None and d.count == 1 and d.longest_s == pytest.approx(2.0, abs=0.11)


def test_burst_vs_sustained_sees_a_clock_drop() -> None:
    s = make_samples("gemm", 60.0, sm_clock_mhz=1980.0) + make_samples("gemm", 180.0, t0=60.1, sm_clock_mhz=1500.0)
    b = burst_vs_sustained(s)
    assert b is not None
    assert b.burst_window_s == 60.0
    assert b.burst_sm_clock_mhz == pytest.approx(1980.0)
    assert b.sustained_sm_clock_mhz == pytest.approx(1500.0)
    assert b.sm_clock_ratio == pytest.approx(1500 / 1980)
    assert burst_vs_sustained(make_samples("idle", 10.0)) is None  # nothing active


def test_idle_power_waits_for_clocks_to_settle() -> None:
    # right after load: 124 W at 1980 MHz, reasons 0x0, then 86 W at 900 MHz with GpuIdle (section 3)
    hot = make_samples("idle", 5.0, sm_clock_mhz=1980.0, power_avg_w=124.0, clock_event_reasons=0x0)
    cold = make_samples("idle", 10.0, t0=5.1)
    got = settled_idle_power(hot + cold)
    assert got is not None and got.power_w == pytest.approx(86.0)
    assert got.settle_s == pytest.approx(5.1) and got.sm_clock_mhz == 900.0
    assert settled_idle_power(make_samples("gemm", 5.0)) is None  # nothing idle


def test_idle_power_without_reasons_uses_the_clock_floor() -> None:
    hot = make_samples("idle", 5.0, sm_clock_mhz=1980.0, power_avg_w=124.0, clock_event_reasons=None)
    cold = make_samples("idle", 10.0, t0=5.1, clock_event_reasons=None)
    assert settled_idle_power(hot + cold).power_w == pytest.approx(86.0)  # type: ignore[union-attr]


def test_idle_power_is_not_measured_when_clocks_never_settle() -> None:
    # a process holding a CUDA context: 1980 MHz, reasons 0x0 for the whole window (seen on the H200)
    got = settled_idle_power(make_samples("idle", 40.0, sm_clock_mhz=1980.0, power_avg_w=116.0,
                                          clock_event_reasons=0x0))
    assert got is not None and got.power_w is None and got.sm_clock_mhz == 1980.0


def test_error_deltas_and_pcie_end(make_trace) -> None:
    samples = make_samples("gemm", 10.0)
    tr = build(samples, edges(0.0, 10.0, ecc_uncorrected=2, pcie_replays=3))
    s = summarize_gpu(tr, 0)
    assert s.errors["ecc_uncorrected_delta"] == 2
    assert s.errors["pcie_replays_delta"] == 3
    assert (s.pcie_gen_end, s.pcie_width_end) == (5, 16)


def test_window_restricts_samples(make_trace) -> None:
    tr = build(make_samples("idle", 10.0) + make_samples("gemm", 10.0, t0=10.1))
    s = summarize_gpu(tr, 0, 10.1, 20.1)
    assert s.util_gpu_pct_mean == 100.0
    assert s.n_samples == 101


def test_summary_handles_missing_fields() -> None:
    tr = build([Sample(t_s=float(i), gpu_index=0) for i in range(5)])
    s = summarize_gpu(tr, 0)
    assert s.power_avg_w_mean is None and s.energy_j is None and s.energy_source == "none"
    assert s.throttle_source == "none"
