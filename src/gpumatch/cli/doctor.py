"""``gpumatch doctor``: the environment manifest and the preflight checks of the GPUs here."""

from __future__ import annotations

from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit
from gpumatch.errors import GpumatchError
from gpumatch.report.render import key_values, to_csv, to_json, to_table

HELP = (
    "Environment and preflight checks of this machine's GPUs (works without a GPU too).\n\n"
    'Checks: PCIe link under load, power limit (capped card, missing power cable), application/locked '
    'clocks, ECC and row remapping, MIG and persistence, foreign processes, temperature headroom, driver '
    "vs CUDA vs the torch build (is this card in torch's arch list), and PSU headroom (1.5x rule) with "
    '--psu-w.\n\n'
    'Exit code: 0 when nothing fails (warnings allowed; also on a machine with no GPU, where the overall '
    'verdict is SKIP), 1 when a check fails. --format csv gives the checks, then the environment manifest '
    "as rows 'manifest.KEY' with verdict 'info'.\n\n"
    'Examples:\n'
    '  gpumatch doctor\n'
    '  gpumatch doctor --psu-w 1600 --other-w 300\n'
    '  gpumatch doctor --format json > env.json'
)

_CHECK_COLUMNS = ["check", "gpu", "verdict", "detail", "hint"]


def doctor(
    psu_w: str = typer.Option("", "--psu-w", help="PSU rating, e.g. 1600 or 1.6kW: checks the 1.5x headroom rule."),
    other_w: str = typer.Option("0", "--other-w", help="Other load on that PSU (CPU, disks, fans), e.g. 300W."),
    pcie_load: bool = typer.Option(True, "--pcie-load/--no-pcie-load",
                                   help="Copy host->GPU for ~2 s (needs CUDA torch) to read the PCIe link under load."),
    torch_probe: bool = typer.Option(True, "--torch/--no-torch", help="Probe the torch build in a subprocess."),
    fmt: Format = FormatOption,
) -> None:
    import sys

    from gpumatch.telemetry.doctor import run_doctor
    from gpumatch.units import parse_power

    psu, other = (parse_power(psu_w) if psu_w else None), parse_power(other_w)
    if torch_probe or pcie_load:
        sys.stderr.write("gpumatch: reading NVML, probing torch and the PCIe link under load (a few seconds)...\n")
    report = run_doctor(psu_w=psu, other_load_w=other,
                        pcie_load=pcie_load, torch_probe=torch_probe)
    rows = [{"check": c.name, "gpu": "" if c.gpu_index is None else c.gpu_index, "verdict": c.verdict,
             "detail": c.detail, "hint": c.hint} for c in report.checks]
    if fmt is Format.json:
        emit(to_json(report.to_dict()))
    elif fmt is Format.csv:  # the checks, then the whole manifest as 'manifest.KEY' rows (verdict 'info')
        emit(to_csv(rows + _manifest_rows(report.manifest, report.note), _CHECK_COLUMNS))
    else:
        emit(key_values(_environment(report.manifest, report.note), title="Environment"))
        emit("")
        overall = report.overall.upper() + (" (no GPU checked)" if report.overall == "skip" else "")
        emit(to_table(rows, _CHECK_COLUMNS, title=f"Preflight checks: overall {overall}"))
    if report.overall == "fail":
        failed = ", ".join(sorted({c.name for c in report.checks if c.verdict == "fail"}))
        raise PreflightFailed(f"preflight failed: {failed}", "see the hints in the table above")


class PreflightFailed(GpumatchError):
    """At least one check failed: exit code 3, "the command failed" (bad input stays 2), after the report."""

    exit_code = 3


def _manifest_rows(m: dict[str, Any], note: str) -> list[dict[str, Any]]:
    """The manifest flattened to one row per leaf (``manifest.driver.driver_version``), so that a CSV
    keeps what the table and JSON show; lists are indexed (``manifest.gpus.0.name``)."""
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


def _environment(m: dict[str, Any], note: str) -> dict[str, Any]:
    drv = m.get("driver") or {}
    sw = m.get("software") or {}
    host = m.get("host") or {}
    view: dict[str, Any] = {}
    if note:
        view["GPU"] = f"none found: {note}"
    for g in m.get("gpus", []):
        mem = g.get("memory_total_bytes")
        view[f"GPU {g['index']}"] = (f"{g['name']} ({mem / 2**30:.1f} GiB)" if mem else g["name"]) + (
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
