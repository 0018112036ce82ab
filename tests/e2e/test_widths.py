"""No line of any command's table output is wider than the width it was given (issue 10, item 17), over the
seed examples, at 80 and 120 columns (``$COLUMNS``), measured in terminal columns (wide characters count 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.report.render import text_width

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
TRACE = ROOT / "tests" / "data" / "traces" / "h200-2026-12-02-gemm-bf16.csv"
WIDTHS = ("80", "120")

COMMANDS: list[list[str]] = [
    *[["plan", str(p)] for p in EXAMPLES],
    *[["plan", str(p), "--verbose"] for p in EXAMPLES],
    *[["workload", "check", str(p)] for p in EXAMPLES],
    *[["estimate", "--workload", str(p), "--gpu", "H100 SXM", "--count", "8"] for p in EXAMPLES],
    ["estimate", "--model", "llama-3.1-70b", "--gpu", "H100 SXM", "--precision", "fp16"],
    ["estimate", "--model", "llama-3.1-70b", "--gpu", "H100 SXM", "--count", "4", "--tp", "4", "--task", "serve",
     "--batch", "32"],
    ["estimate", "--model", "llama-3.2-1b", "--gpu", "H200 SXM", "--task", "train", "--batch", "4", "--seq", "2048",
     "--curve"],
    ["estimate", "--model", "llama-3.1-8b", "--gpu", "RTX 4090", "--task", "qlora", "--batch", "4", "--seq", "2048"],
    ["plan", "--model", "llama-3.1-70b", "--task", "serve", "--precision", "fp16", "--batch", "1", "--max-gpus", "1"],
    ["doctor", "--no-torch", "--no-pcie-load", "--psu-w", "1600"],
    ["models", "list"],
    ["models", "show", "llama-3.1-8b"],
    ["models", "show", "deepseek-v3"],
    ["gpus", "list"],
    ["gpus", "show", "H100 SXM"],
    ["gpus", "show", "RTX PRO 6000 Blackwell Workstation Edition"],
]


def _too_wide(out: str, width: int) -> list[str]:
    return [f"{text_width(line)}: {line}" for line in out.splitlines() if text_width(line) > width]


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(Path(x).name if "/" in x else x for x in a))
def test_table_output_fits_the_width(argv: list[str], columns: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    code = main(argv)
    out = capsys.readouterr().out
    assert code in (0, 1) and out, f"exit {code}"  # doctor exits 1 when a check fails; it still prints
    assert not _too_wide(out, int(columns))


@pytest.mark.parametrize("columns", WIDTHS)
def test_monitor_and_runs_output_fits_the_width(columns: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("GPUMATCH_HOME", str(tmp_path))
    monkeypatch.delenv("GPUMATCH_STORE", raising=False)
    outs = []
    for argv in (["monitor", "--replay", str(TRACE)], ["runs", "list"], ["runs", "show", "1"]):
        assert main(argv) == 0, argv
        outs.append(capsys.readouterr().out)
    assert all(outs) and not _too_wide("\n".join(outs), int(columns))
