"""Enumerate candidates: every catalog SKU × GPU count × parallel layout × mitigation × micro-batch.

The result is a :class:`CandidateSet`, a structure of numpy arrays (one row per candidate), so the rules and the
estimator run over all candidates at once. Enumeration choices (what a practitioner would try, and why):

- counts: 1, 2, 3, 4, 6, 8 GPUs within a node (up to ``gpus_per_node``), then whole nodes (multiples of
  ``gpus_per_node``) up to ``max_gpus``;
- tensor parallel stays inside a node (Megatron-LM places TP groups on NVLink-connected GPUs; Narayanan et al.
  2021, "Efficient Large-Scale Language Model Training on GPU Clusters", section 3.2): TP in {1, 2, 3, 4, 6, 8}
  dividing both the count and the node; whether it divides the heads is a rule, so a bad TP is reported;
- pipeline parallel in {1, 2, 4, 8, 16}; data parallel (training) or replicas (inference) fill the count, with
  no more replicas than sequences in flight;
- ZeRO stage 0-3 when DP > 1 (training), only 0-1 with PP > 1 (DeepSpeed does not combine ZeRO-2/3 with its
  pipeline engine);
- mitigations: weight quantization fp8/int8/int4 and fp8 KV cache (inference); fp8 training, recompute
  selective/full, CPU offload of the optimizer state (training, one node; ZeRO-Offload, Ren et al. 2021);
  4-bit base (QLoRA) for LoRA; gradient accumulation through the micro-batch (training: 1, 2, 4, 8 sequences
  per GPU, the rest accumulated).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumatch.estimate.precision import BYTES_PER_ELEMENT, activation_precision
from gpumatch.estimate.request import grad_accum, seqs_per_replica
from gpumatch.plan.request import PlanRequest
from gpumatch.vocab import RECOMPUTE_MODES

IntArray = npt.NDArray[np.int64]

NODE_COUNTS = (1, 2, 3, 4, 6, 8)
TP_DEGREES = (1, 2, 3, 4, 6, 8, 16)
PP_DEGREES = (1, 2, 4, 8, 16)
MICRO_BATCHES = (1, 2, 4, 8)
RECOMPUTE = RECOMPUTE_MODES


def kv_as_written(req: PlanRequest) -> str:
    """The KV-cache format the request runs with: its own, else the estimator's default for its weights (16-bit
    unless the weights are fp32: fp8 or int4 weights still keep a bf16 cache)."""
    return req.kv_precision or activation_precision(req.precision)


@dataclass(frozen=True)
class Mitigation:
    """One mitigation combination. ``precision`` = stored weights (inference) or training precision."""

    precision: str
    kv_precision: str | None = None
    recompute: str = "none"
    offload: bool = False
    qlora: bool = False

    def labels(self, req: PlanRequest) -> tuple[str, ...]:
        """Human names of what differs from the request as written (empty = as written)."""
        out = []
        if self.qlora:
            out.append("4-bit base (QLoRA)")
        elif self.precision != req.precision:
            out.append(f"{self.precision} weights" if not req.training else f"{self.precision} training")
        if self.kv_precision and self.kv_precision != kv_as_written(req):
            out.append(f"{self.kv_precision} KV cache")
        if self.recompute != "none":
            out.append(f"{self.recompute} recompute")
        if self.offload:
            out.append("optimizer offload to CPU")
        return tuple(out)


@dataclass(frozen=True)
class CandidateSet:
    """Candidates as columns. ``gpu`` indexes the GPU table; ``mit`` indexes ``mitigations``;
    ``seqs_per_replica`` the micro-batch per DP rank (training) or the sequences per replica (inference), as
    :attr:`gpumatch.estimate.request.Request.seqs_per_replica`; ``grad_accum`` the micro-batches per step."""

    gpu: IntArray
    count: IntArray
    tp: IntArray
    pp: IntArray
    dp: IntArray
    zero: IntArray
    seqs_per_replica: IntArray
    grad_accum: IntArray
    mit: IntArray
    mitigations: tuple[Mitigation, ...]

    def __len__(self) -> int:
        return int(self.gpu.size)

    def take(self, idx: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> CandidateSet:
        """The subset at ``idx`` (integer indices or a boolean mask)."""
        cols = {k: getattr(self, k)[idx] for k in _COLUMNS}
        return CandidateSet(mitigations=self.mitigations, **cols)


_COLUMNS = ("gpu", "count", "tp", "pp", "dp", "zero", "seqs_per_replica", "grad_accum", "mit")


def gpu_counts(max_gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """Counts to try: 1, 2, 3, 4, 6, 8 inside a node, then whole nodes up to ``max_gpus``."""
    return tuple(int(n) for n in _counts(max_gpus, gpus_per_node))


def _counts(max_gpus: int, gpus_per_node: int) -> IntArray:
    inside = sorted({n for n in NODE_COUNTS if n <= gpus_per_node} | {gpus_per_node})
    nodes = np.arange(2, max_gpus // gpus_per_node + 1, dtype=np.int64) * gpus_per_node
    out: IntArray = np.concatenate([np.array([n for n in inside if n <= max_gpus], dtype=np.int64), nodes])
    return out


def _tp_degrees(req: PlanRequest) -> tuple[int, ...]:
    """TP degrees that divide the node (tensor parallel stays inside a node)."""
    gpn = req.gpus_per_node
    return tuple(t for t in (TP_DEGREES if req.tp is None else (req.tp,)) if gpn % t == 0 and t <= gpn)


def _pp_degrees(req: PlanRequest) -> tuple[int, ...]:
    return PP_DEGREES if req.pp is None else (req.pp,)


def dp_limit(req: PlanRequest) -> int:
    """The most data-parallel ranks (training) or replicas (inference) that all get work: one micro-batch per
    rank of the global batch (``global_batch // micro_batch`` when the micro-batch is fixed), one sequence in
    flight per replica. More would leave GPUs idle, so the planner does not enumerate them."""
    if not req.training:
        return max(1, req.concurrency)
    return max(1, req.global_batch // (req.micro_batch or 1))


def useful_max_gpus(req: PlanRequest) -> int:
    """The most GPUs any layout of this request can use: the largest TP × the largest PP × :func:`dp_limit`."""
    tps = _tp_degrees(req) or (1,)
    return max(tps) * max(_pp_degrees(req)) * dp_limit(req)


def _blocks(req: PlanRequest, counts: IntArray) -> list[tuple[IntArray, int, int, int, int, int]]:
    """(counts, tp index, pp index, zero, micro index, micro) of every (TP, PP, ZeRO, micro-batch) choice, the
    counts being those at which it is valid (module docstring); arrays, so no per-count Python loop."""
    out = []
    limit = dp_limit(req)
    for ti, tp in enumerate(_tp_degrees(req)):
        for pi, pp in enumerate(_pp_degrees(req)):
            n = counts[(counts % tp == 0) & (counts >= tp)]
            n = n[(n // tp) % pp == 0]
            n = n[n // (tp * pp) <= limit]
            if not n.size:
                continue
            if not req.training:
                out.append((n, ti, pi, 0, 0, -1))
                continue
            dp = n // (tp * pp)
            micros = (req.micro_batch,) if req.micro_batch is not None else MICRO_BATCHES
            for z in (0, 1, 2, 3):
                zn = n[(z == 0) | ((dp > 1) & ((pp == 1) | (z <= 1)))]
                zdp = zn // (tp * pp)
                for bi, b in enumerate(micros):
                    ok = (b * zdp <= max(req.global_batch, 1)) | (b == 1) if req.micro_batch is None else \
                        np.ones(zn.size, dtype=bool)
                    if ok.any():
                        out.append((zn[ok], ti, pi, z, bi, b))
    return out


def layouts(req: PlanRequest) -> list[tuple[int, int, int, int, int, int, int]]:
    """(count, tp, pp, dp, zero, micro, accum) tuples valid by construction (see module docstring)."""
    return [tuple(int(x) for x in row) for row in layout_array(req)]  # type: ignore[misc]


def layout_array(req: PlanRequest) -> IntArray:
    """:func:`layouts` as an (n, 7) array, ordered by count, then TP, PP, ZeRO and micro-batch as listed.

    Counts stop at :func:`useful_max_gpus`; data-parallel ranks and replicas at :func:`dp_limit`. Sequences per
    replica and micro-batches per step follow the request's rules (:func:`gpumatch.estimate.request.
    seqs_per_replica`, :func:`~gpumatch.estimate.request.grad_accum`), the ones ``gpumatch estimate`` applies.
    """
    counts = _counts(min(req.max_gpus, useful_max_gpus(req)), req.gpus_per_node)
    tps, pps = _tp_degrees(req), _pp_degrees(req)
    parts, keys = [], []
    for n, ti, pi, z, bi, b in _blocks(req, counts):
        tp, pp = tps[ti], pps[pi]
        dp = n // (tp * pp)
        if b < 0:  # inference: the sequences in flight split over the replicas
            micro, accum = seqs_per_replica(req.concurrency, dp), np.ones_like(n)
        else:
            micro, accum = np.full_like(n, b), grad_accum(req.global_batch, b, dp)
        parts.append(np.stack([n, np.full_like(n, tp), np.full_like(n, pp), dp, np.full_like(n, z), micro, accum], 1))
        keys.append(np.stack([n, np.full_like(n, ti), np.full_like(n, pi), np.full_like(n, z), np.full_like(n, bi)], 1))
    if not parts:
        return np.zeros((0, 7), dtype=np.int64)
    rows, key = np.concatenate(parts), np.concatenate(keys)
    order = np.lexsort(key.T[::-1])
    out: IntArray = rows[order]
    return out


def candidate_count(req: PlanRequest,
                    allowed: Sequence[bool] | npt.NDArray[np.bool_]) -> tuple[int, IntArray, IntArray]:
    """(candidates, counts, cumulative candidates up to each count) of the enumeration, without building it.

    Excluded GPUs count one candidate each (they only need their "not considered" row)."""
    counts = _counts(min(req.max_gpus, useful_max_gpus(req)), req.gpus_per_node)
    per_count = np.zeros(counts.size, dtype=np.int64)
    for n, *_ in _blocks(req, counts):
        per_count += np.bincount(np.searchsorted(counts, n), minlength=counts.size)
    mits = mitigations(req)
    n_all = len(mits)
    n_far = sum(1 for m in mits if not m.offload)  # offload is enumerated on one node only
    per_mit = np.where(counts <= req.gpus_per_node, n_all, n_far) if req.training else np.full(counts.size, n_all)
    n_allowed = int(sum(bool(a) for a in allowed))
    singles = (len(allowed) - n_allowed) if per_count.any() else 0
    cumulative: IntArray = np.cumsum(per_count * per_mit) * n_allowed + singles
    total = int(cumulative[-1]) if cumulative.size else 0
    return total, counts, cumulative


def mitigations(req: PlanRequest) -> tuple[Mitigation, ...]:
    """Mitigation combinations for the task (module docstring); the request as written comes first."""
    if req.training:
        precs = [req.precision] + (["fp8"] if req.full_training and req.precision in ("bf16", "fp16") else [])
        offload = (False, True) if req.full_training else (False,)
        qlora = (False, True) if req.task == "lora" else (False,)
        combos = itertools.product(precs, RECOMPUTE, offload, qlora)
        return tuple(Mitigation(p, None, rc, off, q) for p, rc, off, q in combos)
    base = BYTES_PER_ELEMENT.get(req.precision, 2.0)
    precs = [req.precision] + [p for p in ("fp8", "int8", "int4") if BYTES_PER_ELEMENT[p] < base]
    kvs = [req.kv_precision] + (["fp8"] if BYTES_PER_ELEMENT.get(kv_as_written(req), 2.0) > 1.0 else [])
    return tuple(Mitigation(p, kv) for p, kv in itertools.product(precs, kvs))


def enumerate_candidates(req: PlanRequest, n_gpus: int,
                         allowed: Sequence[bool] | npt.NDArray[np.bool_] | None = None) -> CandidateSet:
    """The product GPUs × layouts × mitigations as columns (GPU-major order). A GPU that ``allowed`` marks False
    gets its first candidate only (it is rejected as not considered; one row says so)."""
    lay = layout_array(req)
    mits = mitigations(req)
    n_lay, n_mit = lay.shape[0], len(mits)
    ok = np.ones(n_gpus, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    per_gpu = np.where(ok, n_lay * n_mit, min(1, n_lay * n_mit))
    gpu = np.repeat(np.arange(n_gpus, dtype=np.int64), per_gpu)
    within = np.arange(gpu.size, dtype=np.int64) - np.repeat(np.cumsum(per_gpu) - per_gpu, per_gpu)
    row, mit = within // max(n_mit, 1), within % max(n_mit, 1)
    cols = {name: lay[row, i] for i, name in enumerate(_COLUMNS[1:-1])}
    if req.training:
        keep = ~np.array([m.offload for m in mits])[mit] | (cols["count"] <= req.gpus_per_node)
        gpu, mit = gpu[keep], mit[keep]
        cols = {k: v[keep] for k, v in cols.items()}
    return CandidateSet(gpu=gpu, mit=mit, mitigations=mits, **cols)
