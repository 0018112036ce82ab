"""Golden: the rendered table of ``gpumatch plan`` for two seed examples (elapsed time masked).

Regenerate after an intended change: ``GPUMATCH_UPDATE_GOLDEN=1 pytest tests/golden/test_plan_golden.py`` and
review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpumatch.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("example", ["lowpower-small-inference", "dev-box"])
def test_plan_table_matches_golden(capsys: pytest.CaptureFixture[str], example: str) -> None:
    assert main(["plan", str(ROOT / "examples" / f"{example}.toml"), "--top", "2"]) == 0
    out = re.sub(r"in \d+\.\d+ s", "in <elapsed> s", capsys.readouterr().out)
    golden = HERE / f"plan-{example}.txt"
    if os.environ.get("GPUMATCH_UPDATE_GOLDEN"):
        golden.write_text(out)
    assert out == golden.read_text()
