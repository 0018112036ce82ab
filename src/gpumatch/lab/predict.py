"""The estimator's prediction of a measured result, and the datasheet figure of a microbenchmark.

Predictions go through :mod:`gpumatch.calibrate` (the one mapping of a bench row to estimator options:
:func:`~gpumatch.calibrate.cases.arch_of`, :func:`~gpumatch.calibrate.cases.train_setup`,
:func:`~gpumatch.calibrate.compare.predict`):

- ``decode_step_s`` -> ``tpot_s`` with ``prompt = context - 1, gen = 1``; the row's decoder ``variant``, when
  recorded, sets ``fused_kernels`` (:data:`FUSED_VARIANTS`: the compiled decoders) and ``cuda_graphs``;
- ``prefill_s`` -> ``prefill_s`` with ``prompt = seq``;
- ``train_step_s`` -> ``step_s``; ``train_peak_memory_bytes`` -> the estimate's bytes held by PyTorch.

``gemm_flops_per_s`` and ``copy_bytes_per_s`` have no estimator model; they get the card's datasheet figure
(dense peak of that precision, HBM bandwidth) as ``datasheet`` instead. A card the catalog does not know, a case the
estimator refuses, or a machine without the catalog's dependencies (pydantic) has no prediction (None).
"""

from __future__ import annotations

from typing import Any

from gpumatch.errors import GpumatchError

FUSED_VARIANTS = ("compiled", "compiled-graph", "fused", "fused-graph", "whole", "whole-graph")
"""Decoder variants (:data:`gpumatch.bench.decode.VARIANTS`) whose layers go through ``torch.compile`` (elementwise
work fused into the projections) and whose decode attention takes the bench's ``auto`` rule (split-KV while batch ×
KV heads < 64, :mod:`gpumatch.bench.llama`): predicted with ``fused_kernels``. A variant ending in ``graph``
replays CUDA graphs (``cuda_graphs``). The plain ``graph`` / ``eager`` decoder keeps the estimator's plain model.
Evidence (H100, 2026-12-07, tests/data/measurements/2026-12-07-decode-blind-predictions.json): ``compiled-graph``
and ``fused-graph`` took the same time within 0.5 % at five shapes; before ``compiled*`` joined this set, its
blind predictions were +4 % to +85 % (the plain model starves batch-2 attention); ``fused-graph``'s were -9 % to
+2 %. At batch 8-12 ``auto`` takes SDPA on 64-96 blocks, whose partial starvation is not modelled."""
PREDICTED_METRICS = {"decode_step_s": "tpot_s", "prefill_s": "prefill_s", "train_step_s": "step_s",
                     "train_peak_memory_bytes": "reserved_bytes"}


def catalog_gpu(gpu_name: str | None) -> str | None:
    """:func:`gpumatch.catalog.catalog_name` of ``gpu_name``, and None on a machine without pydantic (the
    catalog's loader), where a bench run still records, only without predictions."""
    try:
        from gpumatch.catalog import catalog_name
    except ImportError:
        return None
    return catalog_name(gpu_name)


def _options(metric: str, config: dict[str, Any]) -> dict[str, Any] | None:
    from gpumatch.calibrate.cases import train_setup

    if metric == "decode_step_s":
        out = {"task": "infer", "concurrency": config["batch"], "prompt": config["context"] - 1, "gen": 1}
        variant = config.get("variant")
        if variant:
            out.update(fused_kernels=variant in FUSED_VARIANTS, cuda_graphs=str(variant).endswith("graph"))
        return out
    if metric == "prefill_s":
        return {"task": "infer", "concurrency": config["batch"], "prompt": config["seq"], "gen": 1}
    if metric in ("train_step_s", "train_peak_memory_bytes"):
        return train_setup(config)[1]
    return None


def predict(metric: str, config: dict[str, Any], shape: dict[str, Any] | None, gpu: str | None) -> float | None:
    """gpumatch's estimate of ``metric`` for the case ``config`` of model ``shape`` on catalog card ``gpu``."""
    if gpu is None or shape is None or metric not in PREDICTED_METRICS:
        return None
    from gpumatch.calibrate.cases import MeasuredCase
    from gpumatch.calibrate.compare import predict as estimate_case
    options = _options(metric, config)
    if options is None:
        return None
    case = MeasuredCase(case_id="", kind="", shape=shape, options=options, metric=PREDICTED_METRICS[metric],
                        measured=0.0, source="", fit=False)
    try:
        value = estimate_case(case, gpu=gpu)
    except (GpumatchError, KeyError, ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


def datasheet(metric: str, config: dict[str, Any], gpu: str | None) -> float | None:
    """The datasheet figure a microbenchmark is read against (module docstring), or None."""
    if gpu is None:
        return None
    try:
        from gpumatch.catalog import get_gpu

        spec = get_gpu(gpu)
    except (GpumatchError, ImportError):
        return None
    if metric == "gemm_flops_per_s":
        peak = spec.peak_flops_per_s.get(str(config.get("precision")))
        return float(peak) if peak else None
    if metric in ("copy_bytes_per_s", "read_bytes_per_s"):
        return float(spec.memory_bandwidth_bytes_per_s)
    return None


def annotate(metric: str, value: float, config: dict[str, Any], shape: dict[str, Any] | None,
             gpu: str | None) -> dict[str, Any]:
    """What goes beside a measured ``value``: ``predicted`` and ``ratio`` = measured / predicted, else the
    ``datasheet`` figure and measured / datasheet, else nothing."""
    p = predict(metric, config, shape, gpu)
    if p is not None:
        return {"predicted": p, "ratio": value / p, "predicted_by": f"gpumatch estimate on {gpu}"}
    d = datasheet(metric, config, gpu)
    if d is not None:
        return {"datasheet": d, "ratio": value / d, "predicted_by": f"datasheet of {gpu}"}
    return {}
