"""Derived figures of a scaling ladder, from the ranks' raw timings (pure functions, no torch, no store).

The seed's question: what does each added GPU buy? A ladder measures the same workload on n = 1, 2, 4, 8 GPUs
(weak scaling: a fixed batch per rank for DDP/FSDP; a fixed decode batch for the whole tensor-parallel group).
Formulas (docs/scale.md; each also goes into the stored row's ``extra.formula``):

- throughput ``X_n`` (tokens/s) = tokens per step of the whole job / max over ranks of median(step_time_s):
  ranks step in lock-step, so the slowest rank sets the pace (:data:`THROUGHPUT_FORMULA`);
- throughput per added GPU = (X_n - X_m) / (n - m), m the previous rung that ran (:data:`PER_ADDED_FORMULA`);
- scaling efficiency = X_n / (n · X_1) (:data:`EFFICIENCY_FORMULA`);
- "n GPUs deliver the throughput of k": k = X_n / X_1 (:data:`DELIVERS_FORMULA`);
- exposed communication per step = max(0, median(step_time_s) - median(compute_time_s)), the compute-only step
  being the same step with no communication; the job's is the largest over ranks (:data:`EXPOSED_FORMULA`);
- collectives: the job's time for one op/size/n = max over ranks of median(time_s) (the collective is done when
  the last rank is; the worker already keeps each iteration's maximum over the ranks, so the ranks agree);
  rows a backend refused (``supported: false``) are left out; algbw = S / t; busbw = algbw · factor with
  factor all_reduce 2(n-1)/n, all_gather,
  reduce_scatter and all_to_all (n-1)/n, sendrecv 1 (nccl-tests doc/PERFORMANCE.md,
  https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

THROUGHPUT_FORMULA = "X_n = sum over ranks of tokens_per_step / max over ranks of median(step_time_s)"
TP_THROUGHPUT_FORMULA = "X_n = tokens_per_step of the TP group / max over ranks of median(step_time_s)"
PER_ADDED_FORMULA = "(X_n - X_m) / (n - m), m = the previous rung that ran"
EFFICIENCY_FORMULA = "X_n / (n * X_1)"
DELIVERS_FORMULA = "k = X_n / X_1"
EXPOSED_FORMULA = "max(0, median(step_time_s) - median(compute_time_s)), largest over ranks"
COLLECTIVE_TIME_FORMULA = "t = max over ranks of median(time_s)"
ALGBW_FORMULA = "algbw = size_bytes / t"
BUSBW_FORMULA = "busbw = algbw * factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; " \
                "sendrecv 1), nccl-tests doc/PERFORMANCE.md"


def median(xs: Sequence[float]) -> float:
    """The median of raw timings (seconds); ValueError when empty."""
    return float(statistics.median(xs))


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor of ``op`` on ``n`` ranks (module docstring)."""
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def exposed_comm_s(step_time_s: Sequence[float], compute_time_s: Sequence[float]) -> float | None:
    """One rank's exposed communication per step (s), :data:`EXPOSED_FORMULA`; None without compute timings."""
    if not step_time_s or not compute_time_s:
        return None
    return max(0.0, median(step_time_s) - median(compute_time_s))


def job_throughput(ranks: Sequence[dict[str, Any]], tensor_parallel: bool,
                   world_size: int | None = None) -> tuple[float, float, float]:
    """(X_n tokens/s, tokens per step of the job, step seconds = max over ranks of the median step) from the
    ranks' ``steps`` blocks; TP groups produce one rank's ``tokens_per_step`` together. With several nodes only
    this node's ranks are at hand: the job's tokens are their sum × ``world_size`` / ranks at hand (weak scaling:
    every rank runs the same batch)."""
    steps = [r["steps"] for r in ranks]
    step_s = max(median(s["step_time_s"]) for s in steps)
    scale_up = (world_size or len(steps)) / len(steps)
    tokens = float(steps[0]["tokens_per_step"]) if tensor_parallel else \
        float(sum(s["tokens_per_step"] for s in steps)) * scale_up
    return tokens / step_s, tokens, step_s


@dataclass(frozen=True)
class Rung:
    """One measured rung of a workload ladder: ``n`` GPUs, ``X_n`` tokens/s, step and exposed comm (s)."""

    n: int
    tokens_per_s: float
    step_s: float
    exposed_comm_s: float | None


def ladder(rungs: Sequence[Rung]) -> list[dict[str, Any]]:
    """Each rung with ``per_added_gpu_tokens_per_s``, ``scaling_efficiency`` and ``delivers_gpus`` (module
    docstring); None where undefined (the first rung, or no 1-GPU rung for efficiency and k)."""
    ordered = sorted(rungs, key=lambda r: r.n)
    x1 = next((r.tokens_per_s for r in ordered if r.n == 1), None)
    out: list[dict[str, Any]] = []
    prev: Rung | None = None
    for r in ordered:
        out.append({"n_gpus": r.n, "tokens_per_s": r.tokens_per_s, "step_s": r.step_s,
                    "exposed_comm_s": r.exposed_comm_s,
                    "per_added_gpu_tokens_per_s": None if prev is None else (r.tokens_per_s - prev.tokens_per_s)
                    / (r.n - prev.n),
                    "scaling_efficiency": None if not x1 else r.tokens_per_s / (r.n * x1),
                    "delivers_gpus": None if not x1 else r.tokens_per_s / x1})
        prev = r
    return out


def collective_rows(ranks: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Job-level rows per (op, size): ``time_s`` (:data:`COLLECTIVE_TIME_FORMULA`), ``algbw_bytes_per_s``,
    ``busbw_bytes_per_s`` and the factor, from every rank's ``collectives`` list."""
    by: dict[tuple[str, int], list[float]] = {}
    dtype: dict[tuple[str, int], str] = {}
    for r in ranks:
        for c in r.get("collectives") or []:
            if c.get("supported") is False or not c.get("time_s"):
                continue
            key = (str(c["op"]), int(c["size_bytes"]))
            by.setdefault(key, []).append(median(c["time_s"]))
            dtype[key] = str(c.get("dtype", ""))
    rows = []
    for (op, size), medians in sorted(by.items()):
        t = max(medians)
        algbw = size / t if t > 0 else float("nan")
        factor = busbw_factor(op, n)
        rows.append({"op": op, "size_bytes": size, "dtype": dtype[(op, size)], "n_gpus": n, "time_s": t,
                     "algbw_bytes_per_s": algbw, "busbw_bytes_per_s": algbw * factor, "busbw_factor": factor,
                     "rank_median_time_s": medians})
    return rows
