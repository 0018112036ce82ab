"""Server-side GPU telemetry (idle power, samples and energy since a time) over recorded H200 traces replayed by
the fake device (tests/data/traces): an idle GPU in a fresh process (its clocks fall from 1980 to 345 MHz 1.35 s
in) and an idle GPU with a CUDA context held (its clocks stay up: no settled idle power)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpumatch.errors import GpumatchError
from gpumatch.lab.serve_telemetry import ServerTelemetry, open_server_telemetry, serving_gpu_index
from gpumatch.telemetry.fake import FakeBackend

TRACES = Path(__file__).parents[2] / "data" / "traces"
IDLE = TRACES / "h200-2026-12-02-idle.csv"
TRACE = TRACES / "h200-2026-12-02-idle-context-held.csv"


def test_idle_power_samples_and_energy_since() -> None:
    tele = ServerTelemetry(FakeBackend.from_file(IDLE), 0, interval_s=0.02).start()
    try:
        idle = tele.measure_idle(3.0)
        mid = time.time()
        time.sleep(0.1)
        q = tele.query(mid)
        everything = tele.query(None)
    finally:
        tele.stop()
    # settled idle power: below the 126-128 W read while the clocks were still up, near the trace's settled 78 W
    assert idle is not None and 70.0 < idle < 110.0
    assert q["available"] and q["idle_power_w"] == idle and q["idle_window_s"] == 3.0
    assert q["samples"] and all(r["t_unix_s"] >= mid for r in q["samples"])
    assert len(everything["samples"]) > len(q["samples"]) and everything["energy"]
    assert {"power_instant_w", "sm_clock_mhz", "clock_event_reasons"} <= set(q["samples"][0])
    assert "t_s" not in q["samples"][0]
    assert everything["energy"][0]["energy_j"] > 0
    assert len(everything["energy"]) >= 3  # the energy counter read every second (and at the idle window's edges)


def test_no_idle_power_while_a_context_holds_the_clocks_up() -> None:
    tele = ServerTelemetry(FakeBackend.from_file(TRACE), 0, interval_s=0.02).start()
    try:
        assert tele.measure_idle(0.3) is None  # 1980 MHz, reasons 0x0: not an idle baseline
        assert tele.query(None)["idle_power_w"] is None
    finally:
        tele.stop()


def test_no_telemetry_on_a_cpu_and_unknown_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_server_telemetry("cpu") == (None, "the server runs on a CPU")
    with pytest.raises(GpumatchError, match="no GPU 3"):
        ServerTelemetry(FakeBackend.from_file(TRACE), 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert serving_gpu_index() == 2 and serving_gpu_index(1) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert serving_gpu_index() == 0 and serving_gpu_index(1) == 1
