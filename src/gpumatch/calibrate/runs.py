"""Measured cases from the bench runs of a results store, each with its operator class and its shape.

A stored bench run (``gpumatch bench run``, or ``gpumatch bench import`` of an export) holds one result per
measured configuration (docs/bench.md). This module turns the results of a set of runs into
:class:`~gpumatch.calibrate.cases.MeasuredCase` values grouped by operator class:

===============  ==============================  =================================================
class            bench metric                    compared with
===============  ==============================  =================================================
``gemm``         ``gemm_flops_per_s``            peak of that precision × the class's own GEMM curve
``copy``         ``copy_bytes_per_s``            HBM bandwidth × the class's own copy curve
``decode``       ``decode_step_s``               estimate ``tpot_s`` (compiled-graph variant only)
``prefill``      ``prefill_s``                   estimate ``prefill_s``
``train-step``   ``train_step_s``                estimate ``step_s``
``train-memory`` ``train_peak_memory_bytes``     estimate's bytes held by PyTorch's allocator
===============  ==============================  =================================================

Decode rows of the eager ``graph`` variant are left out: the estimator's ``infer`` decode is calibrated against
the compiled-graph variant (:mod:`gpumatch.calibrate.cases`). The ``attention`` class is derived from decode and
prefill rows at several contexts (:mod:`gpumatch.calibrate.attention`). Serving passes come from ``bench serve``
runs, not from these results; :data:`NOT_MEASURED` names what no bench run measures so the report says so.

**Fit set and held-out set, by shape.** Within each class the distinct shapes (the configuration without the
case name and variant) are sorted by size; shapes at even positions (the smallest, the third, ...) are the fit
set, the others are held out. Every measurement of a shape, in every run, falls on the same side, so held-out
errors are on shapes the fit never saw (interpolation between fitted sizes, and the largest size when the count
of shapes is even).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from gpumatch.calibrate.cases import DECODE_VARIANT, MeasuredCase, train_setup
from gpumatch.estimate.precision import BYTES_PER_ELEMENT

CLASSES = ("gemm", "copy", "decode", "prefill", "attention", "train-step", "train-memory")
NOT_MEASURED = ("serving pass",)
"""Operator classes the issue names that no bench metric measures alone yet."""
_METRIC_CLASS = {"gemm_flops_per_s": "gemm", "copy_bytes_per_s": "copy", "decode_step_s": "decode",
                 "prefill_s": "prefill", "train_step_s": "train-step", "train_peak_memory_bytes": "train-memory"}
_ESTIMATE_METRIC = {"decode": "tpot_s", "prefill": "prefill_s", "train-step": "step_s",
                    "train-memory": "reserved_bytes", "gemm": "flops_per_s", "copy": "bytes_per_s"}


@dataclass(frozen=True)
class StoredRun:
    """What calibration needs of a stored bench run: id, card, date and its result rows."""

    run_id: int
    gpu_name: str
    """``gpu.name`` of the manifest, as nvidia-smi says it (``NVIDIA H200``)."""
    gpu_uuid: str
    started_at: str
    """The original start (an imported run's ``config.imported.started_at``), ISO 8601 UTC."""
    manifest: dict[str, Any]
    results: tuple[dict[str, Any], ...]
    """Rows with ``metric``, ``value``, ``config`` and ``extra``."""


def _options(cls: str, config: dict[str, Any]) -> dict[str, Any]:
    if cls == "decode":
        return {"task": "infer", "concurrency": config["batch"], "prompt": config["context"] - 1, "gen": 1}
    if cls == "prefill":
        return {"task": "infer", "concurrency": config["batch"], "prompt": config["seq"], "gen": 1}
    if cls in ("train-step", "train-memory"):
        return train_setup(config)[1]
    return {}


def shape_key(cls: str, config: dict[str, Any]) -> str:
    """The shape of a result: its configuration without the case name, kind and variant."""
    parts = [f"{k}={v}" for k, v in sorted(config.items()) if k not in ("case", "kind", "variant")]
    return f"{cls} " + " ".join(parts)


def size_of(cls: str, config: dict[str, Any]) -> float:
    """The size a class's shapes are ordered by: FLOP per GEMM call, bytes per copy, tokens per pass."""
    if cls == "gemm":
        return 2.0 * float(config["m"]) * float(config["n"]) * float(config["k"])
    if cls == "copy":
        return float(config["size_bytes"])
    if cls == "decode":
        return float(config["batch"]) * float(config["context"])
    return float(config.get("batch", 1)) * float(config.get("seq", 1))


GEMM_PRECISIONS = frozenset({"fp32", "tf32", "bf16", "fp16", "fp8", "int8"})
"""Precisions the bench's GEMM reads in their own format; any other is read as 2 bytes (16 bit)."""


def gemm_bytes(config: dict[str, Any]) -> float:
    """Bytes a GEMM must move at least: read A (m×k) and B (k×n), write C (m×n); input bytes per element from
    :data:`gpumatch.estimate.precision.BYTES_PER_ELEMENT`, an 8-bit GEMM writes bf16 (docs/bench.md)."""
    m, n, k = (float(config[x]) for x in ("m", "n", "k"))
    precision = str(config["precision"])
    inp = BYTES_PER_ELEMENT[precision] if precision in GEMM_PRECISIONS else 2.0
    out = 2 if inp == 1 else inp
    return inp * (m * k + k * n) + out * m * n


def case_of(run: StoredRun, row: dict[str, Any]) -> MeasuredCase | None:
    """The measured case of one result row, or None when the row is no calibration metric."""
    cls = _METRIC_CLASS.get(row["metric"])
    config = dict(row.get("config") or {})
    if cls is None or (cls == "decode" and config.get("variant") != DECODE_VARIANT):
        return None
    arch = run.manifest.get("model.train_architecture" if cls.startswith("train") else "model.architecture")
    if cls not in ("gemm", "copy") and not isinstance(arch, dict):
        return None
    options = _options(cls, config)
    if cls == "gemm":
        options = {"precision": config["precision"], "flops": size_of(cls, config), "bytes": gemm_bytes(config)}
    elif cls == "copy":
        options = {"bytes": size_of(cls, config)}
    return MeasuredCase(case_id=f"run {run.run_id} {shape_key(cls, config)}", kind=cls, shape=arch or {},
                        options=options, metric=_ESTIMATE_METRIC[cls], measured=float(row["value"]),
                        source=f"run {run.run_id}", fit=False,
                        extra={"shape": shape_key(cls, config), "size": size_of(cls, config), "run_id": run.run_id})


def split_by_shape(cases: list[MeasuredCase]) -> list[MeasuredCase]:
    """The cases with ``fit`` set by the rule of the module docstring (even positions by size: fit)."""
    shapes: dict[str, dict[str, float]] = defaultdict(dict)
    for c in cases:
        shapes[c.kind][c.extra["shape"]] = c.extra["size"]
    fit_shapes = set()
    for cls, sizes in shapes.items():
        if cls in ("gemm", "attention"):  # per precision; per sub-kind (decode or prefill pairs)
            by_prec: dict[str, list[str]] = defaultdict(list)
            for s in sorted(sizes, key=lambda s: (sizes[s], s)):
                by_prec[s.split("precision=")[1].split()[0] if cls == "gemm" else s.split()[1]].append(s)
            ordered_groups = list(by_prec.values())
        else:
            ordered_groups = [sorted(sizes, key=lambda s: (sizes[s], s))]
        for ordered in ordered_groups:
            fit_shapes |= {s for i, s in enumerate(ordered) if i % 2 == 0}
    return [replace(c, fit=c.extra["shape"] in fit_shapes) for c in cases]


def cases_of_runs(runs: list[StoredRun]) -> list[MeasuredCase]:
    """Every calibration case of ``runs`` (module docstring), fit / held-out set by shape."""
    found = [c for run in runs for row in run.results if (c := case_of(run, row)) is not None]
    return split_by_shape(found)
