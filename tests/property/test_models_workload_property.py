"""Properties of model accounting and of the file readers (hostile input gives only DataFileError)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumatch.errors import DataFileError, GpumatchError
from gpumatch.models import ModelArch, get_model, import_hf_config
from gpumatch.workload import load_workload

HF = Path(__file__).resolve().parents[1] / "data" / "hf_configs"
BASE: dict[str, Any] = json.loads((HF / "llama-3.1-8b" / "config.json").read_text())
KEYS = ["model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
        "intermediate_size", "vocab_size", "tie_word_embeddings", "sliding_window", "num_local_experts",
        "num_experts_per_tok", "n_routed_experts", "kv_lora_rank", "q_lora_rank", "first_k_dense_replace"]  # fmt: skip
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**20), max_value=10**20), st.floats(allow_nan=False),
    st.text(max_size=8), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(["llama", "mistral", "mixtral", "qwen2", "gemma2", "phi3", "deepseek_v2", "deepseek_v3", "bert"]),
)  # fmt: skip


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    changes=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5), drop=st.sets(st.sampled_from(KEYS), max_size=3)
)
def test_mutated_configs_import_or_fail_cleanly(tmp_path: Path, changes: dict[str, Any], drop: set[str]) -> None:
    cfg = {k: v for k, v in {**BASE, **changes}.items() if k not in drop}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    try:
        m = import_hf_config(p)
    except DataFileError as e:
        assert str(p) in str(e) and "\n" not in str(e)
        return
    assert m.params_total >= m.params_active > 0
    assert m.kv_bytes_per_token(2) > 0


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_as_workload_fails_cleanly(tmp_path: Path, text: str) -> None:
    p = tmp_path / "w.toml"
    p.write_text(text)
    try:
        load_workload(p)
    except GpumatchError as e:
        assert "\n" not in e.message


@given(
    preset=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "qwen2.5-7b"]),
    extra_layers=st.integers(min_value=1, max_value=64),
)
def test_more_layers_more_parameters(preset: str, extra_layers: int) -> None:
    m = get_model(preset)
    bigger: ModelArch = replace(m, layers=m.layers + extra_layers)
    assert bigger.params_total > m.params_total
    assert bigger.params_active > m.params_active
    assert bigger.params_active <= bigger.params_total


@given(context=st.integers(min_value=1, max_value=200_000))
def test_windowed_kv_never_exceeds_full_kv(context: int) -> None:
    for preset in ("gemma-2-9b", "mistral-7b", "phi-3-mini"):
        m = get_model(preset)
        assert m.kv_bytes_for_context(context, 2) <= context * m.kv_bytes_per_token(2)
