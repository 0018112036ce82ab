"""Telemetry windows (gpumatch.telemetry.window) through the sampler's begin_window / end_window on the fake
backend, on a virtual clock: energy from the counter (exact at the window's own edges) else the trapezoid, settled
idle power and idle-subtracted energy, mean and p95 power, clock-reason shares; and the sampler's history bound."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_traces import build, edges, make_samples

from gpumatch.errors import InputError
from gpumatch.telemetry.backends import open_backend
from gpumatch.telemetry.fake import FakeBackend, VirtualClock
from gpumatch.telemetry.sampler import Sampler
from gpumatch.telemetry.trace import Trace
from gpumatch.telemetry.types import REASON_GROUPS, EdgeCounters, Sample
from gpumatch.telemetry.window import make_window, reason_shares, window_energy_j

TRACES = Path(__file__).parents[2] / "data" / "traces"


def _sampler(trace: Trace, interval_s: float = 0.1, **kw: object) -> tuple[Sampler, VirtualClock]:
    clock = VirtualClock()
    s = Sampler(FakeBackend(trace), interval_s, clock=clock.now, sleep=clock.sleep, **kw)  # type: ignore[arg-type]
    s._open()  # what start() does before its thread; the loop then runs in this thread on the virtual clock
    return s, clock


def _idle_then_gemm() -> Trace:
    """10 s idle (86 W, GpuIdle), then 20 s of GEMM (685 W, SW power cap); the counter gains 86 J/s then 685 J/s."""
    samples = make_samples("idle", 9.9) + make_samples("gemm", 20.0, t0=10.0)
    a = EdgeCounters(t_s=0.0, gpu_index=0, energy_mj=1_000_000)
    b = EdgeCounters(t_s=10.0, gpu_index=0, energy_mj=1_000_000 + 860_000)
    c = EdgeCounters(t_s=30.0, gpu_index=0, energy_mj=1_000_000 + 860_000 + 13_700_000)
    return build(samples, (a, b, c))


def test_end_window_returns_energy_power_and_reason_shares() -> None:
    s, _ = _sampler(build(make_samples("gemm", 30.0), edges(0.0, 30.0, energy_j=685.0 * 30.0)))
    t0 = s.begin_window("case")
    s._loop(until_s=10.0)
    w = s.end_window("case")
    g = w.gpu(0)
    assert (w.name, w.t0_s) == ("case", t0) and w.duration_s == pytest.approx(10.0)
    assert [e.label for e in w.edges] == ["case:start", "case:end"]
    assert g.energy_source == "counter" and g.energy_j == pytest.approx(685.0 * 10.0, rel=1e-4)
    assert w.energy_j == {0: g.energy_j}
    assert g.power_w_mean == pytest.approx(685.0) and g.power_w_p95 == pytest.approx(685.0)
    assert g.n_samples == 101 and g.sm_clock_mhz_mean == pytest.approx(1470.0)
    assert g.reason_shares == {"power_cap_frac": 1.0, "hw_slowdown_frac": 0.0, "thermal_frac": 0.0}
    assert g.idle is None  # nothing idle in a GEMM


def test_idle_window_gives_settled_idle_power_and_net_energy() -> None:
    s, _ = _sampler(_idle_then_gemm())
    s.begin_window("idle")
    s._loop(until_s=8.0)
    idle = s.end_window("idle").gpu(0).idle
    assert idle is not None and idle.power_w == pytest.approx(86.0) and 70 <= idle.n_samples <= 71  # from 1 s on
    s.begin_window("work")
    s._loop(until_s=30.0)
    g = s.end_window("work").gpu(0)
    # counter interpolated by the fake device between its first and last readings, 14,560 J over 30 s
    assert g.energy_source == "counter" and g.energy_j == pytest.approx(14_560.0 * 22.0 / 30.0, rel=1e-3)
    assert g.net_energy_j(idle.power_w) == pytest.approx(g.energy_j - 86.0 * 22.0)  # type: ignore[operator]
    assert g.net_energy_j(None) is None


def test_recorded_context_held_idle_has_no_settled_power() -> None:
    s, _ = _sampler(FakeBackend.from_file(TRACES / "h200-2026-12-02-idle-context-held.csv").trace, 0.05)
    s.begin_window("idle")
    s._loop(until_s=5.0)
    idle = s.end_window("idle").gpu(0).idle
    assert idle is not None and idle.power_w is None and idle.sm_clock_mhz == 1980.0


def test_window_after_the_fact_uses_the_nearest_edge_readings() -> None:
    s, _ = _sampler(build(make_samples("gemm", 30.0), edges(0.0, 30.0, energy_j=685.0 * 30.0)), edge_interval_s=1.0)
    s._loop(until_s=30.0)
    w = s.window("step", 10.25, 12.75)  # between the 1-s readings: the counter's mean power x 2.5 s
    g = w.gpu(0)
    assert g.energy_source == "counter" and g.energy_j == pytest.approx(685.0 * 2.5, rel=1e-3)
    assert g.n_samples == 25 and all(10.25 <= x.t_s <= 12.75 for x in w.samples)
    assert w.gpu(3).n_samples == 0 and w.gpu(3).energy_j is None  # a GPU the window does not have


def test_without_a_counter_energy_is_the_trapezoid_over_the_window() -> None:
    samples = [Sample(t_s=0.1 * i, gpu_index=0, power_instant_w=400.0) for i in range(51)]
    w = make_window("level", 0.0, 5.0, samples, [])
    assert (w.gpu(0).energy_source, w.gpu(0).energy_j) == ("integrated", pytest.approx(2000.0))
    # a counter that went backwards (driver reload) is not trusted
    back = (EdgeCounters(t_s=0.0, gpu_index=0, energy_mj=5000), EdgeCounters(t_s=5.0, gpu_index=0, energy_mj=10))
    assert window_energy_j(samples, back, (0.0, 5.0))[1] == "integrated"
    assert window_energy_j(samples[:1], None) == (None, "none")


def test_reason_shares_use_the_one_table() -> None:
    rows = [Sample(t_s=float(i), gpu_index=0, clock_event_reasons=m) for i, m in enumerate((0x4, 0x4, 0x8, 0x40))]
    assert reason_shares(rows) == {"power_cap_frac": 0.5, "hw_slowdown_frac": 0.25, "thermal_frac": 0.25}
    assert set(REASON_GROUPS) == {"power_cap_frac", "hw_slowdown_frac", "thermal_frac"}
    assert reason_shares([Sample(t_s=0.0, gpu_index=0)]) == {}


def test_windows_must_be_begun_once_and_ended_once() -> None:
    s, _ = _sampler(build(make_samples("idle", 5.0)))
    with pytest.raises(InputError, match="not begun"):
        s.end_window("x")
    s.begin_window("x")
    with pytest.raises(InputError, match="already open"):
        s.begin_window("x")
    s.end_window("x")


def test_keep_s_bounds_the_history_and_positions_hold() -> None:
    s, _ = _sampler(build(make_samples("idle", 100.0), edges(0.0, 100.0, energy_j=8600.0)), edge_interval_s=1.0,
                    keep_s=10.0)
    s._loop(until_s=100.0)
    kept = s.samples_since(0)
    assert 100 <= len(kept) <= 112 and kept[-1].t_s == pytest.approx(100.0)
    assert s.samples_since(1000)[0].t_s == pytest.approx(100.0)  # position 1000 = the 1001st sample ever
    assert 10 <= len(s.edges_since(0.0)) <= 13


def test_the_factory_opens_a_fake_backend_and_refuses_unknown_kinds() -> None:
    b = open_backend("fake", trace=TRACES / "h200-2026-12-02-idle.csv")
    assert [d.index for d in b.devices()] == [0]
    with pytest.raises(InputError, match="replays a trace"):
        open_backend("fake")
    with pytest.raises(InputError, match="unknown telemetry backend"):
        open_backend("rocm")  # type: ignore[arg-type]
