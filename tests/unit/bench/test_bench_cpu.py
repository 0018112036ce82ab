"""CPU checks of the bench package: shapes, statistics, and the model's decode path against a full pass."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpumatch.bench.shapes import LLAMA_3_2_1B, LLAMA_3_2_3B, LLAMA_3_8B, LlamaShape, tiny_shape
from gpumatch.bench.stats import percentile, summarize


@pytest.mark.parametrize(
    ("shape", "params"),
    # Parameter counts of the published checkpoints (HF model cards / safetensors index totals).
    [(LLAMA_3_8B, 8_030_261_248), (LLAMA_3_2_1B, 1_235_814_400), (LLAMA_3_2_3B, 3_212_749_824)],
)
def test_param_counts_match_published(shape: dict[str, object], params: int) -> None:
    assert LlamaShape.from_dict(shape).params_total == params


def test_kv_bytes_llama3_8b() -> None:
    assert LlamaShape.from_dict(LLAMA_3_8B).kv_bytes_per_token_bf16 == 128 * 1024  # notes: 128 KiB/token


def test_from_dict_accepts_modelarch_names() -> None:
    s = LlamaShape.from_dict({"layers": 2, "hidden_size": 64, "heads": 4, "kv_heads": 2, "ffn_size": 128,
                              "vocab_size": 10, "tied_embeddings": True})
    assert (s.hidden, s.head_dim, s.ffn, s.vocab, s.tied) == (64, 16, 128, 10, True)
    with pytest.raises(ValueError, match="lacks"):
        LlamaShape.from_dict({"layers": 2})


def test_percentile_matches_linear_interpolation() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 90) == 5.0
    s = summarize([3.0, 1.0, 2.0])
    assert (s["median_s"], s["min_s"], s["max_s"], s["n"]) == (2.0, 1.0, 3.0, 3)


def test_import_bench_without_torch() -> None:
    code = ("import sys; import gpumatch.bench, gpumatch.bench.shapes, gpumatch.bench.stats; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_cached_decode_equals_full_causal_pass() -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.llama import build_model, decode_logits, rope_tables

    torch.manual_seed(0)
    dev = torch.device("cpu")
    model = build_model(tiny_shape(), dev, torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    n, b = 10, 2
    tokens = torch.randint(0, model.s.vocab, (b, n))
    rope = rope_tables(model.s, n, dev, torch.float64)
    with torch.no_grad():
        full = model(tokens, rope)
        ks = [torch.full((b, model.s.kv_heads, n, model.s.head_dim), float("nan"), dtype=torch.float64)
              for _ in range(model.s.layers)]
        vs = [torch.full_like(k, float("nan")) for k in ks]
        for t in range(n):
            caches = [(k[:, :, : t + 1], v[:, :, : t + 1]) for k, v in zip(ks, vs, strict=True)]
            logits = decode_logits(model, tokens[:, t : t + 1], torch.tensor([t]), rope, caches)
            err = (logits - full[:, t]).norm() / full[:, t].norm()
            assert float(err) < 1e-10


def test_train_case_runs_and_reports(tmp_path: object) -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.train import train_case

    row = train_case(tiny_shape(), 2, 16, "full", "fp32", torch.device("cpu"), warmup=1, iters=2)
    assert row["status"] == "ok"
    assert row["timing"]["n"] == 2 and row["timing"]["median_s"] > 0
    assert row["tokens_per_s"] == pytest.approx(32 / row["timing"]["median_s"])


def test_decode_case_refuses_an_unknown_variant() -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.decode import decode_case
    from gpumatch.bench.llama import build_model

    model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
    with pytest.raises(ValueError, match="unknown decode variant 'grpah'"):
        decode_case(model, 1, 8, ["eager", "grpah"])
