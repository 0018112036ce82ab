"""Views of ``gpumatch doctor``: the environment summary, the preflight-check table and their CSV rows.

The report itself is :class:`gpumatch.telemetry.doctor.DoctorReport`; nothing here computes a figure.
CSV keeps what the table and the JSON show: the checks, then the manifest flattened to one row per leaf.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpumatch.report.render import key_values, to_table
from gpumatch.units import GIB

if TYPE_CHECKING:
    from gpumatch.telemetry.doctor import DoctorReport

CHECK_COLUMNS = ["check", "gpu", "verdict", "detail", "hint"]


def check_rows(report: DoctorReport) -> list[dict[str, Any]]:
    """One row per preflight check (``gpu`` empty for host-wide checks)."""
    return [{"check": c.name, "gpu": "" if c.gpu_index is None else c.gpu_index, "verdict": c.verdict,
             "detail": c.detail, "hint": c.hint} for c in report.checks]


def manifest_rows(m: dict[str, Any], note: str) -> list[dict[str, Any]]:
    """The manifest flattened to one row per leaf (``manifest.gpu.driver``), so that a CSV keeps
    what the table and JSON show; lists of objects are indexed (``manifest.gpu.devices.0.name``)."""
    out: list[dict[str, Any]] = []
    if note:
        out.append({"check": "manifest.note", "gpu": "", "verdict": "info", "detail": note, "hint": ""})

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}", x)
        elif isinstance(v, list) and v and any(isinstance(x, dict | list) for x in v):
            for i, x in enumerate(v):
                walk(f"{prefix}.{i}", x)
        else:
            text = ";".join(str(x) for x in v) if isinstance(v, list) else ("" if v is None else v)
            out.append({"check": prefix, "gpu": "", "verdict": "info", "detail": text, "hint": ""})

    walk("manifest", m)
    return out


def environment(m: dict[str, Any], note: str, machine_sha256: str = "") -> dict[str, Any]:
    """The few manifest fields a person checks first (GPUs, driver, CUDA, torch, host, gpumatch); ``m`` is the
    flat machine manifest (:mod:`gpumatch.telemetry.manifest`)."""
    view: dict[str, Any] = {}
    if note:
        view["GPU"] = f"none found: {note}"
    for g in m.get("gpu.devices") or []:
        mem = g.get("memory_total_bytes")
        view[f"GPU {g['index']}"] = (f"{g['name']} ({mem / GIB:.1f} GiB)" if mem else g["name"]) + (
            f", cc {g.get('compute_capability')}, {g.get('power_limit_enforced_w') or 0:.0f} W limit")
    view["driver"] = m.get("gpu.driver")
    view["CUDA (driver)"] = m.get("gpu.cuda_driver")
    torch = m.get("software.torch")
    view["torch"] = torch and f"{torch} (CUDA build {m.get('software.cuda')})"
    view["nvidia-ml-py"] = m.get("software.nvidia-ml-py")
    view["CPU"] = f"{m.get('host.cpu')} x{m.get('host.cpu_count')}"
    view["kernel / python"] = f"{m.get('host.kernel')} / {m.get('software.python')}"
    commit, dirty = m.get("software.gpumatch_commit") or "", m.get("software.gpumatch_dirty")
    view["gpumatch"] = f"{m.get('software.gpumatch')} {commit[:10]}{' (dirty)' if dirty else ''}"
    view["manifest hash"] = machine_sha256[:16]
    return view


def doctor_text(report: DoctorReport) -> str:
    """The table view: the environment, a blank line, then the checks with the overall verdict."""
    overall = report.overall.upper() + (" (no GPU checked)" if report.overall == "skip" else "")
    return "\n".join([key_values(environment(report.manifest.to_dict(), report.note,
                                                 report.manifest.machine_sha256), title="Environment"), "",
                      to_table(check_rows(report), CHECK_COLUMNS, title=f"Preflight checks: overall {overall}")])
