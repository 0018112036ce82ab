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
    """The manifest flattened to one row per leaf (``manifest.driver.driver_version``), so that a CSV keeps
    what the table and JSON show; lists of objects are indexed (``manifest.gpus.0.name``)."""
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


def environment(m: dict[str, Any], note: str) -> dict[str, Any]:
    """The few manifest fields a person checks first (GPUs, driver, CUDA, torch, host, gpumatch)."""
    drv = m.get("driver") or {}
    sw = m.get("software") or {}
    host = m.get("host") or {}
    view: dict[str, Any] = {}
    if note:
        view["GPU"] = f"none found: {note}"
    for g in m.get("gpus", []):
        mem = g.get("memory_total_bytes")
        view[f"GPU {g['index']}"] = (f"{g['name']} ({mem / GIB:.1f} GiB)" if mem else g["name"]) + (
            f", cc {g.get('compute_capability')}, {g.get('power_limit_enforced_w') or 0:.0f} W limit")
    view["driver"] = drv.get("driver_version")
    view["CUDA (driver)"] = drv.get("cuda_driver_version_str")
    view["torch"] = sw.get("torch") and f"{sw['torch']} (CUDA build {sw.get('torch_cuda_build')})"
    view["nvidia-ml-py"] = sw.get("nvidia-ml-py")
    view["CPU"] = f"{host.get('cpu_model')} x{host.get('cpu_count')}"
    view["kernel / python"] = f"{host.get('kernel')} / {host.get('python')}"
    gm = m.get("gpumatch") or {}
    view["gpumatch"] = f"{gm.get('version')} {(gm.get('commit') or '')[:10]}{' (dirty)' if gm.get('dirty') else ''}"
    view["manifest hash"] = m.get("manifest_hash", "")[:16]
    return view


def doctor_text(report: DoctorReport) -> str:
    """The table view: the environment, a blank line, then the checks with the overall verdict."""
    overall = report.overall.upper() + (" (no GPU checked)" if report.overall == "skip" else "")
    return "\n".join([key_values(environment(report.manifest, report.note), title="Environment"), "",
                      to_table(check_rows(report), CHECK_COLUMNS, title=f"Preflight checks: overall {overall}")])
