"""GPU telemetry while ``gpumatch serve`` runs, for a client to attribute energy to each of its load levels.

The telemetry sampler (:class:`gpumatch.telemetry.sampler.Sampler`, the one sampling thread) reads the serving
GPU's cheap fields (power, clocks, clock-event reasons, temperature) every :data:`INTERVAL_S` and the window-edge
counters, the cumulative energy counter among them, every :data:`ENERGY_INTERVAL_S` (it costs ~4 ms a read:
benchmark-method.md, section 2). The last :data:`KEEP_S` seconds are kept. :meth:`ServerTelemetry.measure_idle`
opens a telemetry window over a few seconds with no request and keeps its settled idle power
(:func:`gpumatch.telemetry.window.settled_idle_power`; None when the clocks did not settle): the idle power a
client subtracts for idle-subtracted energy.

``GET /gpumatch/telemetry?since=T`` returns (:meth:`ServerTelemetry.query`), with ``t_unix_s`` on every row::

    {"available": true, "gpu_index": 0, "gpu_name": ..., "interval_s": 0.1,
     "idle_power_w": 78.5, "idle_window_s": 3.0,
     "samples": [{"t_unix_s", "power_instant_w", "power_avg_w", "sm_clock_mhz", "mem_clock_mhz",
                  "clock_event_reasons", "gpu_temp_c", ...}],
     "energy": [{"t_unix_s", "energy_j"}]}

A client makes a telemetry window of those rows (:func:`gpumatch.loadgen.energy.level_energy`): its energy,
idle-subtracted energy and clock-reason shares follow :mod:`gpumatch.telemetry.window`. Without NVML (a CPU, no
driver) ``available`` is false with a reason.
"""

from __future__ import annotations

import os
import time
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.telemetry.sampler import Sampler

INTERVAL_S = 0.1
ENERGY_INTERVAL_S = 1.0
KEEP_S = 3600.0
MAX_ROWS = 200_000
"""Most sample rows one query returns (an hour at 10 Hz is 36,000)."""


def serving_gpu_index(cuda_index: int = 0) -> int:
    """The NVML index of the GPU torch calls ``cuda:<cuda_index>``: that entry of ``CUDA_VISIBLE_DEVICES`` when it
    lists integers, else ``cuda_index`` (NVML numbers GPUs in PCI order and ignores that variable; CUDA's default
    order agrees with it on a machine of identical GPUs)."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if cuda_index < len(visible) and visible[cuda_index].isdigit():
        return int(visible[cuda_index])
    return cuda_index


class ServerTelemetry:
    """Sampling of one GPU of ``backend`` (a :class:`gpumatch.telemetry.device.Backend`) in the sampler's thread."""

    def __init__(self, backend: Any, gpu_index: int = 0, interval_s: float = INTERVAL_S) -> None:
        devices = {d.index: d for d in backend.devices()}
        if gpu_index not in devices:
            raise GpumatchError(f"no GPU {gpu_index} for telemetry (there are {sorted(devices)})")
        self.backend, self.device, self.interval_s = backend, devices[gpu_index], interval_s
        self.gpu_index = gpu_index
        self.idle_power_w: float | None = None
        self.idle_window_s = 0.0
        self.sampler = Sampler(backend, interval_s, gpus=[gpu_index], edge_interval_s=ENERGY_INTERVAL_S,
                               keep_s=KEEP_S)

    def start(self) -> ServerTelemetry:
        self.sampler.start()
        return self

    def stop(self) -> None:
        self.sampler.stop()
        self.backend.close()

    def measure_idle(self, seconds: float) -> float | None:
        """The settled idle power (W) of a window over the next ``seconds`` (no request running); None without
        power readings or when the clocks did not settle (module docstring)."""
        if seconds <= 0:
            return None
        self.sampler.begin_window("idle")
        time.sleep(seconds)
        idle = self.sampler.end_window("idle").gpu(self.gpu_index).idle
        self.idle_power_w = None if idle is None else idle.power_w
        self.idle_window_s = seconds
        return self.idle_power_w

    def query(self, since: float | None) -> dict[str, Any]:
        """The JSON of ``/gpumatch/telemetry`` (module docstring): rows at or after ``since`` (UNIX seconds)."""
        origin = self.sampler.started_unix_s
        lo = -float("inf") if since is None else since - origin
        samples = []
        for s in self.sampler.samples_between(lo, float("inf"))[-MAX_ROWS:]:
            row = s.to_dict()
            row["t_unix_s"] = origin + float(row.pop("t_s") or 0.0)
            samples.append(row)
        energy = [{"t_unix_s": origin + e.t_s, "energy_j": e.energy_mj / 1000.0}
                  for e in self.sampler.edges_since(lo) if e.energy_mj is not None]
        return {"available": True, "gpu_index": self.gpu_index, "gpu_name": self.device.info().name,
                "interval_s": self.interval_s, "idle_power_w": self.idle_power_w,
                "idle_window_s": self.idle_window_s, "samples": samples, "energy": energy}


def open_server_telemetry(device: str) -> tuple[ServerTelemetry | None, str]:
    """Telemetry of the serving GPU (``device``: ``cuda:N`` or ``cpu``) when NVML opens; else None and the reason."""
    if not device.startswith("cuda"):
        return None, "the server runs on a CPU"
    index = serving_gpu_index(int(device.partition(":")[2] or 0))
    try:
        from gpumatch.telemetry.backends import open_backend

        return ServerTelemetry(open_backend("nvml", gpus=[index]), index).start(), ""
    except (GpumatchError, ImportError, OSError) as e:
        return None, f"NVML is not available ({e})"
