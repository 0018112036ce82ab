"""gpumatch's serving estimates against TensorRT-LLM's published measurements (H100, H200, L40S, A100).

Source: tests/data/published/trtllm-serving.toml (NVIDIA/TensorRT-LLM docs, commits named in the file);
comparison rules: src/gpumatch/calibrate/published.py; the full table: docs/published-serving.md. Nothing here
was fitted on: gpumatch's efficiencies come from one H200 running PyTorch (docs/accuracy.md).

Tolerances, by what the data can show:
- TensorRT-LLM 1.0 max-throughput on H100/H200 (FP8, in-flight batching): 25% per case -- the engine picks its
  batch and gpumatch searches a ladder, so one case mixes the memory model, the decode step and the prefill.
- TensorRT-LLM 0.6.1 static batch on H100 (Llama-2-7B) and 0.5 on L40S: 15%.
- First-token latency (0.5) at 2048 tokens on H100, L40S, A100: 25% (other cards than the fitted H200:
  ``Calibration.extrapolated_error_fraction`` is 30%).
Known misses are strict xfails with the reason, so a change that fixes one shows up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.calibrate.published import PublishedCase, load, predict

DATA = Path(__file__).resolve().parents[1] / "data" / "published" / "trtllm-serving.toml"
CASES, SOURCES = load(DATA)


def tolerance(c: PublishedCase) -> float | None:
    """The case's tolerance, or None where the data cannot judge gpumatch (see KNOWN_MISSES for those)."""
    if c.source == "perf-overview-v1":
        return 0.25
    if c.scenario == "static-batch" and (c.gpu == "L40S" or (c.model == "llama-2-7b" and c.gpu == "H100 SXM")):
        return 0.15
    if c.scenario == "first-token" and c.isl == 2048:
        return 0.25
    return None


KNOWN_MISSES: dict[str, str] = {
    # Llama-3.1-405B on eight 80 GB H100s: weights take 47 of 80 GiB per GPU, so the batch is set by the KV cache;
    # gpumatch fits 192 (128/4096) and 256 (1000/2000) sequences with ~1 GiB of runtime reserve, where a
    # TensorRT-LLM engine also keeps activation workspace for max_num_tokens and CUDA-graph pools (not modelled).
    # The same lengths on H200s (141 GB, not KV-limited in the same way) are within 25%. 1000/2000 came to +24 %
    # (from +28 %) with the engine kernel counts of 2026-12-07 (estimate/kernels.py): a slower step, the same
    # over-estimated batch, so it passes without its cause being fixed.
    "max-throughput llama-3.1-405b H100 SXM tp8 fp8 128/4096": "405B on 80 GB H100s: KV-limited batch over-estimated",
}


def _params() -> list[object]:
    out: list[object] = []
    for c in CASES:
        tol = tolerance(c)
        if tol is None:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[c.case_id])] if c.case_id in KNOWN_MISSES else []
        out.append(pytest.param(c, tol, id=c.case_id, marks=marks))
    return out


def test_the_transcription_is_complete_and_sourced() -> None:
    by_source = {s: sum(c.source == s for c in CASES) for s in SOURCES}
    # perf-overview: 6 model/GPU series x 10 lengths; v0.6.1: 8 H100 + 4 L40S + 7 A100 rows; v0.5: 10 TTFT rows
    assert by_source == {"perf-overview-v1": 60, "performance-v0.6.1": 19, "performance-v0.5-latency": 10}
    for s in SOURCES.values():
        assert s["url"].startswith("https://github.com/NVIDIA/TensorRT-LLM/blob/") and s["says"]
    # spot checks against the source tables
    row = {c.case_id: c.value for c in CASES}
    assert row["max-throughput llama-3.1-70b H200 SXM tp1 fp8 2048/2048"] == 2003
    assert row["static-batch llama-2-70b H100 SXM tp4 fp8 b480 128/2048"] == 1486 * 4  # per GPU x TP
    assert row["first-token llama-2-7b H100 SXM tp1 fp8 b1 2048/1"] == pytest.approx(0.036)


@pytest.mark.parametrize(("case", "tol"), _params())
def test_estimate_within_tolerance_of_published(case: PublishedCase, tol: float) -> None:
    predicted, batch = predict(case)
    assert batch is not None, f"{case.case_id}: gpumatch says nothing fits"
    err = (predicted - case.value) / case.value
    assert abs(err) <= tol, f"{case.case_id}: predicted {predicted:.4g}, published {case.value:.4g} ({err:+.1%})"
