"""Vectorized inputs for the planner: many candidates (GPU × layout × mitigation × micro-batch) in one Case.

Usage (one model, one task; every keyword may be a scalar or a 1-D array of the same length)::

    table = gpu_table(load_catalog().gpus)
    case = candidate_case(arch, table, "train", gpu_index=gi, tp=tp, pp=pp, dp=dp, zero=z, seqs_per_replica=b,
                          micro_batches=m, seq=4096, precision=prec, recompute=rc)
    out = evaluate("train", model_nums(arch), case, calibration)   # dict of arrays
    ok = out["fits"] & case_supported(case)

String-valued options (precision, kv_precision, recompute) are mapped once per distinct value (pass a
:class:`Choice` of names and integer codes to skip the string sort), so a call over 10^5 candidates costs a few
numpy passes; validity rules the planner must check itself (TP dividing
the heads, counts per node) are in :func:`layout_valid`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.catalog import GpuSpec
from gpumatch.estimate._num import Num
from gpumatch.estimate.case import Case
from gpumatch.estimate.options import gpu_numbers, precision_numbers, shape_numbers, weight_precision
from gpumatch.estimate.precision import (
    LOW_PRECISION_COMPUTE_KEYS,
    WEIGHT_PRECISIONS,
    activation_precision,
    compute_path,
)
from gpumatch.estimate.request import Request
from gpumatch.models.arch import ModelArch

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GpuTable:
    """Per-GPU numbers as arrays (index = position in ``specs``); ``peaks[p]`` is NaN where ``p`` is unsupported."""

    specs: tuple[GpuSpec, ...]
    fields: dict[str, FloatArray]
    peaks: dict[str, FloatArray]
    low_precision: FloatArray
    """(precision, gpu): 1 where that precision computes on an 8-bit or 4-bit tensor path."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.specs)


def gpu_table(specs: Sequence[GpuSpec]) -> GpuTable:
    """Stack the GPUs' numbers once; reuse the table across calls."""
    rows = [gpu_numbers(g) for g in specs]
    fields = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]} if rows else {}
    paths = {p: [compute_path(g, p) for g in specs] for p in WEIGHT_PRECISIONS}
    peaks: dict[str, npt.NDArray[np.float64]] = {
        p: np.array([c.peak_flops_per_s or np.nan for c in cs], dtype=float) for p, cs in paths.items()}
    low = np.array([[float(c.compute_key in LOW_PRECISION_COMPUTE_KEYS) for c in paths[p]] for p in WEIGHT_PRECISIONS])
    return GpuTable(tuple(specs), fields, peaks, low.reshape(len(WEIGHT_PRECISIONS), len(specs)))


@dataclass(frozen=True)
class Choice:
    """A categorical column without string arrays: ``names[codes[i]]`` is candidate ``i``'s value (fastest)."""

    names: tuple[str, ...]
    codes: npt.NDArray[np.intp]


def _categories(values: Any) -> tuple[list[str], Any]:
    """(distinct values, index of each candidate's value) of a scalar, a string array or a :class:`Choice`."""
    if isinstance(values, Choice):
        return list(values.names), values.codes
    arr = np.asarray(values)
    if arr.ndim == 0:
        return [str(arr)], 0
    uniq, inv = np.unique(arr, return_inverse=True)
    return [str(u) for u in uniq], inv


def _per_value(values: Any, n: int, fn: Any) -> dict[str, FloatArray]:
    """Apply ``fn(value) -> dict[str, float]`` once per distinct value; broadcast to ``n`` candidates."""
    names, idx = _categories(values)
    per = [fn(v) for v in names]
    return {k: np.broadcast_to(np.array([d[k] for d in per], dtype=float)[idx], (n,)) for k in per[0]}


def candidate_case(
    arch: ModelArch,
    table: GpuTable,
    task: str,
    *,
    gpu_index: Num,
    precision: Any = "bf16",
    kv_precision: Any = None,
    recompute: Any = "none",
    optimizer: str = "adamw",
    master_weights: str = "fp32",
    engine: str | None = None,
    **numbers: Any,
) -> Case:
    """A :class:`Case` over candidates. ``numbers``: Case fields such as tp, pp, dp, zero, seqs_per_replica,
    micro_batches, in_flight, seq, prompt, gen, lora_rank, gpus_per_node, kv_block (scalars or arrays; the split
    of a request into them is :mod:`gpumatch.estimate.request`'s); ``engine`` the serving engine of task ``serve``.
    ``precision``/``kv_precision``/``recompute`` may be
    arrays of strings. Candidates whose precision the GPU cannot compute get a NaN peak (see case_supported).
    """
    gi = np.asarray(gpu_index, dtype=np.intp)
    n = int(np.broadcast_shapes(gi.shape, *(np.shape(v) for v in numbers.values()))[0]) if gi.ndim else 1
    gi = np.broadcast_to(gi, (n,))
    # the categorical options shared by every candidate, read by the per-value helpers below; not a user's request
    # (a plan's recipe may name options a candidate's mitigation changes, e.g. AMP with a QLoRA base): unvalidated
    base = Request.model_construct(task=task, optimizer=optimizer, master_weights=master_weights,
                                   engine=engine if task == "serve" else None)
    shape = shape_numbers(base)
    shape = {k: v for k, v in shape.items() if k not in ("tp", "pp", "dp", "zero", "seq_parallel", "in_flight")}
    if not base.training and "seq" in numbers and "prompt" not in numbers:
        numbers = dict(numbers, prompt=numbers["seq"])
    fields: dict[str, Any] = {k: v[gi] for k, v in table.fields.items()}
    fields.update(shape)
    fields.update({k: np.asarray(v, dtype=float) for k, v in numbers.items()})
    tp = np.asarray(numbers.get("tp", 1.0), dtype=float)
    fields["seq_parallel"] = (tp > 1).astype(float)
    names, idx = _categories(precision)
    kv = None if kv_precision is None else _categories(kv_precision)
    per = [precision_numbers(_with(base, precision=p)) for p in names]
    fields.update({k: np.broadcast_to(np.array([d[k] for d in per])[idx], (n,)) for k in per[0]})
    if kv is not None:
        kv_bytes = np.array([precision_numbers(_with(base, kv_precision=k))["kv_bytes"] for k in kv[0]])
        fields["kv_bytes"] = np.broadcast_to(kv_bytes[kv[1]], (n,))
    rc = _per_value(recompute, n, lambda r: {"rc_full": float(r == "full"), "rc_selective": float(r == "selective")})
    fields.update(rc)
    codes = np.array([WEIGHT_PRECISIONS.index(weight_precision(_with(base, precision=p))) for p in names])
    wp = np.broadcast_to(codes[idx], (n,))
    peak_matrix = np.stack([table.peaks[p] for p in WEIGHT_PRECISIONS])  # (precision, gpu)
    fields["peak_flops_per_s"] = peak_matrix[wp, gi]
    # the attention core (options.attention_precision): the activations' path, FP8 for an engine's FP8 KV cache
    act = np.array([WEIGHT_PRECISIONS.index(activation_precision(weight_precision(_with(base, precision=p))))
                    for p in names])
    attn = peak_matrix[np.broadcast_to(act[idx], (n,)), gi]
    if kv is not None and task == "serve":
        fp8_kv = np.broadcast_to(np.array([k == "fp8" for k in kv[0]])[kv[1]], (n,))
        fp8 = table.peaks["fp8"][gi]
        attn = np.where(fp8_kv & np.isfinite(fp8), fp8, attn)
    fields["attention_peak_flops_per_s"] = attn
    fields["low_precision_gemm"] = table.low_precision[wp, gi]
    return Case(**fields)


def _with(req: Request, **kw: Any) -> Request:
    return req.model_copy(update=kw)


def case_supported(case: Case) -> Any:
    """True where the GPU has a compute path for the candidate's precision."""
    return np.isfinite(np.asarray(case.peak_flops_per_s, dtype=float))


def layout_valid(arch: ModelArch, tp: Num, pp: Num) -> Any:
    """TP divides the attention heads and PP does not exceed the layers (elementwise)."""
    tp_a, pp_a = np.asarray(tp, dtype=np.int64), np.asarray(pp, dtype=np.int64)
    return (arch.heads % tp_a == 0) & (pp_a <= arch.layers)
