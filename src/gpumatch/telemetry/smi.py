"""``nvidia-smi --query-gpu`` through a subprocess: the GPU facts of the machine manifest where NVML is not opened.

The bench's child process describes its machine this way (it has torch but maybe no pynvml, and only
:mod:`gpumatch.telemetry.nvml` imports pynvml). Standard library only: the GPU machine may have no numpy or
pydantic. Every value is read as nvidia-smi prints it with ``--format=csv,noheader,nounits``; ``[N/A]`` and
``[Not Supported]`` become None.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

SMI_FIELDS: dict[str, str] = {  # manifest name -> nvidia-smi --query-gpu field
    "gpu.name": "name", "gpu.uuid": "uuid", "gpu.vbios": "vbios_version", "gpu.driver": "driver_version",
    "gpu.memory_total_mib": "memory.total", "gpu.power_limit_w": "power.limit",
    "gpu.power_default_limit_w": "power.default_limit", "gpu.power_enforced_limit_w": "enforced.power.limit",
    "gpu.clocks_max_sm_mhz": "clocks.max.sm", "gpu.clocks_max_mem_mhz": "clocks.max.mem",
    "gpu.clocks_app_sm_mhz": "clocks.applications.graphics", "gpu.persistence_mode": "persistence_mode",
    "gpu.ecc_mode": "ecc.mode.current", "gpu.mig_mode": "mig.mode.current", "gpu.compute_mode": "compute_mode",
    "gpu.pcie_gen_max": "pcie.link.gen.max", "gpu.pcie_width_max": "pcie.link.width.max",
    "gpu.pcie_gen_current": "pcie.link.gen.current", "gpu.pcie_width_current": "pcie.link.width.current",
}
"""The ``gpu.*`` manifest fields nvidia-smi gives, with its own field names (``nvidia-smi --help-query-gpu``)."""

_NUMERIC = frozenset(n for n in SMI_FIELDS if n.endswith(("_mib", "_w", "_mhz")) or n.startswith("gpu.pcie_"))
"""Fields read as numbers; the others (name, UUID, VBIOS, driver version "580.10", modes) stay strings."""
_MISSING = ("", "[N/A]", "N/A", "[Not Supported]")


def query(fields: tuple[str, ...]) -> list[dict[str, str]]:
    """One dict per GPU of ``nvidia-smi --query-gpu=FIELDS`` (raw text); empty when nvidia-smi is absent, fails
    or refuses the query (a driver that does not know one field refuses the whole query)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [dict(zip(fields, (p.strip() for p in line.split(",")), strict=False))
            for line in out.strip().splitlines()]


def number(text: str | None) -> Any:
    """nvidia-smi's text as an int (integral values), a float, the text itself, or None (``[N/A]``...)."""
    if text is None or text.strip() in _MISSING:
        return None
    try:
        value = float(text)
    except ValueError:
        return text.strip()
    return int(value) if value.is_integer() else value


def smi_gpu_fields() -> dict[str, Any]:
    """The ``gpu.*`` manifest fields of GPU 0 and ``gpu.count`` from nvidia-smi: one query; if it is refused,
    one query per field, so the fields this driver knows are still recorded. ``{"gpu.count": 0}`` without
    nvidia-smi or a GPU."""
    names = tuple(SMI_FIELDS.values())
    rows = query(names)
    count = len(rows)
    if not rows and shutil.which("nvidia-smi"):
        per_field = {smi: query((smi,)) for smi in names}
        count = max((len(r) for r in per_field.values()), default=0)
        rows = [{smi: got[0].get(smi, "") for smi, got in per_field.items() if got}]
    if count == 0:
        return {"gpu.count": 0}
    first = rows[0]
    out: dict[str, Any] = {"gpu.count": count}
    for name, smi in SMI_FIELDS.items():
        value = number(first.get(smi))
        out[name] = value if name in _NUMERIC or value is None else str(first[smi]).strip()
    return out
