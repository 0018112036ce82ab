"""CPU checks of the bench package: shapes, statistics, and the model's decode path against a full pass."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from gpumatch.bench.shapes import LLAMA_3_2_1B, LLAMA_3_2_3B, LLAMA_3_8B, LlamaShape, tiny_shape
from gpumatch.bench.stats import summarize
from gpumatch.stats import percentile


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


@pytest.mark.parametrize("kernel", ["auto", "split", "sdpa"])
def test_cached_decode_equals_full_causal_pass(kernel: str) -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.llama import build_model, decode_logits, rope_tables, set_decode_attention

    torch.manual_seed(0)
    dev = torch.device("cpu")
    model = build_model(tiny_shape(), dev, torch.float64)
    set_decode_attention(model, kernel)
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


@pytest.mark.parametrize("length", [512, 1000, 1024])
def test_split_kv_attention_equals_sdpa(length: int) -> None:
    """The split-KV decode attention (chunks of 128 summed) against one SDPA call, in float64: exact up to
    rounding; a cache that is not a multiple of the chunk takes the one-chunk path."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from gpumatch.bench.llama import split_kv_attention

    torch.manual_seed(1)
    q = torch.randn(3, 2, 4, 16, dtype=torch.float64)
    k, v = (torch.randn(3, 2, length, 16, dtype=torch.float64) for _ in range(2))
    ref = F.scaled_dot_product_attention(q, k, v)
    assert float((split_kv_attention(q, k, v, chunk=128) - ref).abs().max()) < 1e-12


def test_decode_bytes_count_the_embedding_only_when_tied() -> None:
    """A decode step reads one embedding row per sequence; a tied head reads the whole table (as the head); the
    K/V cache is read over the context and the new token's K/V written. The weight part equals the model's
    parameter bytes counted from the module itself."""
    torch = pytest.importorskip("torch")
    from gpumatch.bench.cases import decode_bytes, decode_bytes_per_step
    from gpumatch.bench.llama import build_model

    for tied in (False, True):
        model = build_model({**tiny_shape(), "tied": tied}, torch.device("cpu"), torch.bfloat16)
        s = model.s
        counted = sum(p.numel() for n, p in model.named_parameters() if tied or not n.startswith("embed."))
        body = s.layers * s.params_per_layer + s.hidden  # blocks and the final norm
        head = s.vocab * s.hidden
        assert counted == body + head
        parts = decode_bytes(model, 2, 8)
        assert parts["weight_bytes"] == 2 * counted
        assert parts["embedding_row_bytes"] == (0 if tied else 2 * s.hidden * 2)
        assert parts["kv_read_bytes"] == s.kv_bytes_per_token_bf16 * 16
        assert parts["kv_write_bytes"] == s.kv_bytes_per_token_bf16 * 2
        assert decode_bytes_per_step(model, 2, 8) == sum(v for k, v in parts.items() if k != "total_bytes")


def test_llama3_8b_decode_bytes_by_hand() -> None:
    """Llama-3-8B (untied, bf16), batch 1, context 2048: 8,030,261,248 parameters less the 525,336,576 of the
    embedding table = 7,504,924,672 weights (15.01 GB), 4096 elements of embedding row, 128 KiB of K/V per
    token (2 · 32 layers · 8 heads · 128 · 2 B)."""
    from gpumatch.bench.work import decode_bytes

    parts = decode_bytes(LLAMA_3_8B, 1, 2048)
    assert parts["weight_bytes"] == 2 * (8_030_261_248 - 128_256 * 4096)
    assert parts["embedding_row_bytes"] == 8192
    assert parts["kv_read_bytes"] == 131_072 * 2048 and parts["kv_write_bytes"] == 131_072


def test_prefill_and_train_flops_match_the_counted_matmuls() -> None:
    """The projection and LM-head FLOPs of :mod:`gpumatch.bench.work` against torch's FlopCounterMode on the tiny
    model (matrix products only; attention is counted apart, causal, by formula)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from gpumatch.bench.llama import build_model, rope_tables
    from gpumatch.bench.work import prefill_flops, train_flops

    model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
    s, b, n = model.s, 2, 16
    tokens = torch.randint(0, s.vocab, (b, n))
    rope = rope_tables(s, n, torch.device("cpu"), torch.float32)
    attention = 2.0 * s.layers * s.heads * s.head_dim * b * n * n
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        model.prefill_logits(tokens, rope)
    mm = sum(v for k, v in fc.get_flop_counts()["Global"].items() if "mm" in str(k) and "attention" not in str(k))
    assert prefill_flops(s, b, n) - attention == mm
    with FlopCounterMode(display=False) as fc:
        model(tokens, rope).float().sum().backward()
    mm = sum(v for k, v in fc.get_flop_counts()["Global"].items() if "mm" in str(k) and "attention" not in str(k))
    assert train_flops(s, b, n) - 3 * attention == mm


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


def test_nf4_round_trip_and_packing() -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.lora import NF4_LEVELS, _pair_table, dequantize_nf4, quantize_nf4

    torch.manual_seed(0)
    w = torch.randn(96, 128) * 0.02
    packed, absmax = quantize_nf4(w)
    assert packed.dtype == torch.uint8 and packed.numel() == w.numel() // 2
    assert absmax.dtype == torch.bfloat16 and absmax.numel() == w.numel() // 64
    back = dequantize_nf4(packed, absmax, _pair_table(w.device, torch.float32), (96, 128))
    # every weight lands on the nearest of 16 levels of its block: at most half the widest level gap off
    gap = max(b - a for a, b in itertools.pairwise(NF4_LEVELS))
    scale = absmax.float().repeat_interleave(64).view(96, 128)
    assert bool(((back - w).abs() <= scale * (gap / 2 + 0.01)).all())
    assert float((back - w).norm() / w.norm()) < 0.15


def test_nf4_linear_gives_the_input_gradient_of_its_dequantized_weight() -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.lora import FrozenNF4Linear

    torch.manual_seed(0)
    layer = FrozenNF4Linear(torch.randn(32, 64))
    assert list(layer.parameters()) == []
    w = layer.dequantized(torch.float32)
    x = torch.randn(3, 64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    layer(x).pow(2).sum().backward()
    (x_ref @ w.T).pow(2).sum().backward()
    assert x.grad is not None and x_ref.grad is not None
    assert torch.allclose(x.grad, x_ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["lora", "qlora"])
def test_adapters_train_and_the_base_stays_frozen(variant: str) -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.llama import build_model, rope_tables
    from gpumatch.bench.lora import add_adapters
    from gpumatch.calibrate.cases import arch_of
    from gpumatch.estimate.case import model_nums

    torch.manual_seed(0)
    shape, rank = tiny_shape(), 4
    model = build_model(shape, torch.device("cpu"), torch.bfloat16)
    model.recompute = True
    adapters = add_adapters(model, rank, variant)
    frozen = [p for p in model.parameters() if not p.requires_grad]
    # the estimator's adapter count: rank r on q, k, v, o, gate, up, down of every layer
    per_rank_layer = model_nums(arch_of(shape)).lora_params_per_rank_layer
    assert sum(p.numel() for p in adapters) == shape["layers"] * rank * per_rank_layer
    assert all(p.dtype == torch.float32 for p in adapters) and frozen
    if variant == "qlora":  # only embedding, norms and LM head stay parameters; the projections are NF4 buffers
        assert sum(p.numel() for p in frozen) == 2 * shape["vocab"] * shape["hidden"] + shape["hidden"] * (
            2 * shape["layers"] + 1)
        assert any(b.dtype == torch.uint8 for b in model.buffers())
    tokens = torch.randint(0, shape["vocab"], (2, 17))
    logits = model(tokens[:, :-1], rope_tables(model.s, 16, torch.device("cpu"), torch.bfloat16))
    torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten()).backward()
    assert all(p.grad is None for p in frozen)
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in adapters)


@pytest.mark.parametrize(("variant", "recompute"), [("lora", "none"), ("lora", "full"), ("qlora", "full")])
def test_adapter_train_case_runs_and_reports(variant: str, recompute: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench import train
    from gpumatch.bench.train import train_case

    # CUDA's allocator counters do not exist on the CPU: a stand-in checks that the row carries them
    peaks = {"max_memory_allocated_bytes": 3, "max_memory_reserved_bytes": 4, "memory_allocated_bytes": 1}
    monkeypatch.setattr(train, "_memory", lambda dev: dict(peaks))
    row = train_case(tiny_shape(), 2, 16, recompute, "none", torch.device("cpu"), warmup=1, iters=2,
                     variant=variant, lora_rank=4)
    assert row["status"] == "ok"
    assert (row["variant"], row["lora_rank"], row["adapter_dtype"]) == (variant, 4, "fp32")
    assert row["base_format"] == {"lora": "bf16", "qlora": "nf4-b64-bf16-absmax"}[variant]
    assert 0 < row["trainable_params"] < row["params"]
    assert row["timing"]["n"] == 2 and row["timing"]["median_s"] > 0
    assert row["tokens_per_s"] == pytest.approx(32 / row["timing"]["median_s"])
    assert row["after_init"] == row["after_first_step"] == peaks
    assert row["max_memory_reserved_bytes"] == 4 and row["max_memory_allocated_bytes"] == 3


def test_adapter_train_case_refuses_a_master_copy_or_no_rank() -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.train import train_case

    with pytest.raises(ValueError, match="lora_rank >= 1 and master none"):
        train_case(tiny_shape(), 1, 8, "none", "fp32", torch.device("cpu"), variant="lora", lora_rank=4)
    with pytest.raises(ValueError, match="lora_rank >= 1"):
        train_case(tiny_shape(), 1, 8, "none", "none", torch.device("cpu"), variant="qlora", lora_rank=0)


def test_the_graph_launch_row_reports_its_percentiles_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """``launch_graph_kernel_s`` is one replay of a graph of N kernels over N; its p50/p90 are per kernel too
    (they were whole replays: 0.991 ms beside a 0.991 µs value in the H100 quick run of 2026-12-07)."""
    import torch

    import gpumatch.bench.micro as micro
    from gpumatch.bench import cases

    replays = [1.0e-3 + i * 1e-6 for i in range(20)]
    fake = {"eager_op_timing": {"raw_s": [6e-6] * 20}, "eager_op_s": 6e-6, "graph_kernels": 1000,
            "graph_many_timing": {"raw_s": replays, "median_s": 1.0095e-3}, "graph_kernel_s": 1.0095e-6}
    monkeypatch.setattr(micro, "launch_case", lambda dev: fake)
    rows = {r["metric"]: r for r in cases._launch({}, torch.device("cpu"))["results"]}
    graph = rows["launch_graph_kernel_s"]
    assert graph["value"] == pytest.approx(1.0095e-6)
    assert graph["extra"]["p50_s"] == pytest.approx(graph["value"], rel=1e-9)
    assert max(graph["extra"]["raw_s"]) < 1.1e-6 and graph["extra"]["graph_replay_p50_s"] == 1.0095e-3

