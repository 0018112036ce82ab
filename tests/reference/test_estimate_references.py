"""Published numbers the estimators must reproduce (each test cites its source and tolerance)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpumatch.estimate import Calibration, Case, ModelNums, Request, estimate, model_nums
from gpumatch.estimate.memory import layer_activation_bytes, model_state_bytes
from gpumatch.models.arch import ModelArch

# GPT-3 175B shape (Brown et al. 2020, Table 2.1), the model Korthikanti et al. 2022 evaluate.
GPT3 = ModelArch(
    name="gpt-3-175b", family="gpt", layers=96, hidden_size=12288, heads=96, kv_heads=96, head_dim=128,
    ffn_size=4 * 12288, vocab_size=51200, tied_embeddings=True, gated_mlp=False,
)
S, B, H, A = 2048.0, 1.0, 12288.0, 96.0


def _case(**kw: float) -> Case:
    base = dict(capacity_bytes=80e9, bandwidth_bytes_per_s=2e12, peak_flops_per_s=312e12, tdp_w=400.0,
                flash=0.0, seq_parallel=0.0, act_bytes=2.0)
    base.update(kw)
    return Case(**base)


@pytest.mark.parametrize(
    ("tp", "sp", "selective", "expected_per_sbh"),
    [
        # Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
        # Table 2 (activation memory per transformer layer, bytes / (s·b·h)):
        (1, 0, 0, 34 + 5 * A * S / H),  # no parallelism: 34 + 5as/h
        (8, 0, 0, 10 + 24 / 8 + 5 * A * S / (H * 8)),  # tensor parallel: 10 + 24/t + 5as/(ht)
        (8, 1, 0, 34 / 8 + 5 * A * S / (H * 8)),  # tensor + sequence parallel: 34/t + 5as/(ht)
        (8, 0, 1, 10 + 24 / 8),  # tensor parallel + selective recompute: 10 + 24/t
        (8, 1, 1, 34 / 8),  # tensor + sequence parallel + selective recompute: 34/t
    ],
)
def test_korthikanti_table2_activation_per_layer(tp: int, sp: int, selective: int, expected_per_sbh: float) -> None:
    """Exact (tolerance 1e-9 relative): the generalized formula reduces to the paper's for a GPT block
    (gelu MLP of 4h, MHA, dropout, materialized attention, 16-bit activations, 1-byte masks)."""
    c = _case(tp=float(tp), seq_parallel=float(sp), rc_selective=float(selective))
    got = layer_activation_bytes(model_nums(GPT3), S * B, S, c, dropout=True)
    assert got == pytest.approx(expected_per_sbh * S * B * H, rel=1e-9)


def test_korthikanti_full_recompute_keeps_layer_input() -> None:
    """Korthikanti et al. 2022 section 5 / Table 2: full recomputation stores 2sbh per layer (tolerance 1e-9)."""
    c = _case(rc_full=1.0)
    assert layer_activation_bytes(model_nums(GPT3), S * B, S, c, dropout=True) == pytest.approx(2 * S * B * H)


def test_korthikanti_gpt3_no_recompute_order_of_magnitude() -> None:
    """Korthikanti et al. 2022 section 4.1: 34 + 5as/h per layer; for GPT-3 at s=2048 the attention score
    term (5·96·2048/12288 = 80) dominates the linear term (34): ratio 80/34 within 1e-9."""
    c = _case()
    per_layer = layer_activation_bytes(model_nums(GPT3), S, S, c, dropout=True)
    linear = 34 * S * H
    assert (per_layer - linear) / linear == pytest.approx(80 / 34, rel=1e-9)


def _zero_model_nums(psi: float) -> ModelNums:
    """A model reduced to one block of ``psi`` parameters (the ZeRO paper counts parameters only)."""
    return replace(model_nums(GPT3), layers=1.0, layer_params=psi, embed_params=0.0, head_params=0.0, hidden=0.0)


@pytest.mark.parametrize(
    ("stage", "expected_gb"),
    # Rajbhandari et al. 2020, "ZeRO", Figure 1: Psi = 7.5B, N_d = 64, K = 12 (mixed-precision Adam):
    # baseline (2+2+K)Psi = 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB.
    [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)],
)
def test_zero_paper_figure1_model_states(stage: int, expected_gb: float) -> None:
    """Tolerance: the paper's rounding (0.05 GB absolute, i.e. its last printed digit)."""
    m = _zero_model_nums(7.5e9)
    c = _case(zero=float(stage), dp=64.0, weight_bytes=2.0, grad_bytes=2.0, opt_bytes=12.0)
    w, g, o = model_state_bytes(m, c, training=True)
    assert (w + g + o) / 1e9 == pytest.approx(expected_gb, abs=0.05)


def test_zero_through_public_api() -> None:
    """Same ZeRO-1 arithmetic through estimate(): (2 + 2 + 12/64)·Psi per GPU (tolerance 1e-6 relative)."""
    e = estimate("llama-3.1-8b", "H100 SXM", Request(task="train", dp=64, zero=1, grad_bytes=2), with_scaling=False)
    from gpumatch.models import get_model

    psi = get_model("llama-3.1-8b").params_total
    states = e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes
    assert states == pytest.approx((2 + 2 + 12 / 64) * psi, rel=1e-6)


# The seed article (seeds/001): "70B 参数的大模型 ... FP16 ... 大概 140GB ... H100 的 3.35TB/s 带宽 ...
# 约等于每秒只能生成 20 多个 token ... RTX 4090 1TB/s ... 撑死也就每秒七八个 token"; 80 GB cannot hold it.
IDEAL = Calibration(memory_efficiency_max=1.0, memory_half_bytes=0.0, kernel_overhead_s=0.0,
                    decode_step_overhead_s=0.0, elementwise_bytes_per_token_hidden=0.0)


def test_seed_70b_fp16_weights_about_140_gb() -> None:
    """Llama-2-70B in FP16: 2 bytes × 69.0e9 parameters = 138 GB (seed: 'about 140 GB'; tolerance 3%)."""
    e = estimate("llama-2-70b", "H100 SXM", Request(task="infer", precision="fp16"), with_scaling=False)
    assert e.memory.weights_bytes / 1e9 == pytest.approx(140, rel=0.03)
    assert not e.fits


@pytest.mark.parametrize(("gpu", "low", "high"), [("H100 SXM", 22.0, 25.5), ("RTX 4090", 6.8, 8.0)])
def test_seed_70b_bandwidth_ceiling(gpu: str, low: float, high: float) -> None:
    """Batch-1 decode with ideal bandwidth and no overheads: bandwidth / weight bytes (3.35 TB/s / 138 GB
    = 24.3 tok/s on H100; 1.008 TB/s / 138 GB = 7.3 on RTX 4090). The seed says ~24 (20-something) and 7-8."""
    e = estimate(
        "llama-2-70b",
        gpu,
        Request(task="infer", precision="fp16", prompt=16, gen=16, concurrency=1),
        calibration=IDEAL,
        with_scaling=False,
    )
    assert low <= e.metrics["decode_tokens_per_s"] <= high
    assert e.bound == "memory"


def test_seed_70b_default_efficiency_below_ceiling() -> None:
    """With the default (assumed) efficiencies the H100 figure is 'twenty-something' and below the ceiling."""
    e = estimate("llama-2-70b", "H100 SXM", Request(task="infer", precision="fp16", prompt=16, gen=16, concurrency=1))
    assert 18.0 <= e.metrics["decode_tokens_per_s"] < 24.3


def test_published_vllm_a100_40gb_single_request_decode() -> None:
    """Published serving measurement (J. Musgrave, "vLLM throughput-latency sweep on NVIDIA A100",
    https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on): Llama-3.1-8B-Instruct BF16, vLLM 0.23.0,
    one A100 40GB, 1024 input / 128 output tokens, concurrency 1: "decode ... runs at about 75 tokens/sec,
    roughly 77% of the GPU's memory-bandwidth ceiling". Tolerance 10 %. The figure is one request's decode speed,
    1 / TPOT (with the default engine, vllm, TPOT includes its per-pass host cost)."""
    e = estimate(
        "llama-3.1-8b", "A100 SXM4 40GB", Request(task="serve", prompt=1024, gen=128, concurrency=1), with_scaling=False
    )
    assert 1.0 / e.metrics["tpot_s"] == pytest.approx(75.0, rel=0.10)
    assert e.bound == "memory"
