"""``gpumatch bench import`` + ``gpumatch calibrate`` on the committed H200 bench exports, and the stored
calibration used by ``estimate`` and ``plan`` for that card only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.calibrate.saved import newest
from gpumatch.calibrate.stored import calibrate_runs
from gpumatch.cli.app import main

EXPORTS = Path(__file__).resolve().parents[1] / "data" / "measurements" / "bench"
FILES = ("2026-12-04-h200-quick.json", "2026-12-04-h200-standard.json")
EST = ("estimate", "--model", "llama-3.1-8b", "--concurrency", "8", "--prompt", "1024", "--gen", "256",
       "--format", "json")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cal") / "h200.sqlite"
    for f in FILES:
        assert main(["bench", "import", str(EXPORTS / f), "--store", str(path)]) == 0
    return path


def test_import_refuses_the_same_export_twice(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "import", str(EXPORTS / FILES[1]), "--store", str(store)]) == 2
    assert "already in" in capsys.readouterr().err


def test_import_refuses_a_file_that_is_no_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "other"}')
    assert main(["bench", "import", str(bad), "--store", str(tmp_path / "s.sqlite")]) == 2
    assert "not 'gpumatch.bench.run/1'" in capsys.readouterr().err


def test_calibration_improves_held_out_shapes(store: Path) -> None:
    fit = calibrate_runs(store)
    scores = {s.cls: s for s in fit.scores}
    assert set(scores) == {"gemm", "copy", "decode", "prefill", "attention", "train-step", "train-memory"}
    for s in fit.scores:
        assert s.held_shapes >= (1 if s.cls == "attention" else 2) and s.fit_shapes >= 2
    # microbenchmark curves: the shipped defaults are far off on shapes the fit never saw
    assert scores["gemm"].held_after_mean < 0.7 * scores["gemm"].held_before_mean
    assert scores["copy"].held_after_mean < 0.3 * scores["copy"].held_before_mean
    assert scores["train-memory"].held_after_mean < scores["train-memory"].held_before_mean
    assert scores["train-step"].held_after_mean < scores["train-step"].held_before_mean
    for cls in ("decode", "prefill", "attention"):  # already within 3%: not much worse
        assert scores[cls].held_after_mean < scores[cls].held_before_mean + 0.005
    assert fit.calibration.fitted_on == ("H200 SXM 141GB",)
    assert fit.calibration.basis == "calibrated from runs 1-2 on H200 GPU-071f8961..."
    assert fit.provenance["card_uuids"] == ["GPU-071f8961-4fbb-2435-2b64-a715ec33ebe2"]
    assert fit.provenance["dates"] == ["2026-12-04"]


def test_calibrate_stores_and_estimate_uses_it_for_that_card_only(
        store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--store", str(store), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "leave-one-out" in text and "held-out before" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    found = newest(store, "H200 SXM 141GB")
    assert found is not None and found.calibration.basis.startswith("calibrated from runs 1-2 on H200")
    assert newest(store, "H100 SXM5 80GB") is None
    assert main([*EST, "--gpu", "H200 SXM", "--gpu", "H100 SXM", "--store", str(store)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["basis"].startswith("calibrated from runs 1-2 on H200")
    assert rows[1]["basis"] == "assumed"  # never another card model's calibration
    assert main([*EST, "--gpu", "H200 SXM", "--store", str(store), "--no-calibration"]) == 0
    assert json.loads(capsys.readouterr().out)["basis"] == "assumed"
    assert main([*EST, "--gpu", "H100 SXM", "--calibration", str(out)]) == 0
    err = capsys.readouterr().err
    assert "fitted on H200 SXM 141GB, applied to H100 SXM5 80GB as asked" in err


def test_estimate_without_any_store_uses_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*EST, "--gpu", "H200 SXM"]) == 0
    assert json.loads(capsys.readouterr().out)["basis"] == "assumed"


def test_plan_applies_a_stored_calibration_only_when_limited_to_its_card(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--store", str(store)]) == 0
    capsys.readouterr()
    base = ["plan", "--model", "llama-3.1-8b", "--task", "serve", "--concurrency", "8", "--max-gpus", "1",
            "--store", str(store), "--format", "json"]
    assert main([*base, "--gpu", "H200 SXM"]) == 0
    assert json.loads(capsys.readouterr().out)["basis"].startswith("calibrated from runs 1-2 on H200")
    assert main(base) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["basis"] == "assumed"
    assert "stored calibrations of H200 SXM 141GB not applied" in out.err


def test_stored_calibration_carries_its_held_out_residuals_into_the_intervals(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fit = calibrate_runs(store)
    res = fit.calibration.residuals
    assert res is not None and res.set == "held-out"
    decode = res.kind("decode")
    assert decode is not None and decode.card == "H200 SXM 141GB"
    held = [c for c in fit.cases if c.kind == "decode" and not c.fit]
    assert decode.n == len(held) and set(decode.cases) == {c.case_id for c in held}
    assert not set(decode.cases) & {c.case_id for c in fit.cases if c.fit}  # held-out cases only
    assert main(["calibrate", "--store", str(store)]) == 0
    assert "intervals from held-out residuals: decode n=4" in capsys.readouterr().out
    found = newest(store, "H200 SXM 141GB")
    assert found is not None and found.calibration.residuals is not None
    cid = found.calibration_id
    assert found.calibration.residuals.label == f"calibration #{cid}"
    assert main([*EST, "--gpu", "H200 SXM", "--gpu", "H100 SXM", "--store", str(store)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert f"residuals of calibration #{cid}, held-out n=4" in rows[0]["interval_basis"]["tpot_s"]
    assert f"calibration #{cid} not used: n=3 < 4 held-out prefill cases" in rows[0]["interval_basis"]["prefill_s"]
    assert "calibration #" not in rows[1]["interval_basis"]["tpot_s"]
    plan = ["plan", "--model", "llama-3.1-8b", "--task", "serve", "--concurrency", "8", "--max-gpus", "1",
            "--store", str(store), "--format", "json", "--gpu", "H200 SXM"]
    assert main(plan) == 0
    shortlist = json.loads(capsys.readouterr().out)["shortlist"]
    entries = [e for role in shortlist.values() for e in role]
    assert entries and all(f"residuals of calibration #{cid}" in e["interval_basis"]["tpot_s"] for e in entries)
