"""What ``gpumatch bench run`` takes from the user's files, checked in the parent before a case runs (no torch):
a model architecture as a bench shape, a local weights folder (``--weights``) and the quality check's text
(``--text``). Every problem is a one-line :class:`~gpumatch.errors.InputError` (exit 2) with a hint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError

QUALITY_VARIANTS = ("bf16", "int8", "fp8")
"""The quality check's variants, the reference first (:mod:`gpumatch.bench.weights`)."""
QUALITY_DEFAULTS = {False: {"window": 1024, "max_tokens": 4096}, True: {"window": 32, "max_tokens": 512}}
"""Window and token cap by ``tiny``; the stride defaults to half the window."""


def arch_shape(arch: Any) -> dict[str, Any]:
    """The bench shape of a :class:`gpumatch.models.ModelArch`; models the bench decoder cannot run (MoE, MLA,
    ungated MLP) are refused with the reason."""
    if arch.experts or arch.q_lora_rank or arch.kv_lora_rank or not arch.gated_mlp:
        raise InputError(f"model {arch.name} is not a dense Llama-style decoder (MoE, MLA or ungated MLP)",
                         "the bench's decoder runs dense gated-MLP models; give one with --model or --hf-config")
    return {"name": arch.name, "layers": arch.layers, "hidden": arch.hidden_size, "heads": arch.heads,
            "kv_heads": arch.kv_heads, "head_dim": arch.head_dim, "ffn": arch.ffn_size, "vocab": arch.vocab_size,
            "tied": arch.tied_embeddings}


@dataclass(frozen=True)
class Weights:
    """A checked ``--weights`` folder: the model's bench shape (RoPE and norm from its config), the folder's
    summary for the manifest, the case parameters (folder and tensor -> file map), its ``tokenizer.json`` and
    the config's position limits (``max_position_embeddings``, ``sliding_window``; 0 when absent)."""

    shape: dict[str, Any]
    summary: dict[str, Any]
    params: dict[str, Any]
    tokenizer: Path | None
    max_positions: int
    sliding_window: int


def load_weights_folder(folder: Path) -> Weights:
    """Check ``folder`` (config, architecture, every tensor's name and shape) without reading a weight."""
    from gpumatch.bench import hfweights
    from gpumatch.models.hf import import_hf_config

    folder = folder.expanduser()
    config = hfweights.read_config(folder)
    shape = arch_shape(import_hf_config(folder / "config.json", name=folder.resolve().name))
    problem = hfweights.layout_problems(config)
    if problem:
        raise InputError(f"cannot load {folder}: {problem}", "the bench decoder loads dense Llama-layout weights")
    shape.update(hfweights.shape_extras(config))
    found = hfweights.inspect_folder(folder, shape)
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    return Weights(shape, found.summary(), {"weights": str(found.path), "files": found.files}, found.tokenizer,
                   int(config.get("max_position_embeddings") or 0), int(window or 0))


def quality_params(w: Weights, text: Path, tiny: bool, window: int | None, stride: int | None,
                   max_tokens: int | None) -> dict[str, Any]:
    """The quality case's parameters: the text's token ids (the folder's tokenizer.json), window, stride and
    variants. Refuses a folder without a tokenizer and windows the model cannot attend over."""
    from gpumatch.bench.textdata import load_tokens

    d = QUALITY_DEFAULTS[tiny]
    win = window if window is not None else d["window"]
    step = stride if stride is not None else max(1, win // 2)
    cap = max_tokens if max_tokens is not None else d["max_tokens"]
    if win < 2 or not 1 <= step <= win or cap < 2:
        raise InputError(f"--window {win}, --stride {step}, --max-tokens {cap} do not make windows",
                         "need window >= 2, 1 <= stride <= window and max-tokens >= 2")
    for limit, what in ((w.max_positions, "max_position_embeddings"), (w.sliding_window, "sliding_window")):
        if limit and win > limit:
            raise InputError(f"--window {win} is longer than the model's {what} ({limit})", f"use --window {limit}")
    if w.tokenizer is None:
        raise InputError(f"{w.summary['path']} has no tokenizer.json", "--text is tokenized with the folder's "
                         "tokenizer.json (the fast-tokenizer file of the model's repository); copy it there")
    tokens = load_tokens(w.tokenizer, text.expanduser(), cap)
    bad = [t for t in tokens if not 0 <= t < int(w.shape["vocab"])]
    if bad:
        raise InputError(f"tokenizer.json gives token id {bad[0]}, outside the model's vocabulary "
                         f"({w.shape['vocab']})", "the tokenizer and the weights are of different models")
    return {"tokens": tokens, "window": win, "stride": step, "variants": list(QUALITY_VARIANTS),
            "text": str(text)}
