"""Golden: the rendered table of ``gpumatch plan`` for seed examples at a fixed width (elapsed time masked).

The expected text is read from the files next to this test; they are never written by a normal run. Regenerate
after an intended change: ``GPUMATCH_UPDATE_GOLDEN=1 pytest tests/golden/test_plan_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpumatch.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

CASES = [
    # (golden file, example, extra arguments, COLUMNS)
    ("plan-lowpower-small-inference.txt", "lowpower-small-inference", ["--top", "2"], "80"),
    ("plan-dev-box.txt", "dev-box", ["--top", "2"], "80"),
    ("plan-chat-70b-serving-80.txt", "chat-70b-serving", [], "80"),
]


@pytest.mark.parametrize(("golden", "example", "extra", "columns"), CASES, ids=[c[0] for c in CASES])
def test_plan_table_matches_golden(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, golden: str,
                                   example: str, extra: list[str], columns: str) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert main(["plan", str(ROOT / "examples" / f"{example}.toml"), *extra]) == 0
    out = re.sub(r"in \d+\.\d+ s", "in <elapsed> s", capsys.readouterr().out)
    path = HERE / golden
    if os.environ.get("GPUMATCH_UPDATE_GOLDEN"):
        path.write_text(out, encoding="utf-8")
    assert path.exists(), f"{path.name} is missing: run with GPUMATCH_UPDATE_GOLDEN=1 once and review it"
    assert out == path.read_text(encoding="utf-8")
