"""Properties of the analysis that must hold for any trace (Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synth_traces import build, edges, make_samples

from gpumatch.telemetry.analysis import violation_duty
from gpumatch.telemetry.types import Sample
from gpumatch.telemetry.verdict import VERDICTS, WORKLOADS, analyze
from gpumatch.telemetry.window import window_energy_j as energy_j

opt_pct = st.none() | st.floats(0, 100)
sample_st = st.builds(
    Sample,
    t_s=st.just(0.0),
    gpu_index=st.just(0),
    power_instant_w=st.none() | st.floats(0, 1500),
    power_avg_w=st.none() | st.floats(0, 1500),
    sm_clock_mhz=st.none() | st.floats(0, 3000),
    clock_event_reasons=st.none() | st.integers(0, 0x1FF),
    gpu_temp_c=st.none() | st.floats(0, 110),
    util_gpu_pct=opt_pct,
    util_mem_pct=opt_pct,
    gpm_sm_active=opt_pct,
    gpm_tensor_active=opt_pct,
    gpm_dram_bw_util=opt_pct,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(sample_st, min_size=1, max_size=60))
def test_any_trace_gets_one_known_label_and_verdict(rows: list[Sample]) -> None:
    samples = [Sample(**{**r.to_dict(), "t_s": 0.1 * i}) for i, r in enumerate(rows)]  # type: ignore[arg-type]
    (v,) = analyze(build(samples))
    assert v.workload.label in WORKLOADS and v.verdict.label in VERDICTS
    assert v.workload.reasons and v.verdict.reasons
    assert all(0.0 <= d <= 1.0 for d in v.summary.throttle_duty.values())


@given(st.floats(0.5, 100), st.floats(0, 2), st.floats(0, 1e3))
def test_violation_duty_is_a_fraction(span_s: float, frac: float, _: float) -> None:
    duty = violation_duty(edges(0.0, span_s, power_viol_s=frac * span_s))
    assert 0.0 <= duty["power"] <= 1.0
    assert duty["power"] == pytest.approx(min(frac, 1.0), abs=1e-6)


@given(st.floats(1, 1000), st.floats(1, 100))
def test_integrated_energy_of_constant_power(power_w: float, seconds: float) -> None:
    e, src = energy_j(make_samples("gemm", seconds, power_avg_w=power_w), None)
    n = round(seconds / 0.1)
    assert src == "integrated" and e == pytest.approx(power_w * n * 0.1, rel=1e-6)
