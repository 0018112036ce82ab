"""The one backend factory: every caller that needs a machine's GPUs (doctor, monitor, bench, serve) opens them
here, by kind, and gets a :class:`gpumatch.telemetry.device.Backend`.

Kinds:

- ``nvml``: NVIDIA GPUs through NVML (:func:`gpumatch.telemetry.nvml.open_nvml`, the only caller of it);
  MissingDependencyError without nvidia-ml-py, NoDeviceError without a driver, a GPU or the asked index.
- ``fake``: a recorded trace replayed (:class:`gpumatch.telemetry.fake.FakeBackend`; ``trace`` is the file).

This is where another vendor's backend goes: an AMD one would be a module implementing the Device and Backend
protocols through ROCm SMI (``amdsmi``: power, clocks, throttle status, energy counter), added here as kind
``rocm``, its library imported only by that module, as ``pynvml`` is only by :mod:`gpumatch.telemetry.nvml`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from gpumatch.errors import InputError
from gpumatch.telemetry.device import Backend

BackendKind = Literal["nvml", "fake"]
KINDS: tuple[str, ...] = ("nvml", "fake")


def open_backend(kind: BackendKind = "nvml", gpus: Sequence[int] | None = None,
                 trace: Path | None = None) -> Backend:
    """Open the GPUs of ``kind`` (all, or the indices ``gpus``); ``trace``: the recorded trace a ``fake`` one
    replays. The caller closes it (``backend.close()``, or ``contextlib.closing``)."""
    if kind == "nvml":
        from gpumatch.telemetry import nvml

        return nvml.open_nvml(gpus)
    if kind == "fake":
        if trace is None:
            raise InputError("a fake telemetry backend replays a trace, and none was given",
                             "pass trace=PATH (a .csv or .parquet written by 'gpumatch monitor --output')")
        from gpumatch.telemetry.fake import FakeBackend

        return FakeBackend.from_file(trace)
    raise InputError(f"unknown telemetry backend {kind!r}", f"one of {', '.join(KINDS)}")
