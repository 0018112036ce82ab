"""Precision bytes, compute paths, and Calibration loading."""

from __future__ import annotations

import pytest

from gpumatch.catalog import get_gpu
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration, Request
from gpumatch.estimate.precision import bytes_per_element, compute_path


def test_bytes_per_element_with_group_scales() -> None:
    assert bytes_per_element("bf16") == 2.0
    assert bytes_per_element("fp8") == 1.0
    # GPTQ/AWQ group 128 with fp16 scale + zero: +0.25 bit per weight
    assert bytes_per_element("int4") * 8 == pytest.approx(4.25)
    # QLoRA NF4 with double quantization: 4.127 bits per parameter (Dettmers et al. 2023)
    assert bytes_per_element("nf4") * 8 == pytest.approx(4.127)
    with pytest.raises(InputError):
        bytes_per_element("fp9")


def test_w4a16_runs_at_16_bit_peak() -> None:
    gpu = get_gpu("H100 SXM")
    assert compute_path(gpu, "int4").peak_flops_per_s == gpu.peak("bf16")
    assert compute_path(gpu, "fp8").peak_flops_per_s == gpu.peak("fp8")


def test_fp32_without_tf32_warns_and_uses_vector_peak() -> None:
    gpu = get_gpu("H100 SXM")
    path = compute_path(gpu, "fp32")
    assert path.peak_flops_per_s == gpu.peak("fp32")
    assert "TF32" in path.warning
    assert compute_path(gpu, "tf32").peak_flops_per_s == gpu.peak("tf32")


def test_fp8_unsupported_before_ada_hopper() -> None:
    path = compute_path(get_gpu("A100 SXM4 80GB"), "fp8")
    assert path.peak_flops_per_s is None
    assert "FP8" in path.warning


def test_bf16_before_ampere_runs_as_fp16_and_says_so() -> None:
    t4 = get_gpu("T4")  # Turing: FP16 tensor cores, no BF16 (T4 datasheet lists FP16/INT8/INT4 only)
    path = compute_path(t4, "bf16")
    assert path.peak_flops_per_s == t4.peak("fp16") and path.compute_key == "fp16"
    assert "no BF16 tensor path" in path.warning and "--precision fp16" in path.warning
    assert compute_path(get_gpu("A100 SXM4 80GB"), "bf16").warning == ""
    assert "use fp16," in compute_path(t4, "fp8").warning  # not "use bf16" on a card without it


def test_calibration_from_dict_roundtrip_and_errors() -> None:
    cal = Calibration.from_dict({"gemm_efficiency_max": 0.7, "basis": "calibrated", "provenance": "runs 1-9 on H200"})
    assert cal.gemm_efficiency_max == 0.7 and cal.basis == "calibrated"
    assert Calibration.from_dict(cal.to_dict()) == cal
    with pytest.raises(InputError):
        Calibration.from_dict({"gemm_efficiency": 0.7})
    with pytest.raises(InputError):
        Calibration.from_dict({"gemm_efficiency_max": "high"})
    with pytest.raises(InputError):
        Calibration.from_dict({"basis": "guessed"})
    with pytest.raises(InputError):
        Calibration.from_dict({"fitted_on": "H200"})
    assert Calibration.from_dict({"fitted_on": ["L4"]}).time_uncertainty("L4")[0] == Calibration().fitted_error_fraction
    assert Calibration().time_uncertainty("L4")[0] == Calibration().extrapolated_error_fraction


def test_efficiency_curves_saturate() -> None:
    cal = Calibration()
    assert cal.gemm_efficiency(cal.gemm_half_flops) == pytest.approx(cal.gemm_efficiency_max / 2)
    assert cal.gemm_efficiency(1e15) == pytest.approx(cal.gemm_efficiency_max, rel=1e-4)
    assert cal.memory_efficiency(1e3) < cal.memory_efficiency(1e9)


def test_sliding_window_caps_kv_cache_and_attention() -> None:
    """Mistral-7B v0.1 (4096-token window on every layer) and Gemma-2 (every other layer): the KV cache of a
    16,384-token (Gemma-2: 8,192) sequence equals ModelArch.kv_bytes_for_context; a full-attention model keeps
    growing."""
    from gpumatch.estimate import estimate
    from gpumatch.models import get_model

    # Gemma-2 takes at most 8,192 positions (estimate() refuses longer), still twice its 4,096-token window
    for name, context in (("mistral-7b", 16384), ("gemma-2-9b", 8192), ("llama-3.1-8b", 16384)):
        e = estimate(name, "H100 SXM", Request(task="infer", prompt=context - 384, gen=384), with_scaling=False)
        assert e.memory.kv_cache_bytes == pytest.approx(get_model(name).kv_bytes_for_context(context, 2.0))
    short = estimate("mistral-7b", "H100 SXM", Request(task="infer", prompt=4000, gen=96), with_scaling=False)
    long = estimate("mistral-7b", "H100 SXM", Request(task="infer", prompt=16000, gen=384), with_scaling=False)
    assert long.memory.kv_cache_bytes == pytest.approx(short.memory.kv_cache_bytes)
    assert long.metrics["tpot_s"] == pytest.approx(short.metrics["tpot_s"], rel=1e-2)  # 4,048 vs 4,096 keys
