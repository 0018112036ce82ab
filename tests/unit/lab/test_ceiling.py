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


def test_the_detail_states_what_the_telemetry_shows() -> None:
    tele = {"power_cap_frac": 0.9, "power_w_mean": 698.0, "sm_clock_mhz_mean": 1500.0, "thermal_frac": 0.0,
            "hw_slowdown_frac": 0.0}
    rows = {r["case"]: r for r in ceiling_rows(_data(tele))}
    fp8 = rows["gemm-fp8"]["reason_detail"]
    assert "power-capped 90% of samples, mean 698 W" in fp8
    assert "SM clock 1500 MHz = 76% of max 1980" in fp8 and "fp8 _scaled_mm, dims multiples of 128" in fp8
    counted = {r["case"]: r for r in ceiling_rows(_data({**tele, "violation_duty": {"power": 0.97}}))}
    assert "power-capped 97% of the case window (counter)" in counted["gemm-fp8"]["reason_detail"]
    idle = {**tele, "violation_duty": {"power": 0.07, "low_utilization": 0.99}}
    assert ceiling_rows(_data(idle))[0]["reason_detail"] == (
        "power-capped 7% of the case window (counter); case window 99% low-utilization (start-up): its clock and "
        "power means are not the kernels'; fp8 _scaled_mm, dims multiples of 128")
    assert {r["case"]: r for r in ceiling_rows(_data({}))}["prefill"]["reason_detail"] == (
        "no telemetry recorded for this case")
    assert all(not r["reason"] and "reason_detail" not in r for r in ceiling_rows(_data(tele))
               if r["ceiling_ratio"] >= LOW_RATIO)


def test_the_reason_is_the_first_cause_in_one_line() -> None:
    """Thermal before shape before copy before power before clock before tiles; under 45 characters."""
    tele = {"power_cap_frac": 0.9, "power_w_mean": 698.0, "sm_clock_mhz_mean": 1500.0}
    rows = {r["case"]: r for r in ceiling_rows(_data(tele))}
    assert rows["gemm-fp8"]["reason"] == "power cap 90% of samples"
    assert ceiling_rows(_data({**tele, "thermal_frac": 0.2}))[0]["reason"] == "thermal slowdown 20% of samples"
    clock = {r["case"]: r for r in ceiling_rows(_data({"sm_clock_mhz_mean": 1500.0, "power_cap_frac": 0.01}))}
    assert clock["prefill"]["reason"] == "SM clock 1500 MHz = 76% of max"
    quiet = {r["case"]: r for r in ceiling_rows(_data({"power_cap_frac": 0.0, "sm_clock_mhz_mean": 1980.0}))}
    assert quiet["prefill"]["reason"] == "no throttling recorded: kernels fall short"
    assert {r["case"]: r for r in ceiling_rows(_data({}))}["prefill"]["reason"] == "no telemetry recorded for this case"
    assert all(len(r["reason"]) < 45 for r in ceiling_rows(_data(tele)))


def test_a_gemm_under_the_ridge_point_is_memory_bound() -> None:
    """M=16 against a 14336 x 4096 bf16 weight: 2·16·14336·4096 FLOP over (16·4096 + 4096·14336 + 16·14336)·2 B
    is 15.9 FLOP/B, under the H200's ridge 989.5e12 / 4.8e12 = 206 FLOP/B (Williams et al. 2009): the reason is
    the bandwidth it reached, achieved FLOP/s / intensity."""
    data = _data({"power_cap_frac": 0.5})
    flops = 44e12
    data["results"][0] = {"case": "gemm-bf16", "metric": "gemm_flops_per_s", "measured": flops, "unit": "flop/s",
                          "config": {"m": 16, "n": 14336, "k": 4096, "precision": "bf16"}}
    data["cases"][0]["case_id"] = "gemm-bf16"
    row = ceiling_rows(data)[0]
    intensity = 2 * 16 * 14336 * 4096 / ((16 * 4096 + 4096 * 14336 + 16 * 14336) * 2)
    reached = flops / intensity
    assert row["reason"] == f"memory-bound (M=16): {reached / 1e12:.2f} TB/s, {reached / 4.8e12:.0%} of HBM"
    assert "power-capped 50% of samples" in row["reason_detail"]


def test_a_decode_step_near_the_measured_copy_blames_the_copy() -> None:
    data = _data({"power_cap_frac": 0.5})
    data["results"][2]["measured"] = 15.3e9 / 3.6e12  # 3.6 TB/s: 0.75 of the 4.8 catalog, 0.86 of the 4.2 copy
    dec = next(r for r in ceiling_rows(data) if r["metric"] == "decode_step_s")
    assert dec["reason"] == f"copy is {4.2e12 / H200.memory_bandwidth_bytes_per_s:.2f} of catalog HBM"


def test_an_unknown_card_has_no_ceilings_and_the_table_fits_80_columns() -> None:
    data = _data({"power_cap_frac": 0.5})
    assert ceiling_rows({**data, "manifest": {"gpu.name": "NVIDIA Nonesuch"}}) == []
    text = ceiling_text(ceiling_rows(data))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "decode-b1 b1 c2048" in text and "ceiling: HBM" in text


def test_a_step_row_reads_its_own_power_window_against_the_limit() -> None:
    """A decode step whose energy row saw its own power window: the reason gives that steady power against the
    enforced limit (the case window's means are start-up, not the kernels)."""
    data = _data({"violation_duty": {"power": 0.0, "low_utilization": 0.66}})
    data["manifest"]["gpu.power_enforced_limit_w"] = 700.0
    data["results"].append({"case": "decode-b1", "metric": "decode_energy_j_per_token", "measured": 2.7,
                            "unit": "J/token", "config": {"batch": 1, "context": 2048}, "power_w_mean": 560.0,
                            "power_basis": "power window"})
    dec = next(r for r in ceiling_rows(data) if r["metric"] == "decode_step_s")
    assert "timed steps at 560 W = 80% of the 700 W limit" in dec["reason_detail"]
    assert "66% low-utilization" in dec["reason_detail"]
    data["results"][-1]["power_w_mean"] = 690.0
    dec = next(r for r in ceiling_rows(data) if r["metric"] == "decode_step_s")
    assert dec["reason"] == "power limit: 690 of 700 W in steps"


def test_the_stored_h200_quick_run() -> None:
    """The 2026-12-05 H200 quick export: fp8 8192³ at 1,376 TFLOP/s is 0.70 of the 1,979 dense datasheet figure;
    its case window was under the power limiter 11% of the time by the violation counter."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "data/measurements/bench/2026-12-05-h200-quick.json"
    rows = ceiling_rows(json.loads(path.read_text()))
    fp8 = next(r for r in rows if r["case"] == "gemm-fp8" and r["config"]["m"] == 8192)
    assert abs(fp8["ceiling_ratio"] - 0.695) < 0.005
    assert "power-capped 11% of the case window (counter)" in fp8["reason_detail"]
    assert fp8["reason"] == "power cap 11% of window (counter)"


def test_the_stored_h100_quick_run() -> None:
    """The 2026-12-07 H100 quick export (fused-graph decode): each decode step is 0.84-0.91 of the run's measured
    copy (3.0 TB/s, 0.90 of the 3.35 TB/s catalog figure), so the copy, not the decoder, is the low ratio's
    reason; the prefill's timed steps ran at 686 W of the 700 W limit."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[2] / "data/measurements/bench/2026-12-07-h100-quick-fused.json"
    rows = ceiling_rows(json.loads(path.read_text()))
    dec = [r for r in rows if r["metric"] == "decode_step_s"]
    assert len(dec) == 4 and all(r["mbu_vs_copy"] >= 0.8 for r in dec)
    assert {r["reason"] for r in dec if r["reason"]} == {"copy is 0.90 of catalog HBM"}
    pre = next(r for r in rows if r["case"] == "prefill")
    assert pre["reason"] == "power limit: 686 of 700 W in steps"

