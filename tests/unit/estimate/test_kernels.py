"""Kernels a serving engine launches per layer (estimate/kernels.py) and what they cost in a decode step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpumatch.catalog import get_gpu
from gpumatch.estimate import DEFAULT_CALIBRATION, Request, model_nums, roofline
from gpumatch.estimate.case import Case
from gpumatch.estimate.kernels import engine_kernels_per_layer
from gpumatch.estimate.options import build_case
from gpumatch.models import get_model

H100 = get_gpu("H100 SXM5 80GB")
PROBE = Path(__file__).resolve().parents[2] / "data" / "measurements" / "2026-12-07-h100-engine-layer.json"


def _case(model: str, precision: str, task: str = "serve", engine: str | None = "vllm") -> Case:
    kw = {"engine": engine} if task == "serve" else {}
    case, _ = build_case(get_model(model), H100, Request(task=task, precision=precision, concurrency=1,
                                                         prompt=512, gen=128, **kw))
    return case


@pytest.mark.parametrize(("model", "precision", "kernels"), [
    ("llama-3.1-8b", "bf16", 13.0),      # 8 attention + 5 MLP
    ("llama-3.1-8b", "fp8", 17.0),       # + 2 + 2 input quantizations
    ("mixtral-8x7b", "bf16", 16.0),      # 8 attention + 8 MoE on every layer
    ("qwen3-30b-a3b", "fp8", 20.0),      # + 2 attention + 2 expert-input quantizations
])
def test_counts_by_block(model: str, precision: str, kernels: float) -> None:
    case = _case(model, precision)
    assert engine_kernels_per_layer(model_nums(get_model(model)), case) == pytest.approx(kernels)


def test_deepseek_layers_weigh_dense_and_moe_by_their_count() -> None:
    """DeepSeek-V3: 61 MLA layers, 3 with a dense MLP, 58 with 256 routed experts and one shared expert."""
    m = model_nums(get_model("deepseek-v3"))
    assert m.mla and m.shared_experts == 1.0 and m.moe_layers == 58.0
    bf16 = engine_kernels_per_layer(m, _case("deepseek-v3", "bf16"))
    assert bf16 == pytest.approx(14.0 + (3 * 5.0 + 58 * (8.0 + 4.0)) / 61)
    fp8 = engine_kernels_per_layer(m, _case("deepseek-v3", "fp8"))
    assert fp8 - bf16 == pytest.approx(3.0 + (3 * 2.0 + 58 * 4.0) / 61)


def test_weight_only_formats_add_no_quantization_kernels() -> None:
    """AWQ int4 and MXFP4 on Hopper dequantize inside the GEMM: the activations stay 16-bit."""
    for model, precision in (("llama-3.1-8b", "int4"), ("gpt-oss-120b", "mxfp4")):
        m = model_nums(get_model(model))
        case = _case(model, precision)
        assert case.low_precision_gemm == 0.0
        assert engine_kernels_per_layer(m, case) == engine_kernels_per_layer(m, _case(model, "bf16"))


def test_an_engine_decode_step_pays_each_counted_kernel() -> None:
    """The step's gaps grow by (counted - kernels_per_layer) x layers x kernel_overhead_s against a plain PyTorch
    count; a plain PyTorch step (not fused) keeps Calibration.kernels_per_layer."""
    m = model_nums(get_model("llama-3.1-8b"))
    case = _case("llama-3.1-8b", "fp8")
    cal = DEFAULT_CALIBRATION
    step = roofline.decode_step(m, case, 640.0, cal)
    counted = roofline.decode_step(m, case, 640.0, replace(cal, kernels_per_layer=17.0))
    assert step["host_s"] == pytest.approx(counted["host_s"])  # an engine ignores kernels_per_layer: 17 either way
    plain = _case("llama-3.1-8b", "fp8", task="infer", engine=None)
    base = roofline.decode_step(m, plain, 640.0, cal)["host_s"]
    more = roofline.decode_step(m, plain, 640.0, replace(cal, kernels_per_layer=17.0))["host_s"]
    assert more - base == pytest.approx(32 * 7 * cal.kernel_overhead_s)


def test_the_h100_probe_bears_out_the_counts() -> None:
    """The probe's engine-like Llama-8B layer (no attention) launched 13 kernels in bf16 and 20 with fp8 GEMMs
    (two quantization kernels per input there), and the kernels beyond the four projections cost about the
    assumed 2.5 us each: (full layer - GEMMs only) / (their kernel difference), M = 1 (tests/data/measurements)."""
    doc = json.loads(PROBE.read_text())
    assert doc["gpu"].startswith("NVIDIA H100")
    at = {(c["kind"], c["gemm_only"], c["rows"]): c for c in doc["cases"]}
    assert at[("bf16", False, 1)]["kernels_per_layer"] == 13
    assert at[("fp8", False, 1)]["kernels_per_layer"] == 20
    for kind in ("bf16", "fp8"):
        full, gemm = at[(kind, False, 1)], at[(kind, True, 1)]
        per_kernel = (full["per_layer_s"] - gemm["per_layer_s"]) / (full["kernels_per_layer"]
                                                                    - gemm["kernels_per_layer"])
        assert 2.5e-6 <= per_kernel <= 4.5e-6
