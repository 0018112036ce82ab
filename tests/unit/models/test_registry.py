"""Preset lookup by name/alias, the user overlay directory, and resolve_model (name or path)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpumatch.errors import AmbiguousNameError, DataFileError, UnknownNameError
from gpumatch.models import get_model, load_models, resolve_model
from gpumatch.settings import load_settings

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf_configs"
REQUIRED = [
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b",
    "llama-3.1-405b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
    "gemma-2-9b", "gemma-2-27b", "phi-3-mini", "deepseek-v3",
]  # fmt: skip


def test_all_required_presets_exist_and_cite_a_config() -> None:
    models = {m.name: m for m in load_models().models}
    for name in REQUIRED:
        assert name in models
        assert models[name].source.startswith("https://huggingface.co/") and models[name].source.endswith("config.json")


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("Llama-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("LLAMA 3.1 70B", "llama-3.1-70b"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
        ("phi-3-mini-4k-instruct", "phi-3-mini"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        ("gemma 2 27b", "gemma-2-27b"),
    ],
)
def test_lookup_by_alias(query: str, name: str) -> None:
    assert get_model(query).name == name


def test_unknown_and_ambiguous_names() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_model("llama-3.1-9b")
    assert "did you mean" in info.value.hint
    with pytest.raises(AmbiguousNameError, match=r"qwen2\.5-14b"):
        get_model("qwen2.5")


def test_overlay_adds_and_replaces_presets(tmp_path: Path) -> None:
    overlay = load_settings().model_overlay_dir
    overlay.mkdir(parents=True)
    base = (Path(__file__).resolve().parents[3] / "src/gpumatch/models/data/llama-3.1-8b.toml").read_text()
    (overlay / "my-llama.toml").write_text(
        base.replace('name = "llama-3.1-8b"', 'name = "my-llama"').replace("aliases = [", 'aliases = ["house-model", ')
    )
    (overlay / "llama-2-7b.toml").write_text(
        (Path(__file__).resolve().parents[3] / "src/gpumatch/models/data/llama-2-7b.toml")
        .read_text()
        .replace("layers = 32", "layers = 2")
    )
    shutil.copy(CONFIGS / "qwen2.5-7b" / "config.json", overlay / "house-qwen.json")
    assert get_model("house-model").name == "my-llama"
    assert get_model("llama-2-7b").layers == 2
    assert get_model("house-qwen").params_total == get_model("qwen2.5-7b").params_total


def test_bad_overlay_file_names_file_and_field() -> None:
    overlay = load_settings().model_overlay_dir
    overlay.mkdir(parents=True)
    bad = overlay / "bad.toml"
    bad.write_text('name = "bad"\nfamily = "llama"\nsource = "https://x.org/c.json"\n[arch]\nlayer = 3\n')
    with pytest.raises(DataFileError) as info:
        load_models()
    assert (
        str(bad) in str(info.value) and "arch.layer" in str(info.value) and "did you mean 'layers'" in str(info.value)
    )


def test_resolve_model_name_or_path(tmp_path: Path) -> None:
    assert resolve_model("llama-3.1-8b").name == "llama-3.1-8b"
    assert resolve_model(str(CONFIGS / "mixtral-8x7b" / "config.json")).experts == 8
    assert resolve_model("mixtral-8x7b", base_dir=CONFIGS).experts == 8  # a folder holding config.json
    assert resolve_model("gemma-2-9b/config.json", base_dir=CONFIGS).norms_per_layer == 4
    with pytest.raises(DataFileError, match="does not exist"):
        resolve_model("missing/config.json", base_dir=tmp_path)
    with pytest.raises(UnknownNameError, match=r"config\.json"):
        resolve_model("not-a-model")


def test_overlay_dangling_link_and_directory_named_toml() -> None:
    overlay = load_settings().model_overlay_dir
    overlay.mkdir(parents=True)
    (overlay / "gone.toml").symlink_to(overlay / "missing-target.toml")
    with pytest.raises(DataFileError, match=r"gone\.toml"):
        load_models()
    (overlay / "gone.toml").unlink()
    (overlay / "dir.toml").mkdir()
    with pytest.raises(DataFileError, match="directory"):
        load_models()
