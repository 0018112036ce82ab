"""Llama-3-shaped architectures as plain values (no torch, no pydantic).

Published shapes (Hugging Face ``config.json`` of each model):
- Llama-3-8B / 3.1-8B: 32 layers, hidden 4096, 32 heads, 8 KV heads, head 128, FFN 14336, vocab 128256,
  untied, rope_theta 500000 (https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json).
- Llama-3.2-1B: 16 layers, hidden 2048, 32 heads, 8 KV heads, head 64, FFN 8192, vocab 128256, tied
  (https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json).
- Llama-3.2-3B: 28 layers, hidden 3072, 24 heads, 8 KV heads, head 128, FFN 8192, vocab 128256, tied
  (https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json).

Llama-style stand-ins with other models' dimensions (the bench model has no QKV bias, so the Qwen shapes
differ from Qwen2.5 by those bias vectors only; the estimates use the same shapes):
- Mistral-7B-v0.1: 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336, vocab 32000, untied
  (https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json).
- Qwen2.5-0.5B / 1.5B / 7B / 14B: 24/28/28/48 layers, hidden 896/1536/3584/5120, heads 14/12/28/40, KV heads
  2/2/4/8, FFN 4864/8960/18944/13824, vocab 151936/151936/152064/152064, tied/tied/untied/untied
  (https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json and the siblings' config.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

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
        for extra in ("rope_theta", "norm_eps", "name"):
            if extra in data:
                values[extra] = data[extra]
        return cls(
            layers=int(values["layers"]), hidden=int(values["hidden"]), heads=int(values["heads"]),
            kv_heads=int(values["kv_heads"]), head_dim=int(values["head_dim"]), ffn=int(values["ffn"]),
            vocab=int(values["vocab"]), tied=bool(values["tied"]),
            rope_theta=float(values.get("rope_theta", 500000.0)), norm_eps=float(values.get("norm_eps", 1e-5)),
            name=str(values.get("name", "")),
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


LLAMA_3_8B: dict[str, Any] = {
    "name": "llama-3-8b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
    "ffn": 14336, "vocab": 128256, "tied": False, "rope_theta": 500000.0,
}
LLAMA_3_2_1B: dict[str, Any] = {
    "name": "llama-3.2-1b", "layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "head_dim": 64,
    "ffn": 8192, "vocab": 128256, "tied": True, "rope_theta": 500000.0,
}
LLAMA_3_2_3B: dict[str, Any] = {
    "name": "llama-3.2-3b", "layers": 28, "hidden": 3072, "heads": 24, "kv_heads": 8, "head_dim": 128,
    "ffn": 8192, "vocab": 128256, "tied": True, "rope_theta": 500000.0,
}
MISTRAL_7B: dict[str, Any] = {
    "name": "mistral-7b-shape", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
    "ffn": 14336, "vocab": 32000, "tied": False, "rope_theta": 10000.0,
}
QWEN2_5_0_5B: dict[str, Any] = {
    "name": "qwen2.5-0.5b-shape", "layers": 24, "hidden": 896, "heads": 14, "kv_heads": 2, "head_dim": 64,
    "ffn": 4864, "vocab": 151936, "tied": True, "rope_theta": 1000000.0,
}
QWEN2_5_1_5B: dict[str, Any] = {
    "name": "qwen2.5-1.5b-shape", "layers": 28, "hidden": 1536, "heads": 12, "kv_heads": 2, "head_dim": 128,
    "ffn": 8960, "vocab": 151936, "tied": True, "rope_theta": 1000000.0,
}
QWEN2_5_7B: dict[str, Any] = {
    "name": "qwen2.5-7b-shape", "layers": 28, "hidden": 3584, "heads": 28, "kv_heads": 4, "head_dim": 128,
    "ffn": 18944, "vocab": 152064, "tied": False, "rope_theta": 1000000.0,
}
QWEN2_5_14B: dict[str, Any] = {
    "name": "qwen2.5-14b-shape", "layers": 48, "hidden": 5120, "heads": 40, "kv_heads": 8, "head_dim": 128,
    "ffn": 13824, "vocab": 152064, "tied": False, "rope_theta": 1000000.0,
}
PRESETS: dict[str, dict[str, Any]] = {d["name"]: d for d in (
    LLAMA_3_8B, LLAMA_3_2_1B, LLAMA_3_2_3B, MISTRAL_7B, QWEN2_5_0_5B, QWEN2_5_1_5B, QWEN2_5_7B, QWEN2_5_14B)}


def tiny_shape(layers: int = 2, vocab: int = 512) -> dict[str, Any]:
    """A small shape with Llama-3 proportions for CPU smoke tests."""
    return {
        "name": "tiny", "layers": layers, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
        "ffn": 128, "vocab": vocab, "tied": False,
    }
