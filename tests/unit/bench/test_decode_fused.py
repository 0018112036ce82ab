"""The fused decode variants (per-layer static compile, whole-step compile) and the flex decode attention give the
logits of the unfused eager step, on the CPU (inductor's C++ backend)."""

from __future__ import annotations

import pytest

from gpumatch.bench.shapes import tiny_shape

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def _model(dtype: object, head_dim: int = 16) -> object:
    from gpumatch.bench.llama import build_model

    torch.manual_seed(0)
    shape = {**tiny_shape(), "head_dim": head_dim, "hidden": 4 * head_dim}
    model = build_model(shape, torch.device("cpu"), dtype)
    with torch.no_grad():
        for p in model.parameters():  # larger than the 0.02 default, so a wrong layer changes the logits
            p.normal_(0, 0.2)
    return model


@pytest.mark.parametrize(("variant", "attention", "dtype", "tol", "head_dim"), [
    ("fused", "split", "float32", 1e-5, 16),
    # inductor's CPU flex-attention template (torch 2.13) is wrong at head dim 16 on some CPUs (an AMD EPYC without
    # AVX-512): torch's own compiled flex_attention gave NaN or 0.39 relative error against SDPA there, and exact
    # results at head dims 32-128; the GPU path is a Triton kernel. So flex is checked at head dim 32, in fp32.
    ("fused", "flex", "float32", 1e-5, 32),
    ("whole", "sdpa", "float32", 1e-5, 16),
])
def test_compiled_variant_matches_the_eager_step(variant: str, attention: str, dtype: str, tol: float,
                                                 head_dim: int) -> None:
    from gpumatch.bench.decode import check_compiled, compiled_for
    from gpumatch.bench.llama import set_decode_attention

    model = _model(getattr(torch, dtype), head_dim)
    set_decode_attention(model, attention)
    got = check_compiled(model, compiled_for(variant), batch=3, context=40, variant=variant)
    assert got["finite"]
    assert got["compiled_vs_eager_rel_l2"] < tol
    assert got["cache_max_abs_diff"] < (1e-6 if dtype == "float32" else 1e-2)


def test_a_wrong_step_fails_the_check() -> None:
    """The check can fail: a step that skips the last layer is far from the eager logits."""
    from gpumatch.bench.decode import check_compiled
    from gpumatch.bench.llama import decode_logits

    model = _model(torch.float32)

    def skip_last(m: object, tokens: object, pos: object, rope: object, caches: list[object]) -> object:
        layers = m.layers  # type: ignore[attr-defined]
        m.layers = layers[:-1]  # type: ignore[attr-defined]
        try:
            return decode_logits(m, tokens, pos, rope, caches[:-1])  # type: ignore[arg-type]
        finally:
            m.layers = layers  # type: ignore[attr-defined]

    assert check_compiled(model, skip_last, batch=2, context=16, variant="whole")["compiled_vs_eager_rel_l2"] > 0.1


@pytest.mark.parametrize("length", [1, 37, 256])
def test_flex_decode_attention_equals_sdpa(length: int) -> None:
    """Flex decode attention (GQA, uncompiled reference) against SDPA over K/V repeated to the query heads."""
    import torch.nn.functional as F

    from gpumatch.bench.llama import flex_decode_attention

    torch.manual_seed(2)
    b, hkv, g, d = 2, 3, 4, 16
    q = torch.randn(b, hkv * g, 1, d, dtype=torch.float64)
    k, v = (torch.randn(b, hkv, length, d, dtype=torch.float64) for _ in range(2))
    ref = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))
    got = flex_decode_attention(q, k, v)
    assert got.shape == (b, hkv, g, d)
    assert float((got.reshape(b, hkv * g, 1, d) - ref).abs().max()) < 1e-10


def test_decode_case_runs_the_fused_variant_and_reports_its_bytes() -> None:
    """The suite's decode case with ``fused`` and ``attention`` on the CPU: the step time, the tokens/s and the
    byte breakdown the MBU is read from."""
    from gpumatch.bench.cases import run_case

    out = run_case({"id": "d", "kind": "decode", "params": {
        "model": tiny_shape(), "batch": 2, "context": 24, "variant": "fused", "attention": "split", "iters": 3}})
    step = next(r for r in out["results"] if r["metric"] == "decode_step_s")
    parts = step["extra"]["bytes_parts"]
    assert step["extra"]["bytes_per_step"] == parts["total_bytes"] > parts["weight_bytes"] > 0
    assert step["extra"]["attention"] == "split" and step["config"]["variant"] == "fused"
