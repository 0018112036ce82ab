"""A local Hugging Face weights folder checked against the bench decoder, without torch and without reading a
weight: ``config.json``, ``*.safetensors`` (one file, or shards listed by ``model.safetensors.index.json``),
``tokenizer.json``. Nothing is downloaded, ever.

The bench decoder (:mod:`gpumatch.bench.llama`) has Hugging Face ``LlamaForCausalLM``'s tensor layout, which
``MistralForCausalLM`` shares (https://github.com/huggingface/transformers, ``modeling_llama.py``):

- ``model.embed_tokens.weight`` (vocab, hidden); ``model.norm.weight`` (hidden); ``lm_head.weight`` (vocab,
  hidden) unless ``tie_word_embeddings``;
- per layer i, ``model.layers.{i}.``: ``self_attn.q_proj.weight`` (heads·head_dim, hidden), ``k_proj`` and
  ``v_proj`` (kv_heads·head_dim, hidden), ``o_proj`` (hidden, heads·head_dim), ``mlp.gate_proj`` and ``up_proj``
  (ffn, hidden), ``down_proj`` (hidden, ffn), ``input_layernorm.weight`` and ``post_attention_layernorm.weight``
  (hidden).

:func:`inspect_folder` reads only the safetensors headers (through the ``safetensors`` library) and refuses, with
one line naming the tensor, a missing tensor, a tensor of another shape than the config implies, and a tensor the
decoder has no place for (a bias: Qwen2's attention has them). The folder's fingerprint is SHA-256 over the sorted
(name, dtype, shape) triples: two folders with the same tensor table have the same fingerprint, whatever their
values (a hash of the values would read every byte of a 16 GB model).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError, MissingDependencyError

INDEX_FILE = "model.safetensors.index.json"
HF_LAYOUT_TYPES = ("llama", "mistral")
"""``model_type`` values whose checkpoints have the tensor layout above."""
ROPE_TYPES = ("default", "linear", "llama3")
"""``rope_scaling`` types the decoder implements (:func:`gpumatch.bench.llama.rope_inv_freq`)."""
_IGNORED = re.compile(r"\.rotary_emb\.inv_freq$")
"""Tensors some older checkpoints carry that the decoder recomputes (RoPE's frequencies)."""
LINEAR_SUFFIXES = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight",
                   "up_proj.weight", "down_proj.weight")
"""The Linear weights of the blocks: what a weight-only quantization quantizes (embedding and LM head kept)."""


@dataclass(frozen=True)
class WeightsFolder:
    """A checked folder: its path, the tensor -> file map, the files' dtypes, the fingerprint, and
    ``tokenizer.json`` when the folder has one."""

    path: Path
    files: dict[str, str]
    dtypes: tuple[str, ...]
    fingerprint: str
    tokenizer: Path | None

    def summary(self) -> dict[str, Any]:
        """What the manifest records of the folder (``model.weights.*``)."""
        return {"path": str(self.path), "files": sorted(set(self.files.values())), "tensors": len(self.files),
                "dtypes": list(self.dtypes), "fingerprint_sha256": self.fingerprint,
                "tokenizer": self.tokenizer is not None}


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's ``config.json`` as a dict; a missing folder or file, or bad JSON, is an InputError."""
    if not folder.is_dir():
        raise InputError(f"weights folder {str(folder)!r} does not exist",
                         "give a local folder holding config.json and *.safetensors (nothing is downloaded)")
    cfg = folder / "config.json"
    if not cfg.is_file():
        raise InputError(f"{folder} has no config.json", "a Hugging Face model folder has config.json beside its "
                         "*.safetensors; copy it from the model's repository")
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"{cfg} is not readable JSON: {e}", "check the file") from e
    if not isinstance(data, dict):
        raise InputError(f"{cfg} is not a JSON object", "check the file")
    return data


def layout_problems(config: dict[str, Any]) -> str | None:
    """Why the decoder cannot load this config's weights (model type, biases, RoPE scaling), or None."""
    mt = config.get("model_type")
    if mt not in HF_LAYOUT_TYPES:
        return (f"model_type {mt!r} does not have the Llama tensor layout the bench decoder loads "
                f"({', '.join(HF_LAYOUT_TYPES)})")
    biased = [k for k in ("attention_bias", "mlp_bias") if config.get(k)]
    if biased:
        return f"the config sets {', '.join(biased)}; the bench decoder has no biases"
    sc = config.get("rope_scaling") or {}
    kind = sc.get("rope_type", sc.get("type", "default")) if isinstance(sc, dict) else sc
    if kind not in ROPE_TYPES:
        return f"rope_scaling type {kind!r} is not implemented (the decoder has {', '.join(ROPE_TYPES)})"
    return None


def shape_extras(config: dict[str, Any]) -> dict[str, Any]:
    """What the bench shape takes from the config beyond the dimensions: RoPE theta and scaling, the RMSNorm
    epsilon (Hugging Face's defaults when absent: 10000 and 1e-6, ``LlamaConfig``)."""
    out: dict[str, Any] = {"rope_theta": float(config.get("rope_theta", 10000.0)),
                           "norm_eps": float(config.get("rms_norm_eps", 1e-6))}
    sc = config.get("rope_scaling")
    if isinstance(sc, dict) and sc.get("rope_type", sc.get("type", "default")) != "default":
        out["rope_scaling"] = dict(sc)
    return out


def expected_tensors(shape: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor name -> the shape the bench shape implies (module docstring)."""
    h, f, d = int(shape["hidden"]), int(shape["ffn"]), int(shape["head_dim"])
    q, kv, v = int(shape["heads"]) * d, int(shape["kv_heads"]) * d, int(shape["vocab"])
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not shape.get("tied"):
        out["lm_head.weight"] = (v, h)
    per = {"self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h), "self_attn.v_proj.weight": (kv, h),
           "self_attn.o_proj.weight": (h, q), "mlp.gate_proj.weight": (f, h), "mlp.up_proj.weight": (f, h),
           "mlp.down_proj.weight": (h, f), "input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,)}
    for i in range(int(shape["layers"])):
        out.update({f"model.layers.{i}.{k}": s for k, s in per.items()})
    return out


def _shard_files(folder: Path) -> list[Path]:
    """The safetensors files: those the index names (each must exist), else every ``*.safetensors``."""
    index = folder / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(f"{index} has no readable weight_map: {e}", "check the file") from e
        files = sorted({str(v) for v in weight_map.values()})
        gone = [f for f in files if not (folder / f).is_file()]
        if gone:
            raise InputError(f"{INDEX_FILE} names {gone[0]}, which is not in {folder}",
                             "copy every shard the index lists into the folder")
        return [folder / f for f in files]
    found = sorted(folder.glob("*.safetensors"))
    if not found:
        raise InputError(f"{folder} has no *.safetensors file",
                         "the bench reads safetensors only (pickled *.bin weights are not loaded); convert them")
    return found


def read_headers(folder: Path) -> dict[str, tuple[str, str, tuple[int, ...]]]:
    """Tensor name -> (file name, dtype, shape) from the safetensors headers (no tensor data is read)."""
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError as e:
        raise MissingDependencyError("--weights needs the safetensors library", "pip install 'gpumatch[bench]'") from e
    out: dict[str, tuple[str, str, tuple[int, ...]]] = {}
    for path in _shard_files(folder):
        try:
            with safe_open(str(path), framework="numpy") as f:
                for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    sl = f.get_slice(name)
                    out[name] = (path.name, str(sl.get_dtype()), tuple(int(x) for x in sl.get_shape()))
        except (SafetensorError, OSError) as e:
            raise InputError(f"{path} is not a readable safetensors file: {e}", "check or re-copy the file") from e
    return out


def check_tensors(expected: dict[str, tuple[int, ...]], found: dict[str, tuple[str, str, tuple[int, ...]]],
                  tied: bool) -> None:
    """Refuse a missing tensor, a shape mismatch and a tensor with no place in the decoder (one line each)."""
    for name, want in expected.items():
        if name not in found:
            raise InputError(f"tensor {name} is missing from the weights folder",
                             "the folder's safetensors files must hold every tensor of the model config.json names")
        file, _, got = found[name]
        if got != want:
            raise InputError(f"tensor {name} has shape {list(got)} in {file}; config.json implies {list(want)}",
                             "the weights and config.json are of different models")
    spare = [n for n in found if n not in expected and not _IGNORED.search(n) and not (tied and n == "lm_head.weight")]
    if spare:
        raise InputError(f"tensor {spare[0]} (and {len(spare) - 1} more) has no place in the bench decoder",
                         "it loads Llama-layout weights without biases or extra modules")


def fingerprint(found: dict[str, tuple[str, str, tuple[int, ...]]]) -> str:
    """SHA-256 of the sorted (name, dtype, shape) table (module docstring)."""
    table = sorted((n, d, list(s)) for n, (_, d, s) in found.items())
    return hashlib.sha256(json.dumps(table, separators=(",", ":")).encode("utf-8")).hexdigest()


def inspect_folder(folder: Path, shape: dict[str, Any]) -> WeightsFolder:
    """Check the folder's tensors against ``shape`` (a bench shape built from its config.json)."""
    found = read_headers(folder)
    check_tensors(expected_tensors(shape), found, bool(shape.get("tied")))
    tok = folder / "tokenizer.json"
    return WeightsFolder(folder.resolve(), {n: f for n, (f, _, _) in found.items()},
                         tuple(sorted({d for _, d, _ in found.values()})), fingerprint(found),
                         tok if tok.is_file() else None)
