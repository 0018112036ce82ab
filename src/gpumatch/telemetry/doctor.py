"""``gpumatch doctor`` as a library call: the environment manifest plus every preflight check.

Works on a machine without a GPU, NVML or torch: the report then says so and the GPU checks are
skipped (the CLI exits 0 in that case).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpumatch.errors import MissingDependencyError, NoDeviceError
from gpumatch.telemetry.device import Backend
from gpumatch.telemetry.manifest import Manifest, machine_manifest
from gpumatch.telemetry.preflight import Check, GpuFacts, MachineFacts, run_checks, worst
from gpumatch.telemetry.probe import TorchBuild, pcie_under_load, probe_torch


@dataclass(frozen=True)
class DoctorReport:
    """Manifest, checks, and whether a GPU was found (``note`` says why not).

    ``overall``: ``fail``, ``warn``, ``pass``, or ``skip`` when no GPU was checked and nothing failed.
    """

    manifest: Manifest
    checks: list[Check]
    gpu_found: bool
    note: str
    overall: str

    def to_dict(self) -> dict[str, Any]:
        return {"overall": self.overall, "gpu_found": self.gpu_found, "note": self.note,
                "checks": [c.to_dict() for c in self.checks], "manifest": self.manifest.to_dict(),
                "machine_sha256": self.manifest.machine_sha256}


def _open_default() -> Backend:
    from gpumatch.telemetry.backends import open_backend

    return open_backend("nvml")


def run_doctor(
    psu_w: float | None = None,
    other_load_w: float = 0.0,
    pcie_load: bool = True,
    torch_probe: bool = True,
    python: str = sys.executable,
    open_backend: Callable[[], Backend] | None = None,
) -> DoctorReport:
    """Gather facts (NVML, a torch probe in a subprocess, a short PCIe load) and run the checks.

    ``pcie_load``: copy host->device for ~2 s in a subprocess to read the link under load (needs
    a CUDA torch). ``open_backend``: for tests (a fake backend).
    """
    note = ""
    backend: Backend | None = None
    try:
        backend = (open_backend or _open_default)()
    except (NoDeviceError, MissingDependencyError) as e:
        note = e.message
    try:
        tb = probe_torch(python) if torch_probe else None
        gpus = _gpu_facts(backend, tb, pcie_load, python)
        facts = MachineFacts(system=backend.system() if backend else None, gpus=gpus, torch=tb,
                             own_pids=frozenset({os.getpid()}), psu_w=psu_w, other_load_w=other_load_w,
                             torch_probed=torch_probe)
        checks = run_checks(facts)
        manifest = machine_manifest(backend, tb)
    finally:
        if backend is not None:
            backend.close()
    return DoctorReport(manifest, checks, backend is not None, note, overall_verdict(checks, bool(gpus)))


def overall_verdict(checks: list[Check], gpu_checked: bool) -> str:
    """fail > warn > pass, but ``skip`` when nothing failed or warned and no GPU was checked (a machine
    without a GPU, or every check skipped): "pass" there read as if the GPUs had been found healthy."""
    overall = worst(checks)
    if overall == "pass" and (not gpu_checked or all(c.verdict == "skip" for c in checks)):
        return "skip"
    return overall


def _gpu_facts(backend: Backend | None, tb: TorchBuild | None, pcie_load: bool, python: str) -> tuple[GpuFacts, ...]:
    if backend is None:
        return ()
    devices = list(backend.devices())
    loads = pcie_under_load(devices, python) if pcie_load and tb is not None and tb.cuda_available else {}
    return tuple(
        GpuFacts(info=d.info(), sample=d.sample(0.0), edges=d.edge_counters(0.0), processes=tuple(d.processes()),
                 pcie_under_load=loads.get(d.index))
        for d in devices
    )
