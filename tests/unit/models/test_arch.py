"""ModelArch accounting details: KV cache, sliding windows, MoE vs dense, biases."""

from __future__ import annotations

from dataclasses import replace

from gpumatch.models import get_model


def test_kv_bytes_per_token_matches_published_examples() -> None:
    # ../shared/notes/estimator-formulas.md B: Llama-2-7B 512 KiB/token, Llama-3-8B 128 KiB, Llama-3-70B 320 KiB (FP16)
    assert get_model("llama-2-7b").kv_bytes_per_token(2) == 512 * 1024
    assert get_model("llama-3.1-8b").kv_bytes_per_token(2) == 128 * 1024
    assert get_model("llama-3.1-70b").kv_bytes_per_token(2) == 320 * 1024


def test_mla_kv_cache_is_the_latent() -> None:
    v3 = get_model("deepseek-v3")
    assert v3.kv_bytes_per_token(2) == (512 + 64) * 61 * 2


def test_sliding_window_caps_kv_growth() -> None:
    g = get_model("gemma-2-9b")
    assert g.sliding_layers == 21
    short, long = g.kv_bytes_for_context(4096, 2), g.kv_bytes_for_context(8192, 2)
    per_layer_token = 2 * g.kv_heads * g.head_dim * 2
    assert long - short == per_layer_token * 4096 * 21  # only the 21 global layers keep growing
    llama = get_model("llama-3.1-8b")
    assert llama.kv_bytes_for_context(1000, 2) == 1000 * llama.kv_bytes_per_token(2)


def test_dense_models_active_equals_total_and_moe_less() -> None:
    assert get_model("llama-3.1-8b").params_active == get_model("llama-3.1-8b").params_total
    mix = get_model("mixtral-8x7b")
    assert mix.params_active < mix.params_total
    dense_twin = replace(mix, experts=0, experts_per_token=0, moe_ffn_size=0)
    assert mix.params_active - dense_twin.params_total == 4096 * 14336 * 3 * 32 + 4096 * 8 * 32  # 2nd expert + router


def test_tying_removes_one_vocab_matrix() -> None:
    m = get_model("llama-3.2-1b")
    assert replace(m, tied_embeddings=False).params_total - m.params_total == 128256 * 2048


def test_to_dict_has_the_cli_contract_keys() -> None:
    d = get_model("mixtral-8x7b").to_dict()
    for key in ("name", "params_total", "params_active", "layers", "hidden_size", "heads", "kv_heads", "head_dim",
                "ffn_size", "vocab_size", "tied_embeddings", "experts", "experts_per_token"):  # fmt: skip
        assert key in d
    assert d["experts"] == 8 and d["experts_per_token"] == 2


def test_qk_norms_and_attention_sinks_count_per_layer() -> None:
    q = get_model("qwen3-8b")
    assert q.params_total - replace(q, qk_norm=False).params_total == 2 * q.head_dim * q.layers
    g = get_model("gpt-oss-20b")
    assert g.params_total - replace(g, attention_sinks=False).params_total == g.heads * g.layers


def test_window_layers_override_the_every_rule() -> None:
    g = get_model("gemma-3-27b")
    assert (g.sliding_layers, g.window_layers) == (52, 52)
    assert replace(g, window_layers=None).sliding_layers == 62  # no pattern: every layer windowed
    short, long = g.kv_bytes_for_context(1024, 2), g.kv_bytes_for_context(2048, 2)
    assert long - short == 2 * g.kv_heads * g.head_dim * 2 * 1024 * 10  # only the 10 global layers keep growing
    assert replace(g, sliding_window=None).sliding_layers == 0
