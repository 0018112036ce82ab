"""The grouped expert GEMMs of an MoE prefill, measured: compute plus weight stream, not the longer of the two.

Source: ``benchmarks/gpu/probe_moe_prefill.py`` on an NVIDIA H100 80GB HBM3 (700 W, driver 580.159.04, torch 2.11),
2026-12-07, ``tests/data/measurements/2026-12-07-h100-moe-prefill-probe.json``: ``torch._grouped_mm`` (bf16) over the
expert slices of eight MoE models and TP layouts, 512-16,384 tokens routed uniformly at random. The form the estimator
uses (:func:`gpumatch.estimate.roofline._expert_overlap_lost`): grouped time = a dense GEMM's time at the same shapes
(measured in the same run) + the touched experts' weights at the memory rate (H100 SXM datasheet 3.35 TB/s × the
calibration's ``memory_efficiency_max``). Tolerance: 10 % mean and 25 % largest absolute error over the 32 cases.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpumatch.estimate.calibration import DEFAULT_CALIBRATION

PROBE = Path(__file__).resolve().parents[1] / "data" / "measurements" / "2026-12-07-h100-moe-prefill-probe.json"
H100_SXM_BYTES_PER_S = 3.35e12  # NVIDIA H100 datasheet, SXM5 80 GB HBM3


def _cases() -> list[dict[str, float]]:
    doc = json.loads(PROBE.read_text())
    assert "H100" in doc["gpu"]
    return [r for r in doc["results"] if "grouped_s" in r and "dense_s" in r]


def _stream_s(r: dict[str, float]) -> float:
    weight_bytes = r["touched"] * 3 * r["hidden"] * r["inter_per_gpu"] * 2  # gate, up, down in bf16
    return weight_bytes / (H100_SXM_BYTES_PER_S * DEFAULT_CALIBRATION.memory_efficiency_max)


def test_grouped_time_is_dense_compute_plus_weight_stream() -> None:
    cases = _cases()
    assert len(cases) == 32
    errors = [abs((r["dense_s"] + _stream_s(r)) / r["grouped_s"] - 1.0) for r in cases]
    assert sum(errors) / len(errors) <= 0.10
    assert max(errors) <= 0.25


def test_the_longer_of_the_two_alone_is_short() -> None:
    shortfalls = [r["grouped_s"] / max(r["dense_s"], _stream_s(r)) for r in _cases()]
    assert min(shortfalls) > 1.0
    assert sum(shortfalls) / len(shortfalls) > 1.3
