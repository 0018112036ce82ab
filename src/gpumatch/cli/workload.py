"""``gpumatch workload check FILE``: validate a workload file and print it resolved (SI units, defaults)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpumatch.cli.common import Format, FormatOption, emit_object

app = typer.Typer(help="Workload files (what to run, targets, limits, budget).", no_args_is_help=True)

PATH_ARGUMENT = typer.Argument(..., help="Workload file (.toml, or .yaml with PyYAML installed).")


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v and k != "usd_per_gpu_hour" and not key.startswith("role_weights"):
            out.update(_flat(v, key + "."))
        elif v not in (None, "", [], {}):
            out[key] = v
    return out


@app.command(
    "check",
    help="Validate a workload file and show it resolved. Example: gpumatch workload check examples/dev-box.toml",
)
def check(
    path: Path = PATH_ARGUMENT,
    fmt: Format = FormatOption,
) -> None:
    from gpumatch.workload import load_workload

    w = load_workload(path)
    d = w.to_dict()
    emit_object(d, fmt, _flat(d))
