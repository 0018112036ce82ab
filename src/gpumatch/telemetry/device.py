"""The Device protocol: what the sampler, the preflight checks and the manifest need from a GPU.

Two implementations: :mod:`gpumatch.telemetry.nvml` (a real NVIDIA GPU through NVML) and
:mod:`gpumatch.telemetry.fake` (replays a recorded trace, so everything downstream is testable
without a GPU). A :class:`Backend` opens the devices of one machine and knows its driver.

Cost classes, from the H200 probe (../shared/notes/benchmark-method.md section 3): ``sample()``
reads only cheap fields (each a few µs, all together well under 1 ms); ``gpm()`` is meant to be
called about once a second; ``edge_counters()`` includes the ~4 ms energy read and is meant for
window edges only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from gpumatch.telemetry.types import DeviceInfo, EdgeCounters, GpmMetrics, GpuProcess, Sample, SystemInfo, XidEvent


@runtime_checkable
class Device(Protocol):
    """One GPU. Methods never raise for an unsupported field; they return ``None`` in its place."""

    @property
    def index(self) -> int: ...

    def info(self) -> DeviceInfo:
        """Static facts (names, limits, maxima, modes, thresholds)."""
        ...

    def sample(self, t_s: float) -> Sample:
        """Cheap fields now, stamped ``t_s`` (seconds on the caller's clock). GPM fields stay None."""
        ...

    def gpm(self) -> GpmMetrics | None:
        """GPM metrics since the previous call (None on the first call or where unsupported)."""
        ...

    def edge_counters(self, t_s: float) -> EdgeCounters:
        """Cumulative counters (energy, violations, ECC, replays, remaps, PCIe link) now."""
        ...

    def processes(self) -> list[GpuProcess]:
        """Compute and graphics processes holding a context on this GPU."""
        ...

    def pcie_link(self) -> tuple[int | None, int | None]:
        """Current PCIe (generation, width); cheap enough to poll while a transfer runs."""
        ...


@runtime_checkable
class Backend(Protocol):
    """A machine's GPUs and driver. ``close()`` releases the library (NVML shutdown)."""

    def system(self) -> SystemInfo: ...

    def devices(self) -> Sequence[Device]: ...

    def poll_xid(self, t_s: float) -> list[XidEvent]:
        """Critical Xid events that arrived since the last poll (never blocks)."""
        ...

    def close(self) -> None: ...
