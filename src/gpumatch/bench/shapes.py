"""Llama-3-shaped architectures as plain values (no torch, no pydantic).

The dimensions come from gpumatch's model presets (``gpumatch/models/data/*.toml``, each with the URL of the
Hugging Face ``config.json`` it transcribes), read by :func:`gpumatch.models.builtin.builtin_arch`; the bench
adds only what the presets leave out (``rope_theta``) and its own names, which the committed measurement files
use (``tests/data/measurements``), so they stay as they are:

- ``llama-3-8b``: preset ``llama-3.1-8b`` (same shapes as Llama-3-8B; only the RoPE scaling and context differ).
- ``llama-3.2-1b``, ``llama-3.2-3b``: the presets of those names.

Llama-style stand-ins with other models' dimensions (the bench model has no QKV bias, so the Qwen shapes
differ from Qwen2.5 by those bias vectors only, and no sliding window; the estimates use the same shapes):

- ``mistral-7b-shape``: preset ``mistral-7b`` (Mistral-7B-v0.1), rope_theta 10000.
- ``qwen2.5-7b-shape``, ``qwen2.5-14b-shape``: presets ``qwen2.5-7b``, ``qwen2.5-14b``, rope_theta 1e6.
- ``qwen2.5-0.5b-shape``, ``qwen2.5-1.5b-shape`` (no preset): 24/28 layers, hidden 896/1536, heads 14/12, KV
  heads 2/2, head 64/128, FFN 4864/8960, vocab 151936, tied
  (https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json and Qwen2.5-1.5B's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from dataclasses import field as dc_field
from typing import Any

from gpumatch.models.builtin import builtin_arch

# Accepted spellings of each field: the bench's short names and ModelArch's names.
_ALIASES: dict[str, tuple[str, ...]] = {
    "layers": ("layers", "num_hidden_layers"),
    "hidden": ("hidden", "hidden_size"),
    "heads": ("heads", "num_attention_heads"),
    "kv_heads": ("kv_heads", "num_key_value_heads"),
    "head_dim": ("head_dim",),
    "ffn": ("ffn", "ffn_size", "intermediate_size"),
    "vocab": ("vocab", "vocab_size"),
    "tied": ("tied", "tied_embeddings", "tie_word_embeddings"),
}


@dataclass(frozen=True)
class LlamaShape:
    """A Llama-3-style decoder: RMSNorm, RoPE, GQA attention, SwiGLU MLP. Sizes are counts."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    name: str = ""
    rope_scaling: dict[str, Any] | None = dc_field(default=None, compare=False, hash=False)
    """A Hugging Face ``rope_scaling`` of type ``linear`` or ``llama3``
    (:func:`gpumatch.bench.llama.rope_inv_freq`); None: plain RoPE."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LlamaShape:
        """Build from a dict using the short names above or ModelArch / HF config names."""
        values: dict[str, Any] = {}
        for field, names in _ALIASES.items():
            for key in names:
                if key in data:
                    values[field] = data[key]
                    break
        if "head_dim" not in values and "hidden" in values and "heads" in values:
            values["head_dim"] = int(values["hidden"]) // int(values["heads"])
        missing = [f for f in _ALIASES if f not in values]
        if missing:
            raise ValueError(f"model shape lacks {', '.join(missing)}; give them in the dict")
        for extra in ("rope_theta", "norm_eps", "name", "rope_scaling"):
            if extra in data:
                values[extra] = data[extra]
        return cls(
            layers=int(values["layers"]), hidden=int(values["hidden"]), heads=int(values["heads"]),
            kv_heads=int(values["kv_heads"]), head_dim=int(values["head_dim"]), ffn=int(values["ffn"]),
            vocab=int(values["vocab"]), tied=bool(values["tied"]),
            rope_theta=float(values.get("rope_theta", 500000.0)), norm_eps=float(values.get("norm_eps", 1e-5)),
            name=str(values.get("name", "")), rope_scaling=dict(values["rope_scaling"]) if values.get("rope_scaling")
            else None,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def params_per_layer(self) -> int:
        """Q,K,V,O projections + gated MLP (3 matrices) + two norm vectors."""
        attn = self.hidden * self.head_dim * (self.heads + 2 * self.kv_heads) + self.heads * self.head_dim * self.hidden
        return attn + 3 * self.hidden * self.ffn + 2 * self.hidden

    @property
    def params_total(self) -> int:
        """All parameters: layers, embedding, final norm, LM head unless tied."""
        head = 0 if self.tied else self.vocab * self.hidden
        return self.layers * self.params_per_layer + self.vocab * self.hidden + self.hidden + head

    @property
    def kv_bytes_per_token_bf16(self) -> int:
        """K and V of every layer for one token in bf16 (2 bytes)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 2


def from_preset(preset: str, name: str = "", rope_theta: float = 500000.0) -> dict[str, Any]:
    """A bench shape with the dimensions of the built-in model preset ``preset`` (its canonical name), named
    ``name`` (the preset's by default). Presets the bench model cannot run (MoE, MLA, ungated MLP) are refused."""
    arch = builtin_arch(preset)
    odd = [k for k in ("experts", "q_lora_rank", "kv_lora_rank") if arch.get(k)]
    if odd or arch.get("gated_mlp", True) is not True:
        raise ValueError(f"preset {preset} is not a dense Llama-style decoder ({', '.join(odd) or 'gated_mlp'})")
    s = LlamaShape.from_dict(arch)
    return {"name": name or preset, "layers": s.layers, "hidden": s.hidden, "heads": s.heads, "kv_heads": s.kv_heads,
            "head_dim": s.head_dim, "ffn": s.ffn, "vocab": s.vocab, "tied": s.tied, "rope_theta": rope_theta}


LLAMA_3_8B = from_preset("llama-3.1-8b", "llama-3-8b")
LLAMA_3_2_1B = from_preset("llama-3.2-1b")
LLAMA_3_2_3B = from_preset("llama-3.2-3b")
MISTRAL_7B = from_preset("mistral-7b", "mistral-7b-shape", rope_theta=10000.0)
QWEN2_5_0_5B: dict[str, Any] = {
    "name": "qwen2.5-0.5b-shape", "layers": 24, "hidden": 896, "heads": 14, "kv_heads": 2, "head_dim": 64,
    "ffn": 4864, "vocab": 151936, "tied": True, "rope_theta": 1000000.0,
}
QWEN2_5_1_5B: dict[str, Any] = {
    "name": "qwen2.5-1.5b-shape", "layers": 28, "hidden": 1536, "heads": 12, "kv_heads": 2, "head_dim": 128,
    "ffn": 8960, "vocab": 151936, "tied": True, "rope_theta": 1000000.0,
}
QWEN2_5_7B = from_preset("qwen2.5-7b", "qwen2.5-7b-shape", rope_theta=1000000.0)
QWEN2_5_14B = from_preset("qwen2.5-14b", "qwen2.5-14b-shape", rope_theta=1000000.0)
PRESETS: dict[str, dict[str, Any]] = {d["name"]: d for d in (
    LLAMA_3_8B, LLAMA_3_2_1B, LLAMA_3_2_3B, MISTRAL_7B, QWEN2_5_0_5B, QWEN2_5_1_5B, QWEN2_5_7B, QWEN2_5_14B)}


def tiny_shape(layers: int = 2, vocab: int = 512) -> dict[str, Any]:
    """A small shape with Llama-3 proportions for CPU smoke tests."""
    return {
        "name": "tiny", "layers": layers, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
        "ffn": 128, "vocab": vocab, "tied": False,
    }
