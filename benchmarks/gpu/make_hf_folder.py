"""A local Hugging Face Llama folder with random weights, for running ``bench run --weights DIR --text FILE`` (the
quality check) on a machine that cannot download a model (the device has no network).

Writes ``config.json`` (``LlamaForCausalLM`` layout), ``model.safetensors`` (bf16, normal(0, 0.02) like Hugging
Face's ``initializer_range`` default, norms 1) and a WordLevel ``tokenizer.json`` trained on ``--text`` (the
``tokenizers`` library). Usage: ``python benchmarks/gpu/make_hf_folder.py OUT_DIR --text FILE [--shape 1b|tiny]``.

The quality figures of random weights say how much int8/fp8 rounding moves this model's predictions (top-1
agreement, KL against bf16), not how a trained model's perplexity changes: state that beside any number.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from gpumatch.bench.hfweights import expected_tensors

SHAPES = {
    "1b": {"name": "llama-3.2-1b-random", "layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "head_dim": 64,
           "ffn": 8192, "vocab": 128256, "tied": False},
    "tiny": {"name": "tiny-random", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16,
             "ffn": 128, "vocab": 512, "tied": False},
}
"""Llama-3.2-1B's dimensions (its config.json; untied here so every tensor is stored) and a CPU-sized one."""


def make_folder(root: Path, text: str, shape: dict[str, object]) -> Path:
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

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
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([text], trainers.WordLevelTrainer(vocab_size=min(vocab, 8192),
                                                              special_tokens=["[UNK]"]))
    tok.save(str(root / "tokenizer.json"))
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("out", type=Path)
    ap.add_argument("--text", type=Path, required=True)
    ap.add_argument("--shape", choices=SHAPES, default="1b")
    args = ap.parse_args()
    make_folder(args.out, args.text.read_text(encoding="utf-8"), SHAPES[args.shape])
    print(f"wrote {args.out} ({args.shape})")


if __name__ == "__main__":
    main()
