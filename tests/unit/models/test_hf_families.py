"""config.json import of the 2025 families (qwen3, qwen3_moe, gemma3, llama4, gpt_oss, mistral3, Phi-4's phi3).

Each CONFIG restates the architectural fields of the published config.json named beside it (the other keys of
those files, e.g. rope or token ids, are left out: the importer ignores them). Nested multimodal configs keep their
nesting. Each must import to the preset of the same model, with the same counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpumatch.errors import DataFileError
from gpumatch.models import SUPPORTED_MODEL_TYPES, get_model, import_hf_config

HF = "https://huggingface.co/{}/blob/main/config.json"

_QWEN3_COMMON: dict[str, Any] = {
    "attention_bias": False, "head_dim": 128, "max_position_embeddings": 40960, "rope_scaling": None,
    "sliding_window": None, "use_sliding_window": False, "tie_word_embeddings": False, "vocab_size": 151936,
}  # fmt: skip
_GPT_OSS_COMMON: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "attention_bias": True, "experts_per_token": 4,
    "num_experts_per_tok": 4, "head_dim": 64, "hidden_size": 2880, "intermediate_size": 2880,
    "max_position_embeddings": 131072, "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
    "tie_word_embeddings": False, "vocab_size": 201088,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
}  # fmt: skip
_LLAMA4_TEXT: dict[str, Any] = {
    "attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
    "intermediate_size": 8192, "intermediate_size_mlp": 16384, "model_type": "llama4_text",
    "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
    "use_qk_norm": True, "vocab_size": 202048,
}  # fmt: skip

# preset -> (source of the config, the config's fields)
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3-8b": (HF.format("Qwen/Qwen3-8B"), {
        **_QWEN3_COMMON, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "_name_or_path": "Qwen/Qwen3-8B",
        "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32, "num_hidden_layers": 36,
        "num_key_value_heads": 8}),
    "qwen3-32b": (HF.format("Qwen/Qwen3-32B"), {
        **_QWEN3_COMMON, "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
        "intermediate_size": 25600, "num_attention_heads": 64, "num_hidden_layers": 64, "num_key_value_heads": 8}),
    "qwen3-30b-a3b": (HF.format("Qwen/Qwen3-30B-A3B"), {
        **_QWEN3_COMMON, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "decoder_sparse_step": 1,
        "hidden_size": 2048, "intermediate_size": 6144, "mlp_only_layers": [], "moe_intermediate_size": 768,
        "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
        "num_key_value_heads": 4}),
    "qwen3-235b-a22b": (HF.format("Qwen/Qwen3-235B-A22B"), {
        **_QWEN3_COMMON, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "decoder_sparse_step": 1,
        "hidden_size": 4096, "intermediate_size": 12288, "mlp_only_layers": [], "moe_intermediate_size": 1536,
        "num_attention_heads": 64, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 94,
        "num_key_value_heads": 4}),
    # the published gemma-3 configs leave vocab_size (262208) and the context (131072) to Gemma3TextConfig
    "gemma-3-12b": (HF.format("google/gemma-3-12b-it"), {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": {
            "hidden_size": 3840, "intermediate_size": 15360, "model_type": "gemma3_text", "num_attention_heads": 16,
            "num_hidden_layers": 48, "num_key_value_heads": 8, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024}}),
    "gemma-3-27b": (HF.format("google/gemma-3-27b-it"), {
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": {
            "head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
            "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
            "query_pre_attn_scalar": 168, "sliding_window": 1024}, "vision_config": {"hidden_size": 1152}}),
    "llama-4-scout": (HF.format("meta-llama/Llama-4-Scout-17B-16E-Instruct"), {
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": {
            **_LLAMA4_TEXT, "interleave_moe_layer_step": 1, "max_position_embeddings": 10485760,
            "num_local_experts": 16}}),
    "llama-4-maverick": (HF.format("meta-llama/Llama-4-Maverick-17B-128E-Instruct"), {
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "text_config": {
            **_LLAMA4_TEXT, "interleave_moe_layer_step": 2, "max_position_embeddings": 1048576,
            "num_local_experts": 128, "use_qk_norm": False}}),
    "gpt-oss-20b": (HF.format("openai/gpt-oss-20b"), {
        **_GPT_OSS_COMMON, "layer_types": ["sliding_attention", "full_attention"] * 12, "num_hidden_layers": 24,
        "num_local_experts": 32}),
    "gpt-oss-120b": (HF.format("openai/gpt-oss-120b"), {
        **_GPT_OSS_COMMON, "layer_types": ["sliding_attention", "full_attention"] * 18, "num_hidden_layers": 36,
        "num_local_experts": 128}),
    "mistral-small-3.1-24b": (HF.format("mistralai/Mistral-Small-3.1-24B-Instruct-2503"), {
        "architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "text_config": {
            "head_dim": 128, "hidden_size": 5120, "intermediate_size": 32768, "max_position_embeddings": 131072,
            "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
            "sliding_window": None, "vocab_size": 131072}, "vision_config": {"hidden_size": 1024}}),
    "phi-4": (HF.format("microsoft/phi-4"), {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_bias": False, "hidden_size": 5120,
        "intermediate_size": 17920, "max_position_embeddings": 16384, "num_attention_heads": 40,
        "num_hidden_layers": 40, "num_key_value_heads": 10, "sliding_window": None, "tie_word_embeddings": False,
        "vocab_size": 100352}),
}  # fmt: skip

SHAPE_FIELDS = (
    "layers", "hidden_size", "heads", "kv_heads", "head_dim", "ffn_size", "vocab_size", "tied_embeddings",
    "qkv_bias", "attn_out_bias", "mlp_bias", "norms_per_layer", "experts", "experts_per_token", "moe_ffn_size",
    "shared_experts", "dense_layers", "router_bias", "sliding_window", "qk_norm", "attention_sinks",
    "chunked_attention", "expert_precision", "max_position_embeddings",
)  # fmt: skip


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_published_config_imports_to_the_preset(tmp_path: Path, preset: str) -> None:
    imported = import_hf_config(_write(tmp_path, CONFIGS[preset][1]))
    ref = get_model(preset)
    assert {f: getattr(imported, f) for f in SHAPE_FIELDS} == {f: getattr(ref, f) for f in SHAPE_FIELDS}
    assert imported.sliding_layers == ref.sliding_layers
    assert bool(imported.scope) == bool(ref.scope)  # multimodal: text part only, and both say so
    assert (imported.params_total, imported.params_active) == (ref.params_total, ref.params_active)
    assert ref.source == CONFIGS[preset][0]


def test_new_model_types_are_supported() -> None:
    new = {"qwen3", "qwen3_moe", "gemma3", "gemma3_text", "llama4", "llama4_text", "gpt_oss", "mistral3"}
    assert new <= set(SUPPORTED_MODEL_TYPES)


def test_families_and_scope() -> None:
    assert get_model("qwen3-30b-a3b").family == "qwen3_moe"
    assert get_model("gemma-3-27b").family == "gemma3"
    assert get_model("phi-4").family == "phi3"
    assert "text part" in get_model("llama-4-scout").scope
    assert get_model("gpt-oss-20b").scope == ""


def test_window_layers_follow_the_layer_pattern() -> None:
    assert get_model("gemma-3-27b").sliding_layers == 62 - 62 // 6  # every 6th layer global
    assert get_model("gpt-oss-120b").sliding_layers == 18
    assert get_model("llama-4-maverick").sliding_layers == 36  # every 4th layer is a global NoPE layer
    assert get_model("llama-4-maverick").chunked_attention
    assert get_model("qwen3-8b").sliding_layers == 0


def test_gemma3_sliding_pattern_and_layer_types(tmp_path: Path) -> None:
    cfg = json.loads(json.dumps(CONFIGS["gemma-3-12b"][1]))
    cfg["text_config"]["sliding_window_pattern"] = 2
    assert import_hf_config(_write(tmp_path, cfg)).sliding_layers == 24
    cfg["text_config"]["layer_types"] = ["sliding_attention"] * 47 + ["full_attention"]
    assert import_hf_config(_write(tmp_path, cfg)).sliding_layers == 47


def test_gemma3_text_config_alone(tmp_path: Path) -> None:
    text = {**CONFIGS["gemma-3-27b"][1]["text_config"], "_name_or_path": "google/gemma-3-27b-it"}
    m = import_hf_config(_write(tmp_path, text))
    assert m.params_total == get_model("gemma-3-27b").params_total
    assert m.scope == ""  # a text-only config has nothing left out


def test_qwen3_moe_dense_layers(tmp_path: Path) -> None:
    cfg = {**CONFIGS["qwen3-30b-a3b"][1], "mlp_only_layers": [0, 1], "decoder_sparse_step": 2}
    m = import_hf_config(_write(tmp_path, cfg))
    assert m.moe_layers == 23  # odd layers 1..47 are MoE (24), minus layer 1 listed as MLP-only
    assert m.dense_layers == 25


def test_llama4_explicit_moe_layers(tmp_path: Path) -> None:
    cfg = json.loads(json.dumps(CONFIGS["llama-4-scout"][1]))
    cfg["text_config"]["moe_layers"] = [1, 3, 5]
    m = import_hf_config(_write(tmp_path, cfg))
    assert (m.moe_layers, m.dense_layers, m.ffn_size) == (3, 45, 16384)


def test_gpt_oss_without_quantization_has_no_expert_precision(tmp_path: Path) -> None:
    cfg = {k: v for k, v in CONFIGS["gpt-oss-20b"][1].items() if k != "quantization_config"}
    m = import_hf_config(_write(tmp_path, cfg))
    assert m.expert_precision == ""
    assert m.params_total == get_model("gpt-oss-20b").params_total


def test_multimodal_without_text_config_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="text_config"):
        import_hf_config(_write(tmp_path, {"model_type": "llama4", "vision_config": {}}))


def test_unsupported_text_tower_is_an_error(tmp_path: Path) -> None:
    cfg = json.loads(json.dumps(CONFIGS["mistral-small-3.1-24b"][1]))
    cfg["text_config"]["model_type"] = "ministral3"
    with pytest.raises(DataFileError, match="ministral3"):
        import_hf_config(_write(tmp_path, cfg))


def test_moe_counts_scale_with_top_k_not_experts() -> None:
    m = get_model("gpt-oss-120b")
    expert = m.mlp_params(m.moe_ffn_size)
    assert m.params_total - m.params_active == m.layers * (m.experts - m.experts_per_token) * expert
