"""Each result against the card's catalog ceiling, and the reason of a low ratio, from a stored run's data."""

from __future__ import annotations

from typing import Any

from gpumatch.catalog import get_gpu
from gpumatch.lab.ceiling import LOW_RATIO, ceiling_rows
from gpumatch.report.bench import ceiling_text

H200 = get_gpu("NVIDIA H200")


def _data(telemetry: dict[str, Any]) -> dict[str, Any]:
    results = [
        {"case": "gemm-fp8", "metric": "gemm_flops_per_s", "measured": 0.70 * H200.peak_flops_per_s["fp8"],
         "unit": "flop/s", "config": {"m": 4096, "n": 4096, "k": 4096, "precision": "fp8"}},
        {"case": "copy", "metric": "copy_bytes_per_s", "measured": 4.2e12, "unit": "B/s",
         "config": {"size_bytes": 2**30}},
        {"case": "decode-b1", "metric": "decode_step_s", "measured": 5e-3, "unit": "s",
         "config": {"batch": 1, "context": 2048}, "bytes_per_step": 15.3e9},
        {"case": "prefill", "metric": "prefill_s", "measured": 0.2, "unit": "s", "config": {"batch": 1, "seq": 2048},
         "flops_per_step": 0.2 * 0.5 * H200.peak_flops_per_s["bf16"]},
        {"case": "decode-b1", "metric": "decode_tokens_per_s", "measured": 200.0, "unit": "token/s", "config": {}},
    ]
    cases = [{"case_id": c, "telemetry": telemetry} for c in ("gemm-fp8", "copy", "decode-b1", "prefill")]
    return {"manifest": {"gpu.name": "NVIDIA H200", "gpu.clocks_max_sm_mhz": 1980}, "results": results,
            "cases": cases}


def test_ratios_to_the_catalog_ceilings() -> None:
    rows = {r["case"] + r["metric"]: r for r in ceiling_rows(_data({}))}
    assert len(rows) == 4  # tokens/s has no ceiling of its own
    bw = H200.memory_bandwidth_bytes_per_s
    assert abs(rows["gemm-fp8gemm_flops_per_s"]["ceiling_ratio"] - 0.70) < 1e-12
    assert abs(rows["copycopy_bytes_per_s"]["ceiling_ratio"] - 4.2e12 / bw) < 1e-12
    dec = rows["decode-b1decode_step_s"]
    assert abs(dec["achieved"] - 15.3e9 / 5e-3) < 1 and abs(dec["ceiling_ratio"] - 15.3e9 / 5e-3 / bw) < 1e-12
    assert abs(dec["mbu_vs_copy"] - 15.3e9 / 5e-3 / 4.2e12) < 1e-12
    assert abs(rows["prefillprefill_s"]["ceiling_ratio"] - 0.5) < 1e-12


def test_the_reason_states_what_the_telemetry_shows() -> None:
    tele = {"power_cap_frac": 0.9, "power_w_mean": 698.0, "sm_clock_mhz_mean": 1500.0, "thermal_frac": 0.0,
            "hw_slowdown_frac": 0.0}
    rows = {r["case"]: r for r in ceiling_rows(_data(tele))}
    fp8 = rows["gemm-fp8"]["reason"]
    assert "power-capped 90% of samples, mean 698 W" in fp8
    assert "SM clock 1500 MHz = 76% of max 1980" in fp8 and "fp8 _scaled_mm, dims multiples of 128" in fp8
    counted = {r["case"]: r for r in ceiling_rows(_data({**tele, "violation_duty": {"power": 0.97}}))}
    assert "power-capped 97% of the window (violation counter)" in counted["gemm-fp8"]["reason"]
    quiet = {r["case"]: r for r in ceiling_rows(_data({"power_cap_frac": 0.0, "sm_clock_mhz_mean": 1980.0}))}
    assert quiet["prefill"]["reason"] == "telemetry shows no throttling: the kernels fall short"
    assert {r["case"]: r for r in ceiling_rows(_data({}))}["prefill"]["reason"] == "no telemetry recorded for this case"
    assert all(not r["reason"] for r in ceiling_rows(_data(tele)) if r["ceiling_ratio"] >= LOW_RATIO)


def test_an_unknown_card_has_no_ceilings_and_the_table_fits_80_columns() -> None:
    data = _data({"power_cap_frac": 0.5})
    assert ceiling_rows({**data, "manifest": {"gpu.name": "NVIDIA Nonesuch"}}) == []
    text = ceiling_text(ceiling_rows(data))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "decode-b1 b1 c2048" in text and "ceiling: HBM" in text
