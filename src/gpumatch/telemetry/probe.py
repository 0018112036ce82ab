"""Probes that need torch, run in a subprocess so that telemetry never imports torch.

- :func:`probe_torch`: torch's version, the CUDA version it was built for, and its compiled arch list
  (``torch.cuda.get_arch_list()``), to check the card against the framework build (seed 001,
  误区四 "旧卡不跑新框架": an old card may not run a new framework build).
- :func:`pcie_under_load`: the PCIe link while host-to-device copies run, because NVML's "current"
  link "may be reduced when the GPU is not in use" (nvml.h; benchmark-method.md section 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpumatch.telemetry.device import Device

_TORCH_SCRIPT = (
    "import json, torch\n"
    "ok = torch.cuda.is_available()\n"
    "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, 'cuda_available': ok,\n"
    "                  'arch_list': torch.cuda.get_arch_list() if ok else []}))\n"
)

_COPY_SCRIPT = (
    "import sys, time, torch\n"
    "idx = [int(x) for x in sys.argv[1].split(',')]; dur = float(sys.argv[2])\n"
    "bufs = [(torch.empty(1 << 28, dtype=torch.uint8, pin_memory=True),\n"
    "         torch.empty(1 << 28, dtype=torch.uint8, device=f'cuda:{i}')) for i in idx]\n"
    "for h, _ in bufs: h.fill_(1)\n"
    "print('ready', flush=True)\n"
    "t = time.time()\n"
    "while time.time() - t < dur:\n"
    "    for h, d in bufs: d.copy_(h, non_blocking=True)\n"
    "    for i in idx: torch.cuda.synchronize(i)\n"
)


@dataclass(frozen=True)
class TorchBuild:
    """What the torch in ``python`` was built for (``error`` set when it could not be read)."""

    version: str | None
    cuda: str | None
    cuda_available: bool
    arch_list: tuple[str, ...]
    error: str = ""


def probe_torch(python: str = sys.executable, timeout_s: float = 120.0) -> TorchBuild | None:
    """Run ``python -c 'import torch …'``; None when torch is not installed there."""
    try:
        out = subprocess.run([python, "-c", _TORCH_SCRIPT], capture_output=True, text=True, timeout=timeout_s,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return TorchBuild(None, None, False, (), error=f"{type(e).__name__}: {e}")
    if out.returncode != 0:
        if "No module named 'torch'" in out.stderr:
            return None
        tail = out.stderr.strip().splitlines()[-1:] or ["exit code " + str(out.returncode)]
        return TorchBuild(None, None, False, (), error=tail[0])
    try:
        d = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return TorchBuild(None, None, False, (), error="unreadable output from the torch probe")
    return TorchBuild(d.get("version"), d.get("cuda"), bool(d.get("cuda_available")), tuple(d.get("arch_list") or ()))


def pcie_under_load(devices: Sequence[Device], python: str = sys.executable, seconds: float = 2.0,
                    poll_s: float = 0.05) -> dict[int, tuple[int | None, int | None]]:
    """Highest PCIe (generation, width) seen per GPU while a subprocess copies host->device.

    Returns {} when torch is not usable there. CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's device
    numbers match NVML's.
    """
    if not devices:
        return {}
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    idx = ",".join(str(d.index) for d in devices)
    try:
        proc = subprocess.Popen([python, "-c", _COPY_SCRIPT, idx, str(seconds)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
    except OSError:
        return {}
    best: dict[int, tuple[int | None, int | None]] = {}
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip() == "ready"
    while ready and proc.poll() is None:
        for d in devices:
            link = d.pcie_link()
            old = best.get(d.index, (None, None))
            best[d.index] = (_max(old[0], link[0]), _max(old[1], link[1]))
        time.sleep(poll_s)
    proc.wait(timeout=30)
    return best if ready else {}


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)
