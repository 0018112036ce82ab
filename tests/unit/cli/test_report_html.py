"""``gpumatch report``: a plan with no GPU and no store, and stored runs, as one offline HTML page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpumatch.cli.app import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "chat-70b-serving.toml"
EXPORT = ROOT / "tests" / "data" / "measurements" / "bench" / "2026-12-04-h200-standard.json"
TRACE = ROOT / "tests" / "data" / "traces" / "h200-2026-12-03-monitor-gemm.csv"


def test_report_of_a_plan_needs_no_gpu_and_no_store(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     home: Path) -> None:
    page = tmp_path / "plan.html"
    assert main(["report", str(EXAMPLE), "--html", str(page)]) == 0
    assert not (home / "results.sqlite").exists()  # nothing created
    text = page.read_text(encoding="utf-8")
    assert len(text.encode()) < 5_000_000
    assert "<script" not in text and not re.search(r'(src|href)="https?:', text)  # offline: nothing fetched
    for section in ("Shortlist by role", "Failed configurations", "Experiment plan", "Procurement re-check list",
                    "Roofline of B200 180GB", "Memory growth on B200 180GB", "Plain text (80 columns)"):
        assert section in text
    figures = re.findall(r'<figure class="plot" id="([^"]+)"><h4>[^<]*</h4><svg', text)
    assert figures == ["roofline-0", "memory-0"]
    assert "supply" in text.lower() and "warranty" in text.lower() and "qualified list" in text
    assert main(["report", str(EXAMPLE), "--html", str(page)]) == 2  # no silent overwrite
    assert "exists" in capsys.readouterr().err


def test_report_of_stored_runs_draws_telemetry_and_predictions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    monkeypatch.setenv("GPUMATCH_STORE", str(store))
    assert main(["monitor", "--replay", str(TRACE)]) == 0
    assert main(["bench", "import", str(EXPORT)]) == 0
    capsys.readouterr()
    page = tmp_path / "runs.html"
    assert main(["report", "--run", "1", "--run", "2", "--html", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    ids = re.findall(r'<figure class="plot" id="([^"]+)"', text)
    assert ids == ["tel-1", "pvm-2", "load-2"]
    assert "power cap" in text and "sustained (after): mean" in text
    assert "2026-12-04-h200-standard.json (run 1 there)" in text
    assert main(["report", "--run", "2"]) == 0  # text without --html
    assert "decode_step_s" in capsys.readouterr().out


def test_report_with_nothing_to_report_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"]) == 2
    assert "nothing to report" in capsys.readouterr().err


@pytest.fixture
def home() -> Path:
    import os

    return Path(os.environ["GPUMATCH_HOME"])
