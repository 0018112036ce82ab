"""import_hf_config: published config.json files map onto the presets; hostile files give one clean error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.errors import DataFileError
from gpumatch.models import SUPPORTED_MODEL_TYPES, get_model, import_hf_config

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf_configs"

# fixture folder -> preset it must equal (same counts and shapes)
SAME_AS_PRESET = {
    "llama-3.1-8b": "llama-3.1-8b",
    "llama-3.2-1b": "llama-3.2-1b",
    "llama-2-7b": "llama-2-7b",
    "mistral-7b-v0.1": "mistral-7b",
    "mixtral-8x7b": "mixtral-8x7b",
    "qwen2.5-7b": "qwen2.5-7b",
    "gemma-2-9b": "gemma-2-9b",
    "phi-3-mini-4k": "phi-3-mini",
    "deepseek-v3": "deepseek-v3",
    "deepseek-v2-lite": "deepseek-v2-lite",
}
SHAPE_FIELDS = (
    "layers", "hidden_size", "heads", "kv_heads", "head_dim", "ffn_size", "vocab_size", "tied_embeddings",
    "qkv_bias", "norms_per_layer", "experts", "experts_per_token", "moe_ffn_size", "shared_experts",
    "dense_layers", "router_bias", "q_lora_rank", "kv_lora_rank", "sliding_window", "sliding_window_every",
)  # fmt: skip


@pytest.mark.parametrize(("folder", "preset"), sorted(SAME_AS_PRESET.items()))
def test_published_config_matches_preset(folder: str, preset: str) -> None:
    imported = import_hf_config(CONFIGS / folder / "config.json")
    ref = get_model(preset)
    assert {f: getattr(imported, f) for f in SHAPE_FIELDS} == {f: getattr(ref, f) for f in SHAPE_FIELDS}
    assert imported.params_total == ref.params_total
    assert imported.params_active == ref.params_active


def test_mistral_v03_count_is_published() -> None:
    # KerasHub mistral_presets.py "mistral_0.3_7b_en": "params": 7248023552
    m = import_hf_config(CONFIGS / "mistral-7b-v0.3" / "config.json")
    assert m.params_total == 7_248_023_552
    assert m.sliding_window is None  # "sliding_window": null


def test_name_from_hub_id_or_folder() -> None:
    assert import_hf_config(CONFIGS / "llama-3.1-8b" / "config.json").name == "llama-3.1-8b"
    assert import_hf_config(CONFIGS / "llama-3.1-8b" / "config.json").hf_id == "meta-llama/Llama-3.1-8B"
    assert import_hf_config(CONFIGS / "gemma-2-9b" / "config.json").name == "gemma-2-9b"
    assert import_hf_config(CONFIGS / "gemma-2-9b" / "config.json", name="mine").name == "mine"


def _write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(data))
    return p


def _llama(**changes: object) -> dict[str, object]:
    base: dict[str, object] = json.loads((CONFIGS / "llama-3.1-8b" / "config.json").read_text())
    base.update(changes)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()


def test_hf_defaults_when_fields_absent(tmp_path: Path) -> None:
    m = import_hf_config(_write(tmp_path, _llama(num_key_value_heads=_DROP, tie_word_embeddings=_DROP, head_dim=_DROP)))
    assert m.kv_heads == m.heads == 32  # LlamaConfig: None -> num_attention_heads
    assert m.head_dim == 4096 // 32
    assert m.tied_embeddings is False
    gemma = json.loads((CONFIGS / "gemma-2-9b" / "config.json").read_text())
    for key in ("head_dim", "sliding_window"):
        gemma.pop(key)
    g = import_hf_config(_write(tmp_path, gemma))
    assert (g.head_dim, g.tied_embeddings, g.sliding_window, g.sliding_window_every) == (256, True, 4096, 2)


def test_llama_attention_bias_adds_qkvo_biases(tmp_path: Path) -> None:
    plain = import_hf_config(_write(tmp_path, _llama()))
    biased = import_hf_config(_write(tmp_path, _llama(attention_bias=True)))
    h, d, a, kv, layers = 4096, 128, 32, 8, 32
    assert biased.params_total - plain.params_total == layers * (d * (a + 2 * kv) + h)


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"\xff\xfe\x00binary\x89PNG", "not UTF-8"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2, 3]", "top level is a JSON list"),
        (b'{"model_type": "llama", "hidden_size": NaN}', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON"),
    ],
)
def test_hostile_files_give_one_clean_error(tmp_path: Path, content: bytes, expect: str) -> None:
    p = tmp_path / "config.json"
    p.write_bytes(content)
    with pytest.raises(DataFileError, match=expect) as info:
        import_hf_config(p)
    assert str(p) in str(info.value) and "\n" not in str(info.value)


def test_huge_file_refused(tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text('{"model_type": "llama", "pad": "' + "x" * 3_000_000 + '"}')
    with pytest.raises(DataFileError, match="MB limit"):
        import_hf_config(p)


@pytest.mark.parametrize(
    ("changes", "field", "expect"),
    [
        ({"hidden_size": -4096}, "hidden_size", "greater than 0"),
        ({"hidden_size": "4096"}, "hidden_size", "valid integer"),
        ({"num_hidden_layers": True}, "num_hidden_layers", "valid integer"),
        ({"num_hidden_layers": 32.5}, "num_hidden_layers", "integer"),
        ({"vocab_size": 10**30}, "vocab_size", "less than or equal"),
        ({"intermediate_size": _DROP}, "intermediate_size", "missing"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings", "boolean"),
    ],
)
def test_wrong_types_and_sizes_name_the_field(
    tmp_path: Path, changes: dict[str, object], field: str, expect: str
) -> None:
    p = _write(tmp_path, _llama(**changes))
    with pytest.raises(DataFileError, match=expect) as info:
        import_hf_config(p)
    assert field in str(info.value) and str(p) in str(info.value)


def test_inconsistent_heads_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="multiple of kv_heads"):
        import_hf_config(_write(tmp_path, _llama(num_key_value_heads=5)))


def test_unsupported_model_type_lists_supported(tmp_path: Path) -> None:
    with pytest.raises(DataFileError) as info:
        import_hf_config(_write(tmp_path, _llama(model_type="bert")))
    assert "'bert' is not supported" in str(info.value)
    assert all(t in info.value.hint for t in SUPPORTED_MODEL_TYPES)


def test_missing_model_type_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="model_type"):
        import_hf_config(_write(tmp_path, _llama(model_type=_DROP)))
    with pytest.raises(DataFileError, match="cannot read"):
        import_hf_config(tmp_path / "nope.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataFileError, match="directory"):
        import_hf_config(empty)
    assert import_hf_config(CONFIGS / "llama-2-7b").params_total == 6_738_415_616  # a model folder
