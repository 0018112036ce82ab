"""Real GPU traces (tests/data/traces/, recorded by benchmarks/record_telemetry_traces.py on an H200),
replayed through the fake device and the sampler, must get the labels their workloads deserve.

What ran is in each sidecar's ``meta.what_ran``; card, driver and date too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpumatch.telemetry.monitor import replay_trace
from gpumatch.telemetry.trace import read_trace
from gpumatch.telemetry.verdict import analyze, power_cap_duty

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
PREFIX = "h200-2026-12-02"


def _path(name: str) -> Path:
    p = DATA / f"{PREFIX}-{name}.csv"
    assert p.exists(), f"missing fixture {p.name}"
    return p


NAMES = ("idle", "idle-context-held", "gemm-bf16", "copy", "tiny-kernels", "spin")


class _Replays(dict[str, Any]):
    """Replays each fixture on first use (through FakeBackend + Sampler on a virtual clock)."""

    def __missing__(self, name: str) -> Any:
        self[name] = replay_trace(_path(name)).verdicts[0]
        return self[name]


@pytest.fixture(scope="module")
def replayed() -> _Replays:
    return _Replays()


def test_sidecars_say_what_ran_where() -> None:
    for name in NAMES:
        meta = json.loads(_path(name).with_suffix(".json").read_text())["meta"]
        assert "H200" in meta["card"] and meta["driver"] and meta["date_utc"].startswith("2026-12-02")
        assert meta["what_ran"] and meta["workload"] == name.removesuffix("-context-held")


def test_replay_gives_the_same_labels_as_the_recording(replayed) -> None:
    for name in NAMES:
        v = replayed[name]
        (direct,) = analyze(read_trace(_path(name)))
        assert (v.workload.label, v.verdict.label) == (direct.workload.label, direct.verdict.label), name


def test_idle_in_a_fresh_process(replayed) -> None:
    v = replayed["idle"]
    s = v.summary
    assert (v.workload.label, v.verdict.label) == ("idle", "valid")
    assert s.idle is not None and s.idle.power_w is not None and 40 < s.idle.power_w < 110
    assert s.idle.sm_clock_mhz is not None and s.idle.sm_clock_mhz < 1980
    # the trace opens with the clocks still up; settled idle power is well below that first reading
    first = read_trace(_path("idle")).samples[0]
    assert first.sm_clock_mhz == 1980.0 and first.power_avg_w is not None
    assert s.idle.power_w < 0.8 * first.power_avg_w and 0 < s.idle.settle_s < 10


def test_idle_with_a_cuda_context_held_never_settles(replayed) -> None:
    v = replayed["idle-context-held"]
    s = v.summary
    assert (v.workload.label, v.verdict.label) == ("idle", "valid")
    assert s.idle is not None and s.idle.power_w is None  # not reported as idle power: clocks stayed up
    assert s.idle.sm_clock_mhz == 1980.0
    assert s.power_avg_w_mean is not None and s.power_avg_w_mean > 100


def test_gemm_is_compute_bound_and_power_capped(replayed) -> None:
    v = replayed["gemm-bf16"]
    s = v.summary
    assert (v.workload.label, v.verdict.label) == ("compute-bound", "valid-power-capped")
    assert s.throttle_source == "violation_counters"
    assert power_cap_duty(s) > 0.5
    assert s.gpm_tensor_active_mean is not None and s.gpm_tensor_active_mean > 50
    assert s.power_avg_w_mean is not None and s.power_limit_w is not None
    assert s.power_avg_w_mean > 0.85 * s.power_limit_w
    assert s.energy_source == "counter"


def test_copy_is_memory_bound(replayed) -> None:
    v = replayed["copy"]
    assert (v.workload.label, v.verdict.label) == ("memory-bound", "valid")
    assert v.summary.gpm_dram_bw_util_mean is not None and v.summary.gpm_dram_bw_util_mean > 40


def test_tiny_kernels_are_host_bound_despite_nvml_utilization(replayed) -> None:
    v = replayed["tiny-kernels"]
    s = v.summary
    assert (v.workload.label, v.verdict.label) == ("host-bound", "valid")
    assert s.gpm_sm_active_mean is not None and s.gpm_sm_active_mean < 5
    assert s.util_gpu_pct_mean is not None and s.util_gpu_pct_mean > 20 > 5 * s.gpm_sm_active_mean
    assert s.power_avg_w_mean is not None and s.power_avg_w_mean < 0.3 * 700


def test_one_spinning_program_reads_busy_to_nvml_but_not_to_gpm(replayed) -> None:
    v = replayed["spin"]
    s = v.summary
    assert v.workload.label == "host-bound"
    assert s.util_gpu_pct_mean is not None and s.util_gpu_pct_mean > 75
    assert s.gpm_sm_active_mean is not None and s.gpm_sm_active_mean < 5


# --- `gpumatch monitor -- CMD` windows from a new-user session on an H200 (2026-12-03), exported from its
# results store with `gpumatch runs export`; the window opens ~5 s before the first kernel (Python, CUDA init)

MONITOR = ("monitor-gemm", "monitor-tiny-kernels")


def _monitor_path(name: str) -> Path:
    p = DATA / f"h200-2026-12-03-{name}.csv"
    assert p.exists(), f"missing fixture {p.name}"
    return p


@pytest.fixture(scope="module")
def monitored() -> dict[str, Any]:
    return {name: (replay_trace(_monitor_path(name)).verdicts[0], analyze(read_trace(_monitor_path(name)))[0])
            for name in MONITOR}


def test_monitor_sidecars_say_what_ran_and_what_was_labelled_then() -> None:
    for name in MONITOR:
        meta = json.loads(_monitor_path(name).with_suffix(".json").read_text())["meta"]
        assert "H200" in meta["card"] and meta["driver"] and meta["date_utc"].startswith("2026-12-03")
        assert meta["what_ran"] and meta["workload"] == name and meta["exported_from_run"]["kind"] == "monitor"
        assert meta["recorded_labels"][0]["workload"] == {"monitor-gemm": "compute-bound",
                                                          "monitor-tiny-kernels": "mixed"}[name]
    log = (DATA / "h200-2026-12-03-new-user-log.txt").read_text()  # what that session printed
    assert "dips in util_gpu_pct: 2, 16% of the time, longest 5.2 s" in log and "saved as run 2" in log


def test_monitored_gemm_is_compute_bound_power_capped_and_has_no_dips(monitored) -> None:
    for v in monitored["monitor-gemm"]:  # replayed, and analysed directly
        s = v.summary
        assert (v.workload.label, v.verdict.label) == ("compute-bound", "valid-power-capped")
        assert s.throttle_source == "violation_counters" and power_cap_duty(s) > 0.8
        assert s.energy_source == "counter"
        assert s.active is not None and 4.5 < s.active.lead_in_s < 5.5 and s.active.tail_s < 1.0
        assert 29 < s.active.duration_s < 31  # the 30-s loop
        assert all(d.count == 0 for d in s.dips)  # start-up and tail were reported as 2 dips of ~5 s before


def test_monitored_tiny_kernel_loop_is_host_bound(monitored) -> None:
    for v in monitored["monitor-tiny-kernels"]:
        s = v.summary
        assert (v.workload.label, v.verdict.label) == ("host-bound", "valid")
        assert s.util_gpu_pct_mean is not None and s.util_gpu_pct_mean < 16  # diluted by ~5 s of start-up
        a = s.active
        assert a is not None and 4.5 < a.lead_in_s < 5.5 and 9 < a.duration_s < 11  # the 10-s loop
        assert a.util_gpu_pct_mean is not None and a.util_gpu_pct_mean > 15
        assert a.gpm_sm_active_mean is not None and a.gpm_sm_active_mean < 0.1 * a.util_gpu_pct_mean
        assert s.power_avg_w_mean is not None and s.power_avg_w_mean < 0.2 * 700
        assert all(d.count == 0 for d in s.dips)


def test_monitor_prints_start_up_and_tail_not_dips(capsys) -> None:
    from gpumatch.cli.app import main

    assert main(["monitor", "--replay", str(_monitor_path("monitor-gemm")), "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "start-up 5.0 s before the first kernel" in out and "dips in" not in out
    assert main(["monitor", "--replay", str(_monitor_path("monitor-tiny-kernels")), "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "host-bound, valid" in out and "active 9.9 s of 15.2 s" in out
