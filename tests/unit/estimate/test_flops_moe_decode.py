"""MoE decode reads the experts a batch actually touches: E·(1 − (1 − k/E)^B) per MoE layer, not k, not all E.

Under uniform routing a token's top-k set misses a given expert with probability C(E−1, k)/C(E, k) = 1 − k/E; B
tokens routing independently all miss it with probability (1 − k/E)^B (the occupancy formula).
"""

from __future__ import annotations

import pytest

from gpumatch.estimate import Request, api, flops
from gpumatch.estimate.case import model_nums
from gpumatch.models import get_model


def _touched(preset: str, batch: float) -> float:
    m = model_nums(get_model(preset))
    per_layer = flops.moe_extra_weight_params(m, batch) * m.layers / m.moe_layers
    return m.experts_per_token + per_layer / m.expert_params_per_layer


def test_one_token_reads_only_its_top_k() -> None:
    assert _touched("deepseek-v3", 1.0) == pytest.approx(8.0)
    assert _touched("gpt-oss-120b", 1.0) == pytest.approx(4.0)


def test_a_batch_reads_the_expected_distinct_experts() -> None:
    # DeepSeek-V3: E = 256, k = 8; 32 tokens: 256 * (1 - (248/256)^32) = 163.3 experts
    assert _touched("deepseek-v3", 32.0) == pytest.approx(256 * (1 - (248 / 256) ** 32))
    assert _touched("deepseek-v3", 32.0) == pytest.approx(163.3, abs=0.1)
    assert _touched("qwen3-30b-a3b", 8.0) == pytest.approx(128 * (1 - (120 / 128) ** 8))


def test_large_batches_read_every_expert() -> None:
    assert _touched("deepseek-v3", 4096.0) == pytest.approx(256.0)
    assert _touched("mixtral-8x7b", 64.0) == pytest.approx(8.0)


def test_dense_models_read_no_extra_experts() -> None:
    assert flops.moe_extra_weight_params(model_nums(get_model("llama-3.1-8b")), 64.0) == 0.0


def test_decode_step_grows_with_the_experts_touched() -> None:
    def tpot(batch: int) -> float:
        e = api.estimate(
            "deepseek-v3",
            "H200",
            Request(count=8, task="serve", prompt=1024, gen=256, precision="fp8", tp=8, concurrency=batch),
        )
        return float(e.to_dict()["tpot_s"])

    one, eight, many = tpot(1), tpot(8), tpot(256)
    assert one < eight < many
    # at batch 8, ~57 of 256 experts are read per layer: well under reading them all (batch 256 reads ~all)
    assert eight < 0.5 * many
