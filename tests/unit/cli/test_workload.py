"""``gpumatch workload check FILE``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.cli.app import main

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_check_examples_json(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    assert main(["workload", "check", str(path), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["name"] == path.stem and d["model"]["params_total"] > 0 and d["task"]


def test_check_table_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    path = next(p for p in EXAMPLES if p.stem == "chat-70b-serving")
    assert main(["workload", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "targets.tpot_p50_s" in out and "llama-3.1-70b" in out
    assert main(["workload", "check", str(path), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("field,value\n")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('task = "serve"\nmodel = "llama-3.1-8b"\n[targets]\ntpot_p50 = 0.05\n', "did you mean 'tpot_p50_s'"),
        ('task = "serve"\nmodel = "gpt-5"\n', "field 'model'"),
        ("task = \n", "invalid TOML"),
    ],
)
def test_bad_file_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, says: str) -> None:
    p = tmp_path / "w.toml"
    p.write_text(text)
    assert main(["workload", "check", str(p)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and says in err and str(p) in err and err.count("\n") == 1


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["workload", "check", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
