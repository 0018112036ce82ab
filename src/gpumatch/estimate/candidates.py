"""Vectorized inputs for the planner: many candidates (GPU × layout × mitigation × micro-batch) in one Case.

Usage (one model, one task; every keyword may be a scalar or a 1-D array of the same length)::

    table = gpu_table(load_catalog().gpus)
    case = candidate_case(arch, table, "train", gpu_index=gi, tp=tp, pp=pp, dp=dp, zero=z, batch=b,
                          micro_batches=m, seq=4096, precision=prec, recompute=rc)
    out = evaluate("train", model_nums(arch), case, calibration)   # dict of arrays
    ok = out["fits"] & case_supported(case)

String-valued options (precision, kv_precision, recompute) are mapped once per distinct value, so a call
over 10^5 candidates costs a few numpy passes; validity rules the planner must check itself (TP dividing
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
from gpumatch.estimate.inputs import Case
from gpumatch.estimate.precision import WEIGHT_PRECISIONS, compute_path
from gpumatch.estimate.setup import Request, gpu_numbers, precision_numbers, shape_numbers, weight_precision
from gpumatch.models.arch import ModelArch

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GpuTable:
    """Per-GPU numbers as arrays (index = position in ``specs``); ``peaks[p]`` is NaN where ``p`` is unsupported."""

    specs: tuple[GpuSpec, ...]
    fields: dict[str, FloatArray]
    peaks: dict[str, FloatArray]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.specs)


def gpu_table(specs: Sequence[GpuSpec]) -> GpuTable:
    """Stack the GPUs' numbers once; reuse the table across calls."""
    rows = [gpu_numbers(g) for g in specs]
    fields = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]} if rows else {}
    peaks = {
        p: np.array([compute_path(g, p).peak_flops_per_s or np.nan for g in specs], dtype=float)
        for p in WEIGHT_PRECISIONS
    }
    return GpuTable(tuple(specs), fields, peaks)


def _per_value(values: Any, n: int, fn: Any) -> dict[str, FloatArray]:
    """Apply ``fn(value) -> dict[str, float]`` once per distinct value of a scalar or array of strings."""
    arr = np.asarray(values)
    if arr.ndim == 0:
        return {k: np.full(n, v, dtype=float) for k, v in fn(str(arr)).items()}
    uniq, inv = np.unique(arr, return_inverse=True)
    per = [fn(str(u)) for u in uniq]
    return {k: np.array([d[k] for d in per], dtype=float)[inv] for k in per[0]}


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
    **numbers: Any,
) -> Case:
    """A :class:`Case` over candidates. ``numbers``: tp, pp, dp, zero, batch, micro_batches, seq, prompt, gen,
    lora_rank, gpus_per_node, kv_block (scalars or arrays). ``precision``/``kv_precision``/``recompute`` may be
    arrays of strings. Candidates whose precision the GPU cannot compute get a NaN peak (see case_supported).
    """
    gi = np.asarray(gpu_index, dtype=np.intp)
    n = int(np.broadcast_shapes(gi.shape, *(np.shape(v) for v in numbers.values()))[0]) if gi.ndim else 1
    gi = np.broadcast_to(gi, (n,))
    base = Request(task=task, optimizer=optimizer, master_weights=master_weights)
    shape = shape_numbers(base)
    shape = {k: v for k, v in shape.items() if k not in ("tp", "pp", "dp", "zero", "seq_parallel")}
    if not base.training and "seq" in numbers and "prompt" not in numbers:
        numbers = dict(numbers, prompt=numbers["seq"])
    fields: dict[str, Any] = {k: v[gi] for k, v in table.fields.items()}
    fields.update(shape)
    fields.update({k: np.asarray(v, dtype=float) for k, v in numbers.items()})
    tp = np.asarray(numbers.get("tp", 1.0), dtype=float)
    fields["seq_parallel"] = (tp > 1).astype(float)
    if kv_precision is None:
        prec = _per_value(precision, n, lambda p: precision_numbers(_with(base, precision=p)))
    else:
        pk = np.char.add(np.char.add(np.asarray(precision, dtype=str), "|"), np.asarray(kv_precision, dtype=str))
        prec = _per_value(pk, n, lambda s: precision_numbers(_with(base, precision=s.split("|")[0],
                                                                     kv_precision=s.split("|")[1])))
    fields.update(prec)
    rc = _per_value(recompute, n, lambda r: {"rc_full": float(r == "full"), "rc_selective": float(r == "selective")})
    fields.update(rc)
    wp = _per_value(precision, n, lambda p: {"code": float(WEIGHT_PRECISIONS.index(weight_precision(
        _with(base, precision=p))))})["code"].astype(np.intp)
    peak_matrix = np.stack([table.peaks[p] for p in WEIGHT_PRECISIONS])  # (precision, gpu)
    fields["peak_flops_per_s"] = peak_matrix[wp, gi]
    return Case(**fields)


def _with(req: Request, **kw: Any) -> Request:
    from dataclasses import replace

    return replace(req, **kw)


def case_supported(case: Case) -> Any:
    """True where the GPU has a compute path for the candidate's precision."""
    return np.isfinite(np.asarray(case.peak_flops_per_s, dtype=float))


def layout_valid(arch: ModelArch, tp: Num, pp: Num) -> Any:
    """TP divides the attention heads and PP does not exceed the layers (elementwise)."""
    tp_a, pp_a = np.asarray(tp, dtype=np.int64), np.asarray(pp, dtype=np.int64)
    return (arch.heads % tp_a == 0) & (pp_a <= arch.layers)
