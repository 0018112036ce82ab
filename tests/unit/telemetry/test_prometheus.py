"""``gpumatch monitor --prometheus``: the live samples scraped over real HTTP under dcgm-exporter's names."""

from __future__ import annotations

import socket
import sys
import urllib.request
from pathlib import Path

import pytest

from gpumatch.errors import InputError
from gpumatch.telemetry.fake import FakeBackend
from gpumatch.telemetry.prometheus import PrometheusExporter, parse_listen
from gpumatch.telemetry.types import DeviceInfo, Sample

TRACE = Path(__file__).resolve().parents[2] / "data" / "traces" / "h200-2026-12-02-copy.csv"


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def test_listen_address() -> None:
    assert parse_listen("9400") == ("127.0.0.1", 9400)
    assert parse_listen("0.0.0.0:9500") == ("0.0.0.0", 9500)
    with pytest.raises(InputError, match="HOST:PORT"):
        parse_listen("localhost:http")


def test_samples_served_with_dcgm_names_units_and_labels() -> None:
    info = DeviceInfo(index=0, name="NVIDIA H200", uuid="GPU-1234")
    exp = PrometheusExporter([info], "127.0.0.1", 0).start()
    try:
        exp.update([Sample(t_s=0.0, gpu_index=0, power_avg_w=612.5, power_instant_w=700.0, sm_clock_mhz=1980.0,
                           gpu_temp_c=61.0, memory_used_bytes=2 * 2**30, gpm_tensor_active=42.0)])
        text = _scrape(exp.port)
    finally:
        exp.close()
    labels = f'Hostname="{socket.gethostname()}",UUID="GPU-1234",device="nvidia0",gpu="0",modelName="NVIDIA H200"'
    assert f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 612.5" in text
    assert f"DCGM_FI_DEV_POWER_USAGE_INSTANT{{{labels}}} 700.0" in text
    assert f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} 1980.0" in text
    assert f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 61.0" in text
    assert f"DCGM_FI_DEV_FB_USED{{{labels}}} 2048.0" in text
    assert f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{labels}}} 0.42" in text
    assert "DCGM_FI_DEV_MEM_CLOCK{" not in text  # not reported: no series


def test_monitor_serves_while_the_command_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpumatch.telemetry.nvml as nvml
    from gpumatch.record.monitor import run_monitor

    monkeypatch.setattr(nvml, "open_nvml", lambda gpus=None: FakeBackend.from_file(TRACE))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "scraped.txt"
    url = f"http://127.0.0.1:{port}/metrics"
    scrape = (f"import time, urllib.request; time.sleep(1.8); "
              f"open({str(out)!r}, 'w').write(urllib.request.urlopen({url!r}).read().decode())")
    run = run_monitor([sys.executable, "-c", scrape], 0.05, use_store=False, prometheus=f"127.0.0.1:{port}")
    assert run.result is not None
    text = out.read_text()
    assert 'DCGM_FI_DEV_POWER_USAGE{' in text and 'gpu="0"' in text and 'modelName="' in text
    with pytest.raises(OSError):  # closed with the monitor
        _scrape(port)
