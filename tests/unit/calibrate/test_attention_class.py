"""The attention class of ``gpumatch calibrate``: context-length pairs from the committed H200 bench runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpumatch.calibrate.attention import (
    IDENTIFY_MIN,
    attention_cases,
    identified,
    measures_attention,
)
from gpumatch.calibrate.compare import predict
from gpumatch.calibrate.fit import search
from gpumatch.calibrate.runs import cases_of_runs, split_by_shape
from gpumatch.calibrate.stored import FIELD_BOUNDS, calibrate_runs, load_runs
from gpumatch.cli.app import main
from gpumatch.estimate import Calibration

EXPORTS = Path(__file__).resolve().parents[2] / "data" / "measurements" / "bench"
FILES = ("2026-12-04-h200-quick.json", "2026-12-04-h200-standard.json")
H200 = "H200 SXM 141GB"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("att") / "h200.sqlite"
    for f in FILES:
        assert main(["bench", "import", str(EXPORTS / f), "--store", str(path)]) == 0
    return path


def test_pairs_are_ratios_of_consecutive_contexts_of_one_shape_and_run(store: Path) -> None:
    card, runs = load_runs(store)
    base = cases_of_runs(runs)
    pairs = {c.extra["shape"]: c for c in attention_cases(base)}
    assert set(pairs) == {f"attention decode batch={b} context=2048->8192" for b in (1, 4, 16, 64)} | {
        "attention prefill batch=1 context=512->2048", "attention prefill batch=1 context=2048->8192"}
    t = {(c.kind, c.options["concurrency"], c.options["prompt"]): c.measured for c in base
         if c.extra["run_id"] == 2 and c.kind in ("decode", "prefill")}
    pair = pairs["attention prefill batch=1 context=2048->8192"]
    assert pair.measured == pytest.approx(t[("prefill", 1, 8192)] / t[("prefill", 1, 2048)])
    lo = replace(pair, options=pair.extra["base_options"], extra={})
    hi = replace(pair, extra={})
    assert predict(pair, None, card) == pytest.approx(predict(hi, None, card) / predict(lo, None, card))
    # a pair that measures the GEMM roofline (512-token prefill streams weights) or nothing of attention
    # (batch 64 saturates HBM already) is no attention case
    kept = {s for s, c in pairs.items() if measures_attention(card, Calibration(), c)}
    assert kept == {f"attention decode batch={b} context=2048->8192" for b in (1, 4, 16)} | {
        "attention prefill batch=1 context=2048->8192"}


def test_a_field_the_fit_shapes_cannot_tell_is_not_fitted_and_said(store: Path) -> None:
    fit = calibrate_runs(store)
    assert set(fit.not_identified) == {"attention_half_flops"}
    assert fit.not_identified["attention_half_flops"] <= IDENTIFY_MIN
    assert "attention_half_flops" not in fit.provenance["fields"]
    assert {"attention_efficiency_max", "decode_attention_full_bw_blocks"} <= set(fit.provenance["fields"])
    assert fit.calibration.attention_half_flops == Calibration().attention_half_flops
    scores = {s.cls: s for s in fit.scores}
    att = scores["attention"]
    assert (att.fit_shapes, att.held_shapes) == (3, 1)
    assert att.held_after_mean <= att.held_before_mean + 0.005
    sens = identified(H200, Calibration(), [c for c in fit.cases if c.kind == "attention" and c.fit])
    assert sens["attention_efficiency_max"] > IDENTIFY_MIN and sens["decode_attention_full_bw_blocks"] > IDENTIFY_MIN


def test_the_fit_recovers_the_blocks_a_decode_kernel_needs(store: Path) -> None:
    """Ratios generated with 60 blocks for full bandwidth: a search from the default 100 moves towards 60."""
    card, runs = load_runs(store)
    truth = replace(Calibration(), decode_attention_full_bw_blocks=60.0)
    pairs = split_by_shape([c for c in attention_cases(cases_of_runs(runs)) if c.extra["sub"] == "decode"
                            and c.options["concurrency"] < 64])
    synthetic = [replace(c, measured=predict(c, truth, card)) for c in pairs]
    got = search(Calibration(), synthetic, ["decode_attention_full_bw_blocks"], 3, FIELD_BOUNDS, gpu=card)
    assert 50.0 <= got.decode_attention_full_bw_blocks <= 72.0
