"""The NVML backend on a real GPU (marked ``gpu``; skipped where NVML or a GPU is missing).

Ran on an H200 through benchmarks/record_telemetry_traces.py on 2026-12-02 (see tests/data/traces/);
these checks repeat the essentials wherever the suite runs on a GPU.
"""

from __future__ import annotations

import time

import pytest

from gpumatch.errors import GpumatchError

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend():
    from gpumatch.telemetry.nvml import open_nvml

    try:
        b = open_nvml()
    except GpumatchError as e:
        pytest.skip(f"no GPU here: {e.message}")
    yield b
    b.close()


def test_cheap_fields_are_read_and_cheap(backend) -> None:
    d = backend.devices()[0]
    t0 = time.perf_counter()
    s = d.sample(0.0)
    assert time.perf_counter() - t0 < 0.005  # 27-43 µs on the H200
    assert s.sm_clock_mhz and s.gpu_temp_c is not None
    assert (s.power_avg_w or s.power_instant_w or 0) > 0


def test_info_edges_and_a_short_recording(backend) -> None:
    from gpumatch.telemetry.sampler import Sampler
    from gpumatch.telemetry.verdict import analyze

    info = backend.devices()[0].info()
    assert info.name and info.uuid and info.power_limit_enforced_w
    with Sampler(backend, 0.05) as s:
        time.sleep(1.5)
    tr = s.trace
    assert tr is not None and len(tr.samples) >= 20 * len(backend.devices())
    assert [e.label for e in tr.edges][:1] == ["start"]
    assert len(analyze(tr)) == len(backend.devices())
