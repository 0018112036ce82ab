"""GPU telemetry while ``gpumatch serve`` runs, for a client to attribute energy to each of its load levels.

A thread reads the serving GPU's cheap fields (power, clocks, clock-event reasons, temperature; NVML through
:mod:`gpumatch.telemetry`) every :data:`INTERVAL_S` and the cumulative energy counter every
:data:`ENERGY_INTERVAL_S` (it costs ~4 ms a read: benchmark-method.md, section 2). The last :data:`KEEP_S` seconds
are kept (a bounded ring). Before serving, :meth:`ServerTelemetry.measure_idle` takes the mean power over a few
seconds with the model loaded and no request: the idle power a client subtracts for idle-subtracted energy.

``GET /gpumatch/telemetry?since=T`` returns (:meth:`ServerTelemetry.query`), with ``t_unix_s`` on every row::

    {"available": true, "gpu_index": 0, "gpu_name": ..., "interval_s": 0.1,
     "idle_power_w": 112.3, "idle_window_s": 3.0,
     "samples": [{"t_unix_s", "power_instant_w", "power_avg_w", "sm_clock_mhz", "mem_clock_mhz",
                  "clock_event_reasons", "gpu_temp_c", ...}],
     "energy": [{"t_unix_s", "energy_j"}]}

Energy of a window = the difference of the ``energy`` rows at its edges (NVML's total-energy counter, mJ since
driver load, here in J) or the power samples integrated; idle-subtracted = that minus ``idle_power_w`` x the
window. Throttle fractions = the share of samples whose ``clock_event_reasons`` has a given bit
(:data:`gpumatch.lab.telemetry.REASON_BITS`). Without NVML (a CPU, no driver) ``available`` is false with a reason.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque
from typing import Any

from gpumatch.errors import GpumatchError

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
    """Sampling of one GPU of ``backend`` (a :class:`gpumatch.telemetry.device.Backend`) in a thread."""

    def __init__(self, backend: Any, gpu_index: int = 0, interval_s: float = INTERVAL_S) -> None:
        devices = {d.index: d for d in backend.devices()}
        if gpu_index not in devices:
            raise GpumatchError(f"no GPU {gpu_index} for telemetry (there are {sorted(devices)})")
        self.backend, self.device, self.interval_s = backend, devices[gpu_index], interval_s
        self.gpu_index = gpu_index
        self.idle_power_w: float | None = None
        self.idle_window_s = 0.0
        keep = int(KEEP_S / interval_s)
        self._samples: deque[dict[str, Any]] = deque(maxlen=keep)
        self._energy: deque[dict[str, Any]] = deque(maxlen=int(KEEP_S / ENERGY_INTERVAL_S))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="gpumatch-serve-telemetry", daemon=True)

    def start(self) -> ServerTelemetry:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.backend.close()

    def _loop(self) -> None:
        next_energy = 0.0
        while not self._stop.is_set():
            t = time.monotonic()
            now = time.time()
            row = self.device.sample(t - self._t0).to_dict()
            row.pop("t_s", None)
            row["t_unix_s"] = now
            with self._lock:
                self._samples.append(row)
            if t >= next_energy:
                mj = self.device.edge_counters(t - self._t0).energy_mj
                if mj is not None:
                    with self._lock:
                        self._energy.append({"t_unix_s": now, "energy_j": mj / 1000.0})
                next_energy = t + ENERGY_INTERVAL_S
            self._stop.wait(max(self.interval_s - (time.monotonic() - t), 0.0))

    def measure_idle(self, seconds: float) -> float | None:
        """Mean power (W) over the next ``seconds`` (the server idle, model loaded); None without power readings."""
        if seconds <= 0:
            return None
        t0 = time.time()
        time.sleep(seconds)
        with self._lock:
            watts = [r["power_instant_w"] if r.get("power_instant_w") is not None else r.get("power_avg_w")
                     for r in self._samples if r["t_unix_s"] >= t0]
        values = [w for w in watts if w is not None]
        self.idle_power_w = statistics.fmean(values) if values else None
        self.idle_window_s = seconds
        return self.idle_power_w

    def query(self, since: float | None) -> dict[str, Any]:
        """The JSON of ``/gpumatch/telemetry`` (module docstring): rows at or after ``since`` (UNIX seconds)."""
        lo = since if since is not None else 0.0
        with self._lock:
            samples = [r for r in self._samples if r["t_unix_s"] >= lo][-MAX_ROWS:]
            energy = [r for r in self._energy if r["t_unix_s"] >= lo]
        return {"available": True, "gpu_index": self.gpu_index, "gpu_name": self.device.info().name,
                "interval_s": self.interval_s, "idle_power_w": self.idle_power_w,
                "idle_window_s": self.idle_window_s, "samples": samples, "energy": energy}


def open_server_telemetry(device: str) -> tuple[ServerTelemetry | None, str]:
    """Telemetry of the serving GPU (``device``: ``cuda:N`` or ``cpu``) when NVML opens; else None and the reason."""
    if not device.startswith("cuda"):
        return None, "the server runs on a CPU"
    index = int(device.partition(":")[2] or 0)
    try:
        from gpumatch.telemetry.nvml import open_nvml

        return ServerTelemetry(open_nvml(None), serving_gpu_index(index)).start(), ""
    except (GpumatchError, ImportError, OSError) as e:
        return None, f"NVML is not available ({e})"
