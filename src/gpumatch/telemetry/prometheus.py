"""Live samples as Prometheus metrics under DCGM-exporter's names (``gpumatch monitor --prometheus HOST:PORT``).

An operator's dashboards already read NVIDIA dcgm-exporter (its ``etc/default-counters.csv`` names the fields;
the DCGM field ids are in DCGM's ``dcgm_fields.h``), so the monitor exposes what it samples under the same
names and labels (``gpu``, ``UUID``, ``device`` = ``nvidia<N>``, ``modelName``, ``Hostname``), in the same units:

| gpumatch sample key | metric | unit / conversion |
|---|---|---|
| ``power_avg_w`` | ``DCGM_FI_DEV_POWER_USAGE`` | W (NVML power usage: a 1-s average on Ampere and newer) |
| ``power_instant_w`` | ``DCGM_FI_DEV_POWER_USAGE_INSTANT`` | W |
| ``sm_clock_mhz``, ``mem_clock_mhz`` | ``DCGM_FI_DEV_SM_CLOCK``, ``DCGM_FI_DEV_MEM_CLOCK`` | MHz |
| ``gpu_temp_c``, ``mem_temp_c`` | ``DCGM_FI_DEV_GPU_TEMP``, ``DCGM_FI_DEV_MEMORY_TEMP`` | °C |
| ``util_gpu_pct``, ``util_mem_pct`` | ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_MEM_COPY_UTIL`` | % |
| ``memory_used_bytes`` | ``DCGM_FI_DEV_FB_USED`` | MiB (bytes / 2**20) |
| ``clock_event_reasons`` | ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` | NVML bit mask |
| ``gpm_sm_active`` | ``DCGM_FI_PROF_SM_ACTIVE`` | ratio 0-1 (percent / 100) |
| ``gpm_tensor_active`` | ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` | ratio 0-1 (percent / 100) |
| ``gpm_dram_bw_util`` | ``DCGM_FI_PROF_DRAM_ACTIVE`` | ratio 0-1 (percent / 100) |

A field the GPU does not report is not exposed for it (no series), as dcgm-exporter leaves a blank field out.
The server is prometheus-client's (``start_http_server``; ``/metrics``), on loopback unless told otherwise.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from typing import Any

from gpumatch.errors import InputError
from gpumatch.telemetry.types import DeviceInfo, Sample

DCGM_FIELDS: tuple[tuple[str, str, float, str], ...] = (
    ("power_avg_w", "DCGM_FI_DEV_POWER_USAGE", 1.0, "Power draw (in W)."),
    ("power_instant_w", "DCGM_FI_DEV_POWER_USAGE_INSTANT", 1.0, "Current instantaneous power draw (in W)."),
    ("sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK", 1.0, "SM clock frequency (in MHz)."),
    ("mem_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK", 1.0, "Memory clock frequency (in MHz)."),
    ("gpu_temp_c", "DCGM_FI_DEV_GPU_TEMP", 1.0, "GPU temperature (in C)."),
    ("mem_temp_c", "DCGM_FI_DEV_MEMORY_TEMP", 1.0, "Memory temperature (in C)."),
    ("util_gpu_pct", "DCGM_FI_DEV_GPU_UTIL", 1.0, "GPU utilization (in %)."),
    ("util_mem_pct", "DCGM_FI_DEV_MEM_COPY_UTIL", 1.0, "Memory utilization (in %)."),
    ("memory_used_bytes", "DCGM_FI_DEV_FB_USED", 1.0 / 2**20, "Framebuffer memory used (in MiB)."),
    ("clock_event_reasons", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1.0, "Current clock event reasons (bit mask)."),
    ("gpm_sm_active", "DCGM_FI_PROF_SM_ACTIVE", 0.01, "Ratio of cycles an SM has at least 1 warp assigned."),
    ("gpm_tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.01, "Ratio of cycles the tensor pipe is active."),
    ("gpm_dram_bw_util", "DCGM_FI_PROF_DRAM_ACTIVE", 0.01, "Ratio of cycles the device memory interface is "
     "active."),
)
"""(sample key, dcgm-exporter metric name, factor to its unit, help text)."""

LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``PORT`` (host 127.0.0.1: loopback by default) -> (host, port); InputError otherwise."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise InputError(f"--prometheus {text!r}: expected HOST:PORT or PORT", "e.g. --prometheus 127.0.0.1:9400")
    return (host.strip("[]") or "127.0.0.1"), number


class PrometheusExporter:
    """A registry of DCGM-named gauges, served over HTTP while the monitor runs; :meth:`update` with samples."""

    def __init__(self, devices: Sequence[DeviceInfo], host: str = "127.0.0.1", port: int = 9400) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        self.registry = CollectorRegistry()
        self._gauges = {key: (Gauge(name, doc, LABELS, registry=self.registry), factor)
                        for key, name, factor, doc in DCGM_FIELDS}
        hostname = socket.gethostname()
        self._labels = {d.index: (str(d.index), d.uuid or "", f"nvidia{d.index}", d.name, hostname) for d in devices}
        self.host, self.port = host, port
        self._server: Any = None
        self._thread: Any = None

    def start(self) -> PrometheusExporter:
        """Serve ``/metrics`` on (host, port); port 0 picks a free one (then :attr:`port` is the real one)."""
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as e:
            raise InputError(f"cannot serve Prometheus metrics on {self.host}:{self.port} ({e.strerror or e})",
                             "choose another --prometheus HOST:PORT") from e
        self.port = int(self._server.server_address[1])
        return self

    def update(self, samples: Iterable[Sample]) -> None:
        """Set each gauge to the newest value of each GPU (a None field sets nothing)."""
        for s in samples:
            labels = self._labels.get(s.gpu_index) or (str(s.gpu_index), "", f"nvidia{s.gpu_index}", "", "")
            for key, (gauge, factor) in self._gauges.items():
                value = getattr(s, key)
                if value is not None:
                    gauge.labels(*labels).set(float(value) * factor)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
