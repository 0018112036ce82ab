"""Tensors a quantized checkpoint keeps at 16 bit: the embedding and LM head of every quantized format, and the
attention projections of an MoE model whose experts are FP4 (gpt-oss, NVIDIA's DeepSeek-R1-FP4).

Sources (gpumatch.estimate.precision docstring): llm-compressor FP8 recipes ``ignore: [lm_head]``; gpt-oss "post-
trained with quantization of the MoE weights to MXFP4"; nvidia/DeepSeek-R1-NVFP4-v2 "additionally quantizes the wo
module in attention layers" (v1 leaves attention unquantized).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpumatch.catalog import get_gpu
from gpumatch.estimate import Request, estimate
from gpumatch.estimate.api import model_arch
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION
from gpumatch.estimate.case import model_nums
from gpumatch.estimate.options import build_case
from gpumatch.estimate.precision import bytes_per_element, edge_precision, moe_attention_precision
from gpumatch.estimate.roofline import decode_step

H100 = "H100 SXM5 80GB"


@pytest.mark.parametrize("fmt", ["fp8", "int8", "int4", "nf4", "mxfp4", "nvfp4", "fp4"])
def test_quantized_formats_keep_embedding_and_head_16_bit(fmt: str) -> None:
    assert edge_precision(fmt) == "bf16"


@pytest.mark.parametrize("fmt", ["bf16", "fp16", "fp32", "tf32"])
def test_unquantized_formats_keep_their_own_precision(fmt: str) -> None:
    assert edge_precision(fmt) == fmt
    assert moe_attention_precision(fmt) == fmt


def test_only_fp4_experts_leave_attention_16_bit() -> None:
    assert [moe_attention_precision(f) for f in ("mxfp4", "nvfp4", "fp4")] == ["bf16"] * 3
    assert [moe_attention_precision(f) for f in ("fp8", "int4")] == ["fp8", "int4"]


def _weights_bytes(model: str, precision: str, gpu: str = H100) -> float:
    est = estimate(model, gpu, Request(task="serve", precision=precision, concurrency=1, engine="static"))
    return float(est.memory.weights_bytes)


def test_fp8_dense_model_holds_embedding_and_head_in_bf16() -> None:
    m = model_nums(model_arch("llama-3.1-8b"))
    edges = m.embed_params + m.head_params
    body = m.params_total - edges
    assert _weights_bytes("llama-3.1-8b", "fp8") == pytest.approx(body * 1.0 + edges * 2.0, rel=1e-3)
    # bf16: every tensor at 2 bytes (unchanged)
    assert _weights_bytes("llama-3.1-8b", "bf16") == pytest.approx(m.params_total * 2.0, rel=1e-3)


def test_mxfp4_moe_model_holds_attention_and_edges_in_bf16() -> None:
    m = model_nums(model_arch("gpt-oss-20b"))
    edges = m.embed_params + m.head_params
    attn = m.layers * m.layer_attention_params
    rest = m.params_total - edges - attn
    expected = rest * bytes_per_element("mxfp4") + (edges + attn) * 2.0
    got = _weights_bytes("gpt-oss-20b", "mxfp4")
    assert got == pytest.approx(expected, rel=1e-3)
    assert got > m.params_total * bytes_per_element("mxfp4") + 0.9 * (edges + attn) * 1.4


def test_decode_step_reads_the_16_bit_tensors() -> None:
    """A batch-1 decode step is a weight read: counting the FP8 8B model's LM head at 2 bytes instead of 1 adds
    its extra 1.05 GB over the card's bandwidth to the step; for gpt-oss-20b MXFP4 the attention projections add
    theirs (1.27 GB at 2 bytes instead of 0.53)."""
    cal = DEFAULT_CALIBRATION
    for model, precision, attention in (("llama-3.1-8b", "fp8", False), ("gpt-oss-20b", "mxfp4", True)):
        arch, gpu = model_arch(model), get_gpu(H100)
        case, _ = build_case(arch, gpu, Request(task="infer", precision=precision, concurrency=1, prompt=512, gen=64))
        m = model_nums(arch)
        quantized = replace(case, edge_weight_bytes=case.weight_bytes, moe_attention_weight_bytes=case.weight_bytes)
        extra_bytes = m.vocab * m.hidden * (2.0 - float(case.weight_bytes))
        if attention:
            extra_bytes += m.layers * m.layer_attention_params * (2.0 - float(case.weight_bytes))
        expected_s = extra_bytes / (float(case.bandwidth_bytes_per_s) * cal.memory_efficiency_max)
        grown_s = (float(decode_step(m, case, 512.0, cal)["time_s"])
                   - float(decode_step(m, quantized, 512.0, cal)["time_s"]))
        assert grown_s == pytest.approx(expected_s, rel=0.05)


def test_the_estimate_states_which_tensors_stay_16_bit() -> None:
    def kept(model: str, precision: str) -> list[str]:
        d = estimate(model, H100, Request(task="serve", precision=precision, concurrency=4, num_prompts=0)).to_dict()
        return list(d["precision"]["kept_16_bit"])

    assert kept("llama-3.1-8b", "bf16") == []
    assert kept("llama-3.1-8b", "fp8") == ["embedding", "LM head"]
    assert kept("gpt-oss-20b", "mxfp4") == ["attention", "embedding", "LM head"]
    assert kept("deepseek-v3", "fp8") == ["embedding", "LM head"]  # FP8 experts: attention is FP8 as well
