"""``gpumatch report --run A --run B``: several stored bench runs side by side (issue 15 item 2).

The two committed H200 quick exports are real runs (no raw timings stored, so no intervals). The run on a
second card is SYNTHETIC: a copy of the 2026-12-05 H200 export written in tmp_path with ``gpu.name`` set to an
H100, a different torch, and made-up raw timings (seeded) so that the bootstrap intervals can be checked."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpumatch.cli.app import main
from gpumatch.report.render import text_width

BENCH = Path(__file__).resolve().parents[3] / "tests" / "data" / "measurements" / "bench"
NEW, OLD = BENCH / "2026-12-05-h200-quick.json", BENCH / "2026-12-04-h200-quick.json"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "s.sqlite"
    monkeypatch.setenv("GPUMATCH_STORE", str(path))
    monkeypatch.setenv("COLUMNS", "80")
    return path


def _import(*paths: Path) -> None:
    for p in paths:
        assert main(["bench", "import", str(p)]) == 0


def _row(sbs: dict[str, Any], case: str, quantity: str) -> dict[str, Any]:
    return next(r for r in sbs["rows"] if r["case"] == case and r["quantity"] == quantity)


def test_two_h200_runs_rows_price_and_formats(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpumatch.catalog import get_gpu
    from gpumatch.catalog.prices import select_price

    _import(NEW, OLD)
    capsys.readouterr()
    assert main(["report", "--run", "1", "--run", "2", "--format", "json"]) == 0
    sbs = json.loads(capsys.readouterr().out)["side_by_side"]
    assert [r["run_id"] for r in sbs["runs"]] == [1, 2] and sbs["baseline"] == 1
    quantities = {r["quantity"] for r in sbs["rows"]}
    assert {"TPOT", "tok/s", "TTFT", "peak memory", "mean power", "J/tok gross", "J/tok net", "$/M tokens",
            "verdict"} <= quantities
    assert {r["case"] for r in sbs["rows"] if r["quantity"] == "tok/s"} >= {"decode-b1", "prefill", "train"}
    tok = _row(sbs, "decode-b16", "tok/s")
    cost = next(r for r in sbs["rows"] if r["key"] == tok["key"] + " usd")
    price = select_price(get_gpu("NVIDIA H200"), "on-demand").value
    assert price and sbs["runs"][0]["price"]["usd_per_hour"] == price
    for t, c in zip(tok["cells"], cost["cells"], strict=True):  # $/M tokens = $/h / (tokens/s x 3600) x 1e6
        assert c["value"] == pytest.approx(price / (t["value"] * 3600) * 1e6)
    tpot = _row(sbs, "decode-b1", "TPOT")
    assert tpot["cells"][1]["vs_baseline"] == pytest.approx(tpot["cells"][1]["value"] / tpot["cells"][0]["value"])
    assert tpot["cells"][0]["low"] is None and tpot["cells"][1]["significant"] is None  # no raw timings stored
    assert tpot["cells"][0]["predicted_over_measured"] > 0
    assert _row(sbs, "decode-b1", "verdict")["cells"][0]["value"] == "valid"
    assert sbs["software_differs"] == []

    assert main(["report", "--run", "1", "--run", "2"]) == 0
    text = capsys.readouterr().out
    assert max(text_width(line) for line in text.splitlines()) <= 80
    head = text.split("Run 1")[0]
    assert "Runs side by side (baseline: run 1)" in head and "median of" in head and "$/M tokens" in head
    assert "pred/meas" in head and not re.search(r"^\s+95% CI\s", head, re.M)  # no raw timings: no interval

    assert main(["report", "--run", "1", "--run", "2", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["run_id"] for r in rows} == {"1", "2"}
    assert {"value", "low", "high", "vs_baseline", "significant"} <= set(rows[0])
    assert main(["report", "--run", "1", "--format", "csv"]) == 2  # one run: nothing side by side
    assert "two bench runs" in capsys.readouterr().err


def _synthetic(tmp_path: Path, name: str, gpu: str | None, slow: float, seed: int) -> Path:
    """A copy of the 2026-12-05 export with made-up raw timings (decode-b1 ``slow`` times the measured median,
    decode-b16 unchanged) and, with ``gpu``, another card and torch."""
    data = json.loads(NEW.read_text(encoding="utf-8"))
    rng = np.random.default_rng(seed)
    for r in data["results"]:
        if r["metric"] == "decode_step_s":
            factor = slow if r["case"] == "decode-b1" else 1.0
            r["raw_s"] = (r["measured"] * factor * (1 + 0.002 * rng.standard_normal(60))).tolist()
            r["measured"] *= factor
        if r["metric"] == "decode_tokens_per_s" and r["case"] == "decode-b1":
            r["measured"] /= slow
    if gpu:  # another card: its predictions are made anew when read (the stored ones are the H200's)
        for r in data["results"]:
            for k in ("predicted", "datasheet", "ratio"):
                r.pop(k, None)
        data["manifest"]["gpu.name"] = gpu
        data["manifest"]["software.torch"] = "2.10.0+cu128"
        data["run"]["started_at"] = "2026-12-06T00:00:00+00:00"
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_synthetic_second_card_intervals_and_significance(store: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from gpumatch.usecases.report_sidebyside import side_by_side

    _import(_synthetic(tmp_path, "h200.json", None, 1.0, 1),
            _synthetic(tmp_path, "synthetic-h100.json", "NVIDIA H100 80GB HBM3", 1.10, 2))
    sbs = side_by_side(store, (1, 2))
    assert sbs["runs"][1]["gpu"] == "NVIDIA H100 80GB HBM3" and "H100 SXM5" in sbs["runs"][1]["price"]["source"]
    assert sbs["software_differs"] == ["software.torch"]
    slow = _row(sbs, "decode-b1", "TPOT")["cells"]
    for c in slow:
        assert c["low"] < c["value"] < c["high"]
    assert slow[1]["significant"] is True and slow[1]["vs_low"] > 1.0
    assert slow[1]["predicted_over_measured"] != pytest.approx(slow[0]["predicted_over_measured"])  # H100's model
    rate = _row(sbs, "decode-b1", "tok/s")["cells"]
    assert rate[0]["low"] < rate[0]["value"] < rate[0]["high"]
    assert rate[1]["significant"] is True and rate[1]["vs_high"] < 1.0  # 10% slower steps: fewer tokens/s
    usd = next(r for r in sbs["rows"] if r["key"].startswith("decode-b1 decode_tokens_per_s") and
               r["quantity"] == "$/M tokens")["cells"]
    assert usd[0]["low"] < usd[0]["value"] < usd[0]["high"]
    same = _row(sbs, "decode-b16", "TPOT")["cells"][1]
    assert same["significant"] is False and same["vs_low"] <= 1.0 <= same["vs_high"]

    capsys.readouterr()
    assert main(["report", "--run", "1", "--run", "2"]) == 0
    text = capsys.readouterr().out
    assert max(text_width(line) for line in text.splitlines()) <= 80
    assert "warning: the runs differ in software: software.torch" in text
    tpot_b1 = text.split("decode-b1 ")[1].split("decode-b1 ")[0]  # the first block: decode-b1 TPOT
    assert re.search(r"^\s+2\s+7\.\d+ ms\s+1\.10\* \[1\.\d\d,1\.\d\d\]$", tpot_b1, re.M)
    assert re.search(r"^\s+95% CI\s+1\s+\[7\.\d+, 7\.\d+\]$", tpot_b1, re.M)
    assert "pred/meas" in tpot_b1
    assert re.search(r"^decode-b16\s+TPOT\s+1\s+8\.\d+ ms\n\s+2\s+8\.\d+ ms\s+1\.00 \[", text, re.M)  # no star

    page = tmp_path / "runs.html"
    assert main(["report", "--run", "1", "--run", "2", "--html", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    section = html.split('<section id="side-by-side">')[1].split("</section>")[0]
    assert '<a href="#side-by-side">' in html and "<script" not in html
    assert "run 2<br>NVIDIA H100 80GB HBM3" in section and "1.10*" in section and "$/M tokens" in section
    assert "differ in software: software.torch" in section
