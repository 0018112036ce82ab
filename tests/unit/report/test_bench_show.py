"""``bench show``'s per-case NVML table, from a stored export."""

from __future__ import annotations

import json
from pathlib import Path

from gpumatch.report.bench import show_text, telemetry_cells


def test_bench_show_lists_each_cases_nvml_counters_in_80_columns() -> None:
    """The H100 quick export: one row per case with its verdict and the shares of its window under the power cap
    (violation counter), thermal slowdown and low utilization, its mean power and peak temperature."""
    path = Path(__file__).parents[2] / "data/measurements/bench/2026-12-07-h100-quick-fused-repeat.json"
    data = json.loads(path.read_text())
    rows = {r["case"]: r for r in telemetry_cells(data["cases"])}
    assert len(rows) == 16
    assert rows["prefill"] == {"case": "prefill", "verdict": "valid-power-capped", "power": "42%",
                               "thermal": "0%", "idle": "58%", "watts": "327", "temp": "50", "errors": "0"}
    sampled = telemetry_cells([{"case_id": "x", "telemetry": {"power_cap_frac": 0.25, "verdict": "valid"}}])[0]
    assert sampled["power"] == "25% s" and sampled["thermal"] == "-" and sampled["watts"] == "-"
    assert telemetry_cells([{"case_id": "cpu", "telemetry": {}}]) == []
    text = show_text({"run": {"run_id": 1, "name": "quick", "status": "completed"}, "manifest": {},
                      "results": [], "failures": [], "cases": data["cases"]})
    assert "NVML per case window" in text and max(len(line) for line in text.splitlines()) <= 80
