"""GPU checks of the bench package (run on a CUDA machine; skipped elsewhere)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_graph_replay_equals_eager_step() -> None:
    from gpumatch.bench.decode import _capture, make_caches
    from gpumatch.bench.llama import build_model, decode_logits, rope_tables
    from gpumatch.bench.shapes import tiny_shape

    dev = torch.device("cuda")
    model = build_model(tiny_shape(layers=4), dev, torch.bfloat16)
    caches = make_caches(model, 4, 128)
    rope = rope_tables(model.s, 128, dev, torch.bfloat16)
    tokens = torch.randint(0, model.s.vocab, (4, 1), device=dev)
    pos = torch.tensor([127], device=dev)
    out: list[torch.Tensor] = []

    def step() -> torch.Tensor:
        y = decode_logits(model, tokens, pos, rope, caches)
        out.append(y)
        return y

    with torch.inference_mode():
        ref = decode_logits(model, tokens, pos, rope, caches).float()
        replay = _capture(step, warmup=2)
        replay()
        torch.cuda.synchronize()
    got = out[-1].float()
    assert torch.isfinite(got).all()
    assert float((got - ref).norm() / ref.norm()) < 1e-2


def test_gemm_rate_is_plausible() -> None:
    from gpumatch.bench.micro import gemm_case

    row = gemm_case(4096, 4096, 4096, torch.device("cuda"), iters=5)
    assert 10 < row["tflops_per_s"] < 2500
