"""The interval rule of gpumatch.estimate.intervals (docs/estimators.md, "Intervals")."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest

from gpumatch.errors import DataFileError
from gpumatch.estimate import Request, estimate
from gpumatch.estimate.intervals import (
    TIME_FLOOR,
    UNMEASURED_FLOOR,
    ResidualKind,
    Residuals,
    Where,
    band,
    default_residuals,
    default_serving_residuals,
    figure_bands,
    parse_residuals,
    serving_band,
    small_sample_factor,
)

H200 = "H200 SXM 141GB"
RES = default_residuals()
DECODE = RES.kind("decode")
assert DECODE is not None
INSIDE = Where(card=H200, precision="bf16", task="infer", params=DECODE.params_range[0],
               context=DECODE.context_range[0], count=1)


def _width(kind: str, where: Where, res: Residuals = RES) -> float:
    b = band(res, kind, where)
    return b.high - b.low


def _with_decode(**kw: object) -> Residuals:
    k = RES.kind("decode")
    assert k is not None
    return replace_kinds(RES, k.model_copy(update=kw))


def replace_kinds(res: Residuals, k: ResidualKind) -> Residuals:
    return res.model_copy(update={"kinds": tuple(k if x.kind == k.kind else x for x in res.kinds)})


def test_inside_the_measured_range_is_narrower_than_outside_it() -> None:
    inside = _width("decode", INSIDE)
    assert _width("decode", replace(INSIDE, context=4 * INSIDE.context)) > inside
    assert _width("decode", replace(INSIDE, params=INSIDE.params / 4)) > inside
    # farther out: wider still
    assert _width("decode", replace(INSIDE, context=16 * INSIDE.context)) > _width(
        "decode", replace(INSIDE, context=4 * INSIDE.context))


def test_another_card_is_wider_and_at_least_the_extrapolated_error() -> None:
    b = band(RES, "decode", replace(INSIDE, card="L4"), other_card_floor=0.30)
    assert b.low <= -0.30 and b.high >= 0.30
    assert b.high - b.low > _width("decode", INSIDE)
    assert "card never measured" in b.basis


def test_another_precision_task_or_several_gpus_widen_with_a_floor() -> None:
    inside = _width("decode", INSIDE)
    for other in (replace(INSIDE, precision="fp8"), replace(INSIDE, task="serve"), replace(INSIDE, count=2)):
        b = band(RES, "decode", other)
        assert b.high - b.low > inside
        assert b.low <= -UNMEASURED_FLOOR and b.high >= UNMEASURED_FLOOR
    assert _width("decode", replace(INSIDE, precision="fp16")) == inside  # fp16 runs bf16's kernels


def test_the_band_is_narrower_the_more_cases_were_measured() -> None:
    ns = (2, 3, 5, 8, 20, 31, 32, 40, 200)
    widths = [_width("decode", INSIDE, _with_decode(n=n, q05=-0.08, median=0.0, q95=0.08)) for n in ns]
    assert all(a > b for a, b in itertools.pairwise(widths))
    assert small_sample_factor(8) == pytest.approx(1.22, abs=0.01)
    assert small_sample_factor(10_000) == pytest.approx(1.0, abs=0.01)


def test_within_the_measured_range_the_band_is_the_quantiles_with_a_floor() -> None:
    wide = band(_with_decode(n=1000, q05=-0.07, median=0.0, q95=0.09), "decode", INSIDE)
    assert wide.low == pytest.approx(-0.07 * small_sample_factor(1000))
    assert wide.high == pytest.approx(0.09 * small_sample_factor(1000))
    narrow = band(_with_decode(n=1000, q05=-0.001, median=0.0, q95=0.001), "decode", INSIDE)
    assert (narrow.low, narrow.high) == (-TIME_FLOOR, TIME_FLOOR)
    assert narrow.basis.startswith(f"shipped residual table: {H200} decode, n=1000, ")


def test_memory_on_another_card_is_not_held_to_the_time_floor() -> None:
    b = band(RES, "memory", Where(card="L4", precision="bf16", task="train", params=1.2e9, context=2048, count=1))
    assert -0.30 < b.low < 0 < b.high < 0.30


def test_the_estimate_states_each_interval_and_its_basis() -> None:
    d = estimate("llama-3.1-8b", "h200", Request(task="infer", prompt=2047, gen=1, concurrency=8)).to_dict()
    assert set(d["intervals"]) >= {"tpot_s", "ttft_s", "prefill_s", "e2e_s", "total_bytes", "tokens_per_s",
                                    "usd_per_million_tokens"}
    # measured: 8B, context 2048, H200
    assert d["interval_basis"]["tpot_s"].startswith(f"shipped residual table: {H200} decode, n=")
    assert d["interval_basis"]["total_bytes"].startswith("extrapolated")  # inference memory never measured
    other = estimate("llama-3.1-8b", "L4", Request(task="infer", prompt=2047, gen=1, concurrency=8)).to_dict()
    assert "card never measured" in other["interval_basis"]["tpot_s"]
    lo, hi = other["intervals"]["tpot_s"]
    assert lo <= 0.7 * other["tpot_s"] * 1.0001 and hi >= 1.3 * other["tpot_s"] * 0.9999


def test_a_configuration_that_does_not_fit_keeps_only_its_memory_interval() -> None:
    d = estimate("llama-3.1-70b", "L4", Request(task="infer")).to_dict()
    assert not d["fits"]
    assert set(d["intervals"]) == {"total_bytes"}


def test_a_broken_residual_file_is_one_clear_error() -> None:
    data = RES.model_dump(by_alias=True)
    data["kinds"][0]["n"] = 1
    with pytest.raises(DataFileError, match=r"kinds\.0\.n"):
        parse_residuals(data, "residuals.json")
    data = RES.model_dump(by_alias=True)
    data["extra"] = 1
    with pytest.raises(DataFileError, match="extra"):
        parse_residuals(data)


def test_no_kind_measured_falls_back_to_the_extrapolated_error() -> None:
    empty = RES.model_copy(update={"kinds": ()})
    b = band(empty, "decode", INSIDE, other_card_floor=0.30)
    assert (b.low, b.high) == (-0.30, 0.30) and "never measured" in b.basis
    assert not math.isnan(b.low)


def test_a_serving_estimate_takes_its_ttft_and_tpot_band_from_the_blind_published_rows() -> None:
    table = default_serving_residuals()
    closed = estimate("llama-3.1-8b", "h200", Request(task="serve", prompt=1024, gen=256, concurrency=16,
                                                       num_prompts=0)).to_dict()
    for figure, key in (("tpot", "tpot_s"), ("ttft", "ttft_s")):
        expected = serving_band(table, figure, "closed")
        assert expected is not None
        assert closed["interval_basis"][key] == expected.basis
        assert "blind published serving rows (closed loop" in expected.basis
        lo, hi = closed["intervals"][key]
        assert lo == pytest.approx(closed[key] * (1 + expected.low))
        assert hi == pytest.approx(closed[key] * (1 + expected.high))
    # prefill is gpumatch's own pass: it keeps the micro-benchmark band
    assert closed["interval_basis"]["prefill_s"].startswith("extrapolated from shipped residual table")
    rate = estimate("llama-3.1-8b", "h200", Request(task="serve", prompt=1024, gen=256, request_rate=2.0)).to_dict()
    open_tpot = serving_band(table, "tpot", "open")
    assert open_tpot is not None and rate["interval_basis"]["tpot_s"] == open_tpot.basis


def test_the_serving_band_is_the_rows_quantiles_and_keeps_the_figure_inside() -> None:
    table = default_serving_residuals()
    k = table.kind("tpot", "closed")
    assert k is not None
    b = serving_band(table, "tpot", "closed")
    w = small_sample_factor(k.n)
    assert b is not None
    assert b.low == pytest.approx(max(min(k.median - (k.median - k.q05) * w, -TIME_FLOOR), -0.9))
    assert b.high == pytest.approx(max(k.median + (k.q95 - k.median) * w, TIME_FLOOR))
    assert b.low < 0 < b.high
    assert serving_band(table.model_copy(update={"kinds": ()}), "tpot", "closed") is None
    # a request that is not served keeps the micro-benchmark bands
    infer = Where(card=H200, precision="bf16", task="infer", params=8e9, context=2048, count=1)
    bands = figure_bands({"tpot_s": 0.01, "ttft_s": 0.05}, infer, False, serving=table)
    assert "shipped residual table" in bands["tpot_s"].basis and "published" not in bands["ttft_s"].basis
