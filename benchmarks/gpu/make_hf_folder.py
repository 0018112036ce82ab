"""A local Hugging Face Llama folder with random weights, for running ``bench run --weights DIR --text FILE`` (the
quality check) on a machine that cannot download a model (the device has no network).

Writes ``config.json`` (``LlamaForCausalLM`` layout), ``model.safetensors`` (bf16, normal(0, 0.02) like Hugging
Face's ``initializer_range`` default, norms 1) and a WordLevel ``tokenizer.json`` trained on ``--text`` (the
``tokenizers`` library; ``--tokenizer bpe``: a byte-level BPE one instead, whose text round-trips). Usage:
``python benchmarks/gpu/make_hf_folder.py OUT_DIR --text FILE [--shape 1b|tiny] [--tokenizer wordlevel|bpe]``.

The quality figures of random weights say how much int8/fp8 rounding moves this model's predictions (top-1
agreement, KL against bf16), not how a trained model's perplexity changes: state that beside any number.
"""

from __future__ import annotations

import argparse
import json
import string
from pathlib import Path
from typing import Any

import torch

from gpumatch.bench.hfweights import expected_tensors

SHAPES = {
    "1b": {"name": "llama-3.2-1b-random", "layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "head_dim": 64,
           "ffn": 8192, "vocab": 128256, "tied": False},
    "tiny": {"name": "tiny-random", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
             "ffn": 128, "vocab": 512, "tied": False},
}
"""Llama-3.2-1B's dimensions (its config.json; untied here so every tensor is stored) and a CPU-sized one."""


def _tokenizer(text: str, vocab: int, kind: str) -> object:
    """A tokenizer trained on ``text``: ``wordlevel`` (whitespace words, unknown words become ``[UNK]``) or
    ``bpe`` (GPT-2 style byte-level BPE trained on the ASCII of ``text``: decoding gives ASCII text back, spaces
    included, which load generators that build prompts of N tokens need, and every token a random model picks
    is whole text: no lone UTF-8 byte that a server's incremental detokenizer would hold back; characters
    outside ASCII are dropped when encoding)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        ascii_text = text.encode("ascii", "ignore").decode("ascii") + " " + string.printable  # every ASCII char
        tok.train_from_iterator([ascii_text], trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"]))
        return tok
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([text], trainers.WordLevelTrainer(vocab_size=min(vocab, 8192),
                                                              special_tokens=["[UNK]"]))
    return tok


def make_folder(root: Path, text: str, shape: dict[str, object], tokenizer: str = "wordlevel") -> Path:
    """Write config.json, model.safetensors, tokenizer.json and a tokenizer_config.json (transformers'
    ``AutoTokenizer`` reads the folder as a ``PreTrainedTokenizerFast``, as client load generators do)."""
    from safetensors.torch import save_file

    root.mkdir(parents=True, exist_ok=True)
    vocab = int(shape["vocab"])  # type: ignore[call-overload]
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": shape["hidden"],
           "num_hidden_layers": shape["layers"], "num_attention_heads": shape["heads"],
           "num_key_value_heads": shape["kv_heads"], "intermediate_size": shape["ffn"], "vocab_size": vocab,
           "tie_word_embeddings": False, "max_position_embeddings": 8192, "rope_theta": 500000.0,
           "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16"}
    (root / "config.json").write_text(json.dumps(cfg, indent=1))
    gen = torch.Generator().manual_seed(0)
    tensors = {name: (torch.ones(s) if len(s) == 1 else torch.randn(s, generator=gen) * 0.02).to(torch.bfloat16)
               for name, s in expected_tensors(dict(shape)).items()}
    save_file(tensors, str(root / "model.safetensors"))
    tok: Any = _tokenizer(text, vocab, tokenizer)
    tok.save(str(root / "tokenizer.json"))
    special = "<|endoftext|>" if tokenizer == "bpe" else "[UNK]"
    key = "eos_token" if tokenizer == "bpe" else "unk_token"
    (root / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", key: special, "model_max_length": 8192}, indent=1))
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("out", type=Path)
    ap.add_argument("--text", type=Path, required=True)
    ap.add_argument("--shape", choices=SHAPES, default="1b")
    ap.add_argument("--tokenizer", choices=("wordlevel", "bpe"), default="wordlevel")
    args = ap.parse_args()
    make_folder(args.out, args.text.read_text(encoding="utf-8"), SHAPES[args.shape], args.tokenizer)
    print(f"wrote {args.out} ({args.shape})")


if __name__ == "__main__":
    main()
