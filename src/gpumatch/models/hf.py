"""Import a local Hugging Face ``config.json`` into a :class:`ModelArch`.

Supported ``model_type`` values and the defaults applied when a field is absent follow the
``transformers`` configuration classes (LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config,
Gemma2Config, Phi3Config) and DeepSeek's own ``configuration_deepseek.py`` (DeepseekV2Config,
DeepseekV3Config):

- ``head_dim`` = ``hidden_size // num_attention_heads`` when absent (Gemma-2: 256);
- ``num_key_value_heads`` = ``num_attention_heads`` when absent for Llama and Phi-3; 8 for Mistral and
  Mixtral; 32 for Qwen2; 4 for Gemma-2 (the class defaults);
- ``tie_word_embeddings`` defaults to false, except Gemma-2 (true);
- Qwen2 always has Q/K/V biases (and no O bias); Llama/Gemma-2 ``attention_bias`` adds Q/K/V/O biases,
  ``mlp_bias`` (Llama) MLP biases;
- sliding window: Mistral 4096 when the key is absent (``null`` = none), Gemma-2 4096 on every other
  layer, Phi-3/Mixtral only when given, Qwen2 only when ``use_sliding_window`` is true (then on all
  layers — an upper bound on the windowing, since Qwen2 windows only layers past ``max_window_layers``);
- Mixtral: ``num_local_experts`` (8) of ``intermediate_size``, top ``num_experts_per_tok`` (2);
- DeepSeek: ``n_routed_experts`` of ``moe_intermediate_size`` plus ``n_shared_experts``, MoE on layer
  ``i`` when ``i >= first_k_dense_replace`` and ``i % moe_layer_freq == 0``; MLA sizes from
  ``q_lora_rank`` (null = no query compression), ``kv_lora_rank``, ``qk_{nope,rope}_head_dim``,
  ``v_head_dim``; V3 routers carry ``e_score_correction_bias`` (``topk_method = "noaux_tc"``);
- the 2025 families ``qwen3``, ``qwen3_moe``, ``gemma3_text``, ``llama4_text`` and ``gpt_oss``: see
  :mod:`gpumatch.models.hf_families`. Multimodal ``gemma3``, ``llama4`` and ``mistral3`` configs are read
  through their ``text_config`` (Mistral-3's is a ``mistral`` model); the vision tower is not counted, and
  the architecture's ``scope`` says so.

The core sizes (``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``,
``vocab_size``) are required even though the classes have defaults: a config without them is almost
certainly not the file the user meant, and a silent 7B default would be worse than an error. The one
exception is a Gemma-3 text tower, whose published configs leave ``vocab_size`` (and some the head counts)
to the Gemma3TextConfig defaults, which are then applied (:mod:`gpumatch.models.hf_schema`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpumatch.errors import DataFileError
from gpumatch.files import parse_json_object, read_text
from gpumatch.models.arch import ModelArch
from gpumatch.models.files import field_names, first_error
from gpumatch.models.hf_families import FAMILY_TYPES, family_fields
from gpumatch.models.hf_schema import MULTIMODAL_TEXT_TYPES, HfConfig, text_part
from gpumatch.models.schema import ArchFields, Family

SUPPORTED_MODEL_TYPES: tuple[str, ...] = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "gemma2",
    "phi3",
    "deepseek_v2",
    "deepseek_v3",
    "qwen3",
    "qwen3_moe",
    "gemma3",
    "gemma3_text",
    "llama4",
    "llama4_text",
    "gpt_oss",
    "mistral3",
)
_KV_DEFAULT: dict[str, int | None] = {
    "llama": None,
    "phi3": None,
    "mistral": 8,
    "mixtral": 8,
    "qwen2": 32,
    "gemma2": 4,
}
_FAMILIES: dict[str, Family] = {
    "llama": "llama",
    "mistral": "mistral",
    "mixtral": "mixtral",
    "qwen2": "qwen2",
    "gemma2": "gemma2",
    "phi3": "phi3",
    "deepseek_v2": "deepseek_v2",
    "deepseek_v3": "deepseek_v3",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3_moe",
    "gemma3_text": "gemma3",
    "llama4_text": "llama4",
    "gpt_oss": "gpt_oss",
}
_ATTN_BIAS_TYPES = ("llama", "gemma2", "gemma3_text", "llama4_text")  # attention_bias: Q, K, V and O biases


def import_hf_config(path: str | Path, name: str | None = None) -> ModelArch:
    """Read a Hugging Face ``config.json`` and return its architecture.

    ``name`` defaults to the config's ``_name_or_path`` (when it names a Hub repo) or the folder name.
    Raises :class:`DataFileError` naming the file, the field and the fix for anything unreadable,
    malformed, out of range or of an unsupported ``model_type``.
    """
    p = Path(path).expanduser()
    if p.is_dir() and (p / "config.json").is_file():
        p = p / "config.json"  # a downloaded model folder
    label = str(p)
    raw = parse_json_object(read_text(p, label), label, "a config.json object")
    _check_type(raw, label)
    text, scope = text_part(raw)
    cfg = _validate(text, label)
    fields = _map_fields(cfg, label)
    try:
        arch = ArchFields.model_validate(fields)
    except ValidationError as e:
        err = first_error(label, e)
        raise DataFileError(
            f"{err.message} (derived from the config's fields)", "check those fields in the file"
        ) from e
    return ModelArch(
        name=name or _default_name(cfg, p),
        family=_FAMILIES[cfg.model_type],
        source=f"file://{p.resolve()}",
        scope=scope,
        hf_id=cfg.name_or_path if _looks_like_hub_id(cfg.name_or_path) else "",
        **arch.model_dump(),
    )


def _check_type(raw: dict[str, Any], label: str) -> None:
    mt = raw.get("model_type")
    if "model_type" not in raw:
        raise DataFileError(
            f"{label}: field 'model_type' is missing",
            f"a Hugging Face config.json names its model_type; supported: {', '.join(SUPPORTED_MODEL_TYPES)}",
        )
    if mt not in SUPPORTED_MODEL_TYPES:
        raise DataFileError(
            f"{label}: model_type {mt!r} is not supported",
            f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}; or write a preset TOML in $GPUMATCH_HOME/models",
        )
    if mt in MULTIMODAL_TEXT_TYPES and not isinstance(raw.get("text_config"), dict):
        raise DataFileError(f"{label}: a {mt} config needs its 'text_config' object", "check the file")


def _validate(text: dict[str, Any], label: str) -> HfConfig:
    mt = text.get("model_type")
    if mt not in _FAMILIES:
        raise DataFileError(
            f"{label}: text_config model_type {mt!r} is not supported",
            f"supported text towers: {', '.join(_FAMILIES)}",
        )
    try:
        return HfConfig.model_validate(text)
    except ValidationError as e:
        raise first_error(label, e, field_names(HfConfig)) from e


def _map_fields(c: HfConfig, label: str) -> dict[str, Any]:
    """Translate HF names and defaults into ArchFields names (see the module docstring)."""
    if c.model_type.startswith("deepseek"):
        return _deepseek_fields(c, label)
    default_head = 256 if c.model_type == "gemma2" else None
    head_dim = c.head_dim or default_head or _divide(c.hidden_size, c.num_attention_heads, label)
    kv = c.num_key_value_heads or _KV_DEFAULT[c.model_type] or c.num_attention_heads
    attn_bias = bool(c.attention_bias) and c.model_type in _ATTN_BIAS_TYPES
    out: dict[str, Any] = {
        "layers": c.num_hidden_layers,
        "hidden_size": c.hidden_size,
        "heads": c.num_attention_heads,
        "kv_heads": kv,
        "head_dim": head_dim,
        "ffn_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "tied_embeddings": c.tie_word_embeddings if c.tie_word_embeddings is not None else c.model_type == "gemma2",
        "qkv_bias": c.model_type == "qwen2" or attn_bias,
        "attn_out_bias": attn_bias,
        "mlp_bias": bool(c.mlp_bias) and c.model_type == "llama",
        "norms_per_layer": 4 if c.model_type == "gemma2" else 2,
        "max_position_embeddings": c.max_position_embeddings or 0,
    }
    out.update(_window(c))
    if c.model_type == "mixtral":
        out.update(
            experts=c.num_local_experts or 8,
            experts_per_token=c.num_experts_per_tok or 2,
            moe_ffn_size=c.intermediate_size,
        )
    if c.model_type in FAMILY_TYPES:
        out.update(family_fields(c))
    return out


def _window(c: HfConfig) -> dict[str, Any]:
    raw_has_window = "sliding_window" in c.model_fields_set
    if c.model_type == "mistral":
        return {"sliding_window": c.sliding_window if raw_has_window else 4096}
    if c.model_type == "gemma2":
        return {"sliding_window": c.sliding_window or 4096, "sliding_window_every": 2}
    if c.model_type in ("qwen2", "qwen3", "qwen3_moe"):
        return {"sliding_window": c.sliding_window if c.use_sliding_window else None}
    return {"sliding_window": c.sliding_window}


def _deepseek_fields(c: HfConfig, label: str) -> dict[str, Any]:
    if c.attention_bias:
        raise DataFileError(f"{label}: attention_bias=true is not modelled for DeepSeek MLA", "set it to false")
    v3 = c.model_type == "deepseek_v3"
    nope = c.qk_nope_head_dim if c.qk_nope_head_dim is not None else 128
    rope = c.qk_rope_head_dim if c.qk_rope_head_dim is not None else 64
    out: dict[str, Any] = {
        "layers": c.num_hidden_layers,
        "hidden_size": c.hidden_size,
        "heads": c.num_attention_heads,
        "kv_heads": c.num_attention_heads,
        "head_dim": nope + rope,
        "ffn_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "tied_embeddings": bool(c.tie_word_embeddings),
        "q_lora_rank": (c.q_lora_rank or 0) if "q_lora_rank" in c.model_fields_set else 1536,
        "kv_lora_rank": c.kv_lora_rank if c.kv_lora_rank is not None else 512,
        "qk_nope_head_dim": nope,
        "qk_rope_head_dim": rope,
        "v_head_dim": c.v_head_dim if c.v_head_dim is not None else 128,
        "max_position_embeddings": c.max_position_embeddings or 0,
    }
    routed = c.n_routed_experts if "n_routed_experts" in c.model_fields_set else (256 if v3 else None)
    if routed:
        first_k = c.first_k_dense_replace if c.first_k_dense_replace is not None else (3 if v3 else 0)
        freq = c.moe_layer_freq or 1
        moe = sum(1 for i in range(c.num_hidden_layers) if i >= first_k and i % freq == 0)
        out.update(
            experts=routed,
            experts_per_token=c.num_experts_per_tok or (8 if v3 else 0),
            moe_ffn_size=c.moe_intermediate_size or (2048 if v3 else 1407),
            shared_experts=c.n_shared_experts if c.n_shared_experts is not None else (1 if v3 else 0),
            dense_layers=c.num_hidden_layers - moe,
            router_bias=(c.topk_method or ("noaux_tc" if v3 else "greedy")) == "noaux_tc",
        )
    return out


def _divide(hidden: int, heads: int, label: str) -> int:
    if hidden % heads:
        raise DataFileError(
            f"{label}: hidden_size {hidden} is not a multiple of num_attention_heads {heads} and head_dim is absent",
            "add head_dim to the config",
        )
    return hidden // heads


def _looks_like_hub_id(s: str) -> bool:
    parts = s.split("/")
    return len(parts) == 2 and all(parts) and not s.startswith((".", "~"))


def _default_name(c: HfConfig, p: Path) -> str:
    if _looks_like_hub_id(c.name_or_path):
        return c.name_or_path.split("/")[1].lower()
    parent = p.resolve().parent.name
    return parent.lower() if parent else "hf-config"
