"""``gpumatch doctor``: the environment manifest and the preflight checks of the GPUs here."""

from __future__ import annotations

import typer

from gpumatch.cli.common import Format, FormatOption, emit
from gpumatch.errors import GpumatchError
from gpumatch.report.doctor import CHECK_COLUMNS, check_rows, doctor_text, manifest_rows
from gpumatch.report.render import to_csv, to_json

HELP = (
    "Environment and preflight checks of this machine's GPUs (works without a GPU too).\n\n"
    'Checks: PCIe link under load, power limit (capped card, missing power cable), application/locked '
    'clocks, ECC and row remapping, MIG and persistence, foreign processes, temperature headroom, driver '
    "vs CUDA vs the torch build (is this card in torch's arch list), and PSU headroom (1.5x rule) with "
    '--psu-w.\n\n'
    'Exit code: 0 when nothing fails (warnings allowed; also on a machine with no GPU, where the overall '
    'verdict is SKIP), 3 when a check fails. --format csv gives the checks, then the environment manifest '
    "as rows 'manifest.KEY' with verdict 'info'.\n\n"
    'Examples:\n'
    '  gpumatch doctor\n'
    '  gpumatch doctor --psu-w 1600 --other-w 300\n'
    '  gpumatch doctor --format json > env.json'
)

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
    if fmt is Format.json:
        emit(to_json(report.to_dict()))
    elif fmt is Format.csv:  # the checks, then the whole manifest as 'manifest.KEY' rows (verdict 'info')
        manifest = report.manifest.to_dict() | {"machine_sha256": report.manifest.machine_sha256}
        emit(to_csv(check_rows(report) + manifest_rows(manifest, report.note), CHECK_COLUMNS))
    else:
        emit(doctor_text(report))
    if report.overall == "fail":
        failed = ", ".join(sorted({c.name for c in report.checks if c.verdict == "fail"}))
        raise PreflightFailed(f"preflight failed: {failed}", "see the hints in the table above")


class PreflightFailed(GpumatchError):
    """At least one check failed: exit code 3, "the command failed" (bad input stays 2), after the report."""

    exit_code = 3
