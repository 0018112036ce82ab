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
  ``v_head_dim``; V3 routers carry ``e_score_correction_bias`` (``topk_method = "noaux_tc"``).

The core sizes (``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``intermediate_size``,
``vocab_size``) are required even though the classes have defaults: a config without them is almost
certainly not the file the user meant, and a silent 7B default would be worse than an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpumatch.errors import DataFileError
from gpumatch.files import parse_json_object, read_text
from gpumatch.models.arch import ModelArch
from gpumatch.models.files import field_names, first_error
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
)
_KV_DEFAULT: dict[str, int | None] = {
    "llama": None,
    "phi3": None,
    "mistral": 8,
    "mixtral": 8,
    "qwen2": 32,
    "gemma2": 4,
}
_DIM = Field(default=None, gt=0, le=1_000_000)


class _HfConfig(BaseModel):
    """The fields gpumatch reads from a config.json; every other key is ignored."""

    model_config = ConfigDict(extra="ignore", strict=True, populate_by_name=True)

    model_type: str = Field(max_length=100)
    name_or_path: str = Field(default="", alias="_name_or_path", max_length=1000)
    hidden_size: int = Field(gt=0, le=1_000_000)
    num_hidden_layers: int = Field(gt=0, le=10_000)
    num_attention_heads: int = Field(gt=0, le=100_000)
    intermediate_size: int = Field(gt=0, le=10_000_000)
    vocab_size: int = Field(gt=0, le=10_000_000)
    num_key_value_heads: int | None = _DIM
    head_dim: int | None = _DIM
    tie_word_embeddings: bool | None = None
    max_position_embeddings: int | None = Field(default=None, ge=0, le=100_000_000)
    sliding_window: int | None = Field(default=None, gt=0)
    use_sliding_window: bool | None = None
    attention_bias: bool | None = None
    mlp_bias: bool | None = None
    num_local_experts: int | None = Field(default=None, gt=0, le=100_000)
    num_experts_per_tok: int | None = Field(default=None, gt=0, le=100_000)
    n_routed_experts: int | None = Field(default=None, gt=0, le=100_000)
    n_shared_experts: int | None = Field(default=None, ge=0, le=1_000)
    moe_intermediate_size: int | None = Field(default=None, gt=0, le=10_000_000)
    first_k_dense_replace: int | None = Field(default=None, ge=0, le=10_000)
    moe_layer_freq: int | None = Field(default=None, gt=0, le=10_000)
    topk_method: str | None = Field(default=None, max_length=100)
    q_lora_rank: int | None = Field(default=None, ge=0, le=1_000_000)
    kv_lora_rank: int | None = Field(default=None, ge=0, le=1_000_000)
    qk_rope_head_dim: int | None = Field(default=None, ge=0, le=100_000)
    qk_nope_head_dim: int | None = Field(default=None, ge=0, le=100_000)
    v_head_dim: int | None = Field(default=None, ge=0, le=100_000)


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
    cfg = _validate(raw, label)
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
        family=_family(cfg.model_type),
        source=f"file://{p.resolve()}",
        hf_id=cfg.name_or_path if _looks_like_hub_id(cfg.name_or_path) else "",
        **arch.model_dump(),
    )


def _validate(raw: dict[str, Any], label: str) -> _HfConfig:
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
    try:
        return _HfConfig.model_validate(raw)
    except ValidationError as e:
        raise first_error(label, e, field_names(_HfConfig)) from e


def _family(model_type: str) -> Family:
    families: dict[str, Family] = {
        "llama": "llama",
        "mistral": "mistral",
        "mixtral": "mixtral",
        "qwen2": "qwen2",
        "gemma2": "gemma2",
        "phi3": "phi3",
        "deepseek_v2": "deepseek_v2",
        "deepseek_v3": "deepseek_v3",
    }
    return families[model_type]


def _map_fields(c: _HfConfig, label: str) -> dict[str, Any]:
    """Translate HF names and defaults into ArchFields names (see the module docstring)."""
    if c.model_type.startswith("deepseek"):
        return _deepseek_fields(c, label)
    default_head = 256 if c.model_type == "gemma2" else None
    head_dim = c.head_dim or default_head or _divide(c.hidden_size, c.num_attention_heads, label)
    kv = c.num_key_value_heads or _KV_DEFAULT[c.model_type] or c.num_attention_heads
    attn_bias = bool(c.attention_bias) and c.model_type in ("llama", "gemma2")
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
    return out


def _window(c: _HfConfig) -> dict[str, Any]:
    raw_has_window = "sliding_window" in c.model_fields_set
    if c.model_type == "mistral":
        return {"sliding_window": c.sliding_window if raw_has_window else 4096}
    if c.model_type == "gemma2":
        return {"sliding_window": c.sliding_window or 4096, "sliding_window_every": 2}
    if c.model_type == "qwen2":
        return {"sliding_window": c.sliding_window if c.use_sliding_window else None}
    return {"sliding_window": c.sliding_window}


def _deepseek_fields(c: _HfConfig, label: str) -> dict[str, Any]:
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


def _default_name(c: _HfConfig, p: Path) -> str:
    if _looks_like_hub_id(c.name_or_path):
        return c.name_or_path.split("/")[1].lower()
    parent = p.resolve().parent.name
    return parent.lower() if parent else "hf-config"
