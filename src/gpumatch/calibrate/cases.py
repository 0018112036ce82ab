"""The measured cases: the committed H200 runs read back as configurations, measured values and fit / held-out sets.

No torch and no estimator here: this module reads the JSON files that ``benchmarks/gpu/run_suite.py`` wrote
(committed under ``tests/data/measurements/``); :mod:`gpumatch.calibrate.compare` predicts the same
configurations and :mod:`gpumatch.calibrate.fit` fits a :class:`~gpumatch.estimate.Calibration` to the fit set.

Metrics compared (measured value -> estimate key):

- decode: median step time of the ``compiled-graph`` variant (torch.compile + CUDA graph) at a context of
  ``context`` cached tokens -> ``tpot_s`` with ``prompt = context - 1, gen = 1`` (the step that writes
  position ``context - 1``, attending ``context`` keys). The eager-graph variant is kept alongside.
- prefill: median time of one causal pass over ``batch × seq`` tokens, last-position logits -> ``prefill_s``.
- train time: median optimizer step -> ``step_s``, with the bench's ``master=fp32`` estimated as the ``amp``
  recipe (:data:`RECIPE_OF_BENCH_MASTER`); train memory: ``torch.cuda.max_memory_reserved`` ->
  ``total_bytes - cuda_context_bytes - comm_buffer_bytes`` (what PyTorch's caching allocator holds).
- LoRA / QLoRA training (rows with ``variant`` ``lora`` or ``qlora``, :mod:`gpumatch.bench.lora`): the same
  metrics with ``task = variant`` and ``lora_rank``; ``master_weights = "none"`` names the bench's bf16 base (the
  estimator's adapter bytes do not depend on it). Their peak counters restart after the base is built.

Fit set (the cases whose measurements set the Calibration defaults) versus held-out, by rule:
decode at context 2048 of the first run; prefill at batch 1 of the first run; training of Llama-3.2-1B with
fp32 master weights and no recompute of the first run. Everything else -- other contexts, batched prefill,
the 3B model, full recompute, bf16-only training, LoRA/QLoRA, and the whole second ("heldout") run with new
shapes, contexts and batch sizes -- is held out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.files import parse_json_object, read_text
from gpumatch.models.arch import ModelArch

RECIPE_OF_BENCH_MASTER = {"fp32": "amp", "none": "none"}
"""The bench's ``master`` (:mod:`gpumatch.bench.train`) -> the estimator's ``master_weights`` recipe: its
``fp32`` is PyTorch AMP (fp32 parameters under ``torch.autocast(bfloat16)``), ``none`` a model cast to bf16.
Case names keep the bench's word (``master=fp32``)."""
GPU = "h200-sxm"
"""Catalog name of the card every ``*-h200-*.json`` file was measured on."""
DECODE_VARIANT = "compiled-graph"


@dataclass(frozen=True)
class MeasuredCase:
    """One measured configuration and the estimate key it is compared with."""

    case_id: str
    kind: str
    """decode | prefill | train-time | train-memory | train-fit"""
    shape: dict[str, Any]
    options: dict[str, Any]
    metric: str
    measured: float
    source: str
    """The measurement file's name (``2026-12-02-h200-decode.json``)."""
    fit: bool
    extra: dict[str, Any] = field(default_factory=dict)


def arch_of(shape: dict[str, Any]) -> ModelArch:
    """A :class:`ModelArch` with a measured shape's dimensions (Llama family, gated MLP, two norms).

    ``shape`` is a model dict of a measurement file's plan, in the bench's short names (``layers``, ``hidden``,
    ``heads``, ``kv_heads``, ``head_dim``, ``ffn``, ``vocab``, ``tied``; :class:`gpumatch.bench.shapes.LlamaShape`
    writes them).
    """
    return ModelArch(name=str(shape.get("name") or "bench-llama"), family="llama", layers=int(shape["layers"]),
                     hidden_size=int(shape["hidden"]), heads=int(shape["heads"]), kv_heads=int(shape["kv_heads"]),
                     head_dim=int(shape.get("head_dim") or int(shape["hidden"]) // int(shape["heads"])),
                     ffn_size=int(shape["ffn"]), vocab_size=int(shape["vocab"]),
                     tied_embeddings=bool(shape["tied"]))


def _load(path: Path) -> dict[str, Any]:
    return parse_json_object(read_text(path, f"measurements {path}", 50_000_000), f"measurements {path}")


def _shapes_by_name(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for key in ("decode_model", "decode_models", "prefill_models", "train", "adapters"):
        value = plan.get(key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            shape = item[0] if isinstance(item, list) else item
            if isinstance(shape, dict) and "name" in shape:
                found[shape["name"]] = shape
    return found


def _decode_cases(doc: dict[str, Any], source: str, first_run: bool) -> list[MeasuredCase]:
    shapes = _shapes_by_name(doc["plan"])
    by_key: dict[tuple[str, int, int], dict[str, Any]] = {}
    for r in doc["cases"]:
        if r.get("kind") == "decode" and r.get("status") == "ok":
            by_key.setdefault((r["model"], r["batch"], r["context"]), {})[r["variant"]] = r
    cases = []
    for (model, batch, ctx), variants in sorted(by_key.items()):
        if DECODE_VARIANT not in variants:
            continue
        alt = variants.get("graph", {}).get("timing", {}).get("median_s")
        cases.append(MeasuredCase(
            case_id=f"decode {model} b{batch} ctx{ctx}", kind="decode", shape=shapes[model],
            options={"task": "infer", "concurrency": batch, "prompt": ctx - 1, "gen": 1}, metric="tpot_s",
            measured=variants[DECODE_VARIANT]["timing"]["median_s"], source=source,
            fit=first_run and ctx == 2048, extra={"measured_eager_graph_s": alt}))
    return cases


def _prefill_cases(doc: dict[str, Any], source: str, first_run: bool) -> list[MeasuredCase]:
    shapes = _shapes_by_name(doc["plan"])
    default = doc["plan"].get("decode_model", {}).get("name")
    cases = []
    for r in doc["cases"]:
        if r.get("kind") != "prefill" or r.get("status") != "ok":
            continue
        model = r.get("model", default)
        cases.append(MeasuredCase(
            case_id=f"prefill {model} b{r['batch']} s{r['seq']}", kind="prefill", shape=shapes[model],
            options={"task": "infer", "concurrency": r["batch"], "prompt": r["seq"], "gen": 1}, metric="prefill_s",
            measured=r["timing"]["median_s"], source=source, fit=first_run and r["batch"] == 1))
    return cases


def train_setup(row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(case name, estimate options) of a training row or planned case: keys ``model``, ``batch``, ``seq``,
    ``recompute``, ``master`` and, for LoRA/QLoRA, ``variant`` and ``lora_rank``."""
    name = f"{row['model']} b{row['batch']} s{row['seq']} rc={row['recompute']}"
    opts = {"task": "train", "micro_batch": row["batch"], "seq": row["seq"], "recompute": row["recompute"],
            "master_weights": RECIPE_OF_BENCH_MASTER[row["master"]]}
    variant = row.get("variant", "full")
    if variant == "full":
        return f"{name} master={row['master']}", opts
    return f"{name} {variant} r={row['lora_rank']}", {**opts, "task": variant, "lora_rank": int(row["lora_rank"])}


def _train_cases(doc: dict[str, Any], source: str, first_run: bool) -> list[MeasuredCase]:
    shapes = _shapes_by_name(doc["plan"])
    cases = []
    for r in doc["cases"]:
        if r.get("kind") != "train" or r.get("status") not in ("ok", "oom"):
            continue
        name, opts = train_setup(r)
        fit = (first_run and r["model"] == "llama-3.2-1b" and r["master"] == "fp32" and r["recompute"] == "none"
               and r.get("variant", "full") == "full")
        if r["status"] == "oom":
            cases.append(MeasuredCase(case_id=f"train {name}", kind="train-fit", shape=shapes[r["model"]],
                                      options=opts, metric="fits", measured=0.0, source=source, fit=False,
                                      extra={"error": r.get("error", "")}))
            continue
        cases.append(MeasuredCase(case_id=f"train {name}", kind="train-time", shape=shapes[r["model"]],
                                  options=opts, metric="step_s", measured=r["timing"]["median_s"],
                                  source=source, fit=fit))
        cases.append(MeasuredCase(case_id=f"memory {name}", kind="train-memory", shape=shapes[r["model"]],
                                  options=opts, metric="reserved_bytes", measured=float(r["max_memory_reserved_bytes"]),
                                  source=source, fit=fit,
                                  extra={"max_memory_allocated_bytes": r["max_memory_allocated_bytes"]}))
    return cases


def load_cases(directory: Path) -> list[MeasuredCase]:
    """All measured cases from ``*-h200-{decode,prefill,train}.json`` and ``*-h200-heldout-*.json`` files."""
    cases: list[MeasuredCase] = []
    readers: dict[str, Callable[[dict[str, Any], str, bool], list[MeasuredCase]]] = {
        "decode": _decode_cases, "prefill": _prefill_cases, "train": _train_cases}
    for path in sorted(directory.glob("*-h200-*.json")):
        group = path.stem.rsplit("-", 1)[-1]
        if group in readers:
            cases += readers[group](_load(path), path.name, "heldout" not in path.stem)
    return cases
