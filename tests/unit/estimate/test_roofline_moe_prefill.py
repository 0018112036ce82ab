"""An MoE layer's grouped expert GEMMs: their FLOPs and their weights' stream add up instead of overlapping.

Basis: ``torch._grouped_mm`` on an H100 SXM, 2026-12-07 (tests/data/measurements/2026-12-07-h100-moe-prefill-probe.json,
``benchmarks/gpu/probe_moe_prefill.py``): the grouped time is the dense GEMM's time at the same shapes plus the touched
experts' weights at the memory rate (the reference test ``tests/reference/test_moe_prefill_probe.py`` holds the
measurement against that form).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpumatch.estimate import roofline
from gpumatch.estimate.api import resolve_gpu
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION as CAL
from gpumatch.estimate.case import Case, ModelNums, model_nums
from gpumatch.estimate.options import build_case
from gpumatch.estimate.request import Request
from gpumatch.models import get_model


def _case(preset: str, gpu: str = "H200 SXM 141GB", **kw: object) -> tuple[ModelNums, Case]:
    arch = get_model(preset)
    c, _ = build_case(arch, resolve_gpu(gpu), Request(task="serve", **kw))
    return model_nums(arch), c


def _extra(m: ModelNums, c: Case, tokens: float) -> float:
    comp, mem = roofline._expert_overlap_lost(m, c, tokens, CAL)
    return float(comp) + float(mem)


def test_a_dense_model_has_no_expert_term() -> None:
    m, c = _case("llama-3.1-8b")
    assert _extra(m, c, 8192.0) == 0.0


def test_a_prefill_adds_the_stream_of_the_weights_it_touches() -> None:
    m, c = _case("qwen3-30b-a3b")
    tokens = 8192.0  # 512 rows per expert: every one of the 128 experts touched, compute-bound
    every_expert = 128.0 * m.expert_params_per_layer * m.moe_layers / m.layers
    stream = float(roofline.op(0.0, every_expert * c.weight_bytes, roofline.EXPERT_GEMMS, c, CAL)[1])
    comp, mem = roofline._expert_overlap_lost(m, c, tokens, CAL)
    assert float(comp) == 0.0
    # every expert's weights, and at most the grouped GEMM's penalty (held from the decode probe) more
    assert stream <= float(mem) <= 1.25 * stream


def test_a_decode_step_adds_only_the_routed_flops() -> None:
    m, c = _case("qwen3-30b-a3b")
    comp, mem = roofline._expert_overlap_lost(m, c, 1.0, CAL)
    flop = 2.0 * 8.0 * m.expert_params_per_layer * m.moe_layers / m.layers
    assert float(mem) == 0.0
    assert float(comp) == pytest.approx(flop / (float(c.peak_flops_per_s) * CAL.gemm_efficiency_max))
    assert float(comp) < 1e-6  # well under a microsecond: a decode step's time stays its bytes


def test_the_prefill_of_an_moe_model_is_longer_by_the_stream_and_tp_shards_it() -> None:
    m, c = _case("qwen3-30b-a3b")
    cp = replace(c, prompt=4096.0, seqs_per_replica=1.0)
    with_term = float(roofline.prefill(m, cp, CAL)["time_s"])
    lost = _extra(m, cp, 4096.0) * m.layers
    assert lost > 0.1 * with_term  # a 4k prefill of a 3B-active model streams 48 layers of 128 experts
    m8, c8 = _case("deepseek-v3", count=8, tp=8, precision="fp8")
    sharded, whole = _extra(m8, replace(c8, tp=8.0), 8192.0), _extra(m8, replace(c8, tp=1.0), 8192.0)
    assert sharded == pytest.approx(whole / 8.0, rel=0.01)
