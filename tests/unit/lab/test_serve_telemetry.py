"""Server-side GPU telemetry (idle power, samples and energy since a time) over a recorded H200 trace replayed by
the fake device: the idle trace was recorded on an H200 with a CUDA context held (tests/data/traces)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpumatch.errors import GpumatchError
from gpumatch.lab.serve_telemetry import ServerTelemetry, open_server_telemetry, serving_gpu_index
from gpumatch.telemetry.fake import FakeBackend

TRACE = Path(__file__).parents[2] / "data" / "traces" / "h200-2026-12-02-idle-context-held.csv"


def test_idle_power_samples_and_energy_since() -> None:
    tele = ServerTelemetry(FakeBackend.from_file(TRACE), 0, interval_s=0.02).start()
    try:
        idle = tele.measure_idle(0.3)
        mid = time.time()
        time.sleep(0.1)
        q = tele.query(mid)
        everything = tele.query(None)
    finally:
        tele.stop()
    assert idle is not None and 60.0 < idle < 200.0  # an idle H200 with a context: about 116 W in this trace
    assert q["available"] and q["idle_power_w"] == idle and q["idle_window_s"] == 0.3
    assert q["samples"] and all(r["t_unix_s"] >= mid for r in q["samples"])
    assert len(everything["samples"]) > len(q["samples"]) and everything["energy"]
    assert {"power_instant_w", "sm_clock_mhz", "clock_event_reasons"} <= set(q["samples"][0])
    assert everything["energy"][0]["energy_j"] > 0


def test_no_telemetry_on_a_cpu_and_unknown_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_server_telemetry("cpu") == (None, "the server runs on a CPU")
    with pytest.raises(GpumatchError, match="no GPU 3"):
        ServerTelemetry(FakeBackend.from_file(TRACE), 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert serving_gpu_index() == 2 and serving_gpu_index(1) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert serving_gpu_index() == 0 and serving_gpu_index(1) == 1
