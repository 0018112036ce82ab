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
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumatch.plan.inputs import PlanRequest

IntArray = npt.NDArray[np.int64]

NODE_COUNTS = (1, 2, 3, 4, 6, 8)
TP_DEGREES = (1, 2, 3, 4, 6, 8, 16)
PP_DEGREES = (1, 2, 4, 8, 16)
MICRO_BATCHES = (1, 2, 4, 8)
RECOMPUTE = ("none", "selective", "full")
QUANT_BYTES = {"fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.53}


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
        if self.kv_precision and self.kv_precision != (req.kv_precision or req.precision):
            out.append(f"{self.kv_precision} KV cache")
        if self.recompute != "none":
            out.append(f"{self.recompute} recompute")
        if self.offload:
            out.append("optimizer offload to CPU")
        return tuple(out)


@dataclass(frozen=True)
class CandidateSet:
    """Candidates as columns. ``gpu`` indexes the GPU table; ``mit`` indexes ``mitigations``; ``micro`` is the
    per-GPU micro-batch (training) or sequences per replica (inference); ``accum`` the micro-batches per step."""

    gpu: IntArray
    count: IntArray
    tp: IntArray
    pp: IntArray
    dp: IntArray
    zero: IntArray
    micro: IntArray
    accum: IntArray
    mit: IntArray
    mitigations: tuple[Mitigation, ...]

    def __len__(self) -> int:
        return int(self.gpu.size)

    def take(self, idx: npt.NDArray[np.intp] | npt.NDArray[np.bool_]) -> CandidateSet:
        """The subset at ``idx`` (integer indices or a boolean mask)."""
        cols = {k: getattr(self, k)[idx] for k in _COLUMNS}
        return CandidateSet(mitigations=self.mitigations, **cols)


_COLUMNS = ("gpu", "count", "tp", "pp", "dp", "zero", "micro", "accum", "mit")


def gpu_counts(max_gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """Counts to try: 1, 2, 3, 4, 6, 8 inside a node, then whole nodes up to ``max_gpus``."""
    inside = {n for n in NODE_COUNTS if n <= gpus_per_node} | {gpus_per_node}
    nodes = {k * gpus_per_node for k in range(2, max_gpus // gpus_per_node + 1)}
    return tuple(sorted(n for n in inside | nodes if n <= max_gpus))


def layouts(req: PlanRequest) -> list[tuple[int, int, int, int, int, int, int]]:
    """(count, tp, pp, dp, zero, micro, accum) tuples valid by construction (see module docstring)."""
    out: list[tuple[int, int, int, int, int, int, int]] = []
    gpn = req.gpus_per_node
    for n in gpu_counts(req.max_gpus, gpn):
        for tp in TP_DEGREES if req.tp is None else (req.tp,):
            if n % tp or tp > min(n, gpn) or gpn % tp:
                continue
            for pp in PP_DEGREES if req.pp is None else (req.pp,):
                if (n // tp) % pp:
                    continue
                dp = n // (tp * pp)
                if not req.training and dp > req.batch:
                    continue  # more replicas than sequences in flight: idle GPUs
                out.extend((n, tp, pp, dp, z, mb, acc) for z, mb, acc in _batching(req, dp, pp))
    return out


def _batching(req: PlanRequest, dp: int, pp: int) -> list[tuple[int, int, int]]:
    """(zero, micro-batch, accumulation steps) for one layout."""
    if not req.training:
        return [(0, -(-req.batch // dp), 1)]
    zeros = (0,) if dp == 1 else ((0, 1) if pp > 1 else (0, 1, 2, 3))
    if req.micro_batch is not None:
        micros: tuple[int, ...] = (req.micro_batch,)
    else:
        micros = tuple(b for b in MICRO_BATCHES if b * dp <= max(req.batch, dp)) or (1,)
    return [(z, b, max(1, -(-req.batch // (b * dp)))) for z in zeros for b in micros]


def mitigations(req: PlanRequest) -> tuple[Mitigation, ...]:
    """Mitigation combinations for the task (module docstring); the request as written comes first."""
    if req.training:
        precs = [req.precision] + (["fp8"] if req.full_training and req.precision in ("bf16", "fp16") else [])
        offload = (False, True) if req.full_training else (False,)
        qlora = (False, True) if req.task == "lora" else (False,)
        combos = itertools.product(precs, RECOMPUTE, offload, qlora)
        return tuple(Mitigation(p, None, rc, off, q) for p, rc, off, q in combos)
    base = QUANT_BYTES.get(req.precision, 2.0)
    precs = [req.precision] + [p for p in ("fp8", "int8", "int4") if QUANT_BYTES[p] < base]
    kv0 = req.kv_precision or req.precision
    kvs = [req.kv_precision] + (["fp8"] if QUANT_BYTES.get(kv0, 2.0) > 1.0 else [])
    return tuple(Mitigation(p, kv) for p, kv in itertools.product(precs, kvs))


def enumerate_candidates(req: PlanRequest, n_gpus: int) -> CandidateSet:
    """The full product GPUs × layouts × mitigations as columns (GPU-major order)."""
    lay = np.array(layouts(req), dtype=np.int64).reshape(-1, 7)
    mits = mitigations(req)
    n_lay, n_mit = lay.shape[0], len(mits)
    per_gpu = n_lay * n_mit
    gpu = np.repeat(np.arange(n_gpus, dtype=np.int64), per_gpu)
    row = np.tile(np.repeat(np.arange(n_lay), n_mit), n_gpus)
    mit = np.tile(np.arange(n_mit, dtype=np.int64), n_lay * n_gpus)
    cols = {name: lay[row, i] for i, name in enumerate(("count", "tp", "pp", "dp", "zero", "micro", "accum"))}
    if req.training:
        keep = ~np.array([m.offload for m in mits])[mit] | (cols["count"] <= req.gpus_per_node)
        gpu, mit = gpu[keep], mit[keep]
        cols = {k: v[keep] for k, v in cols.items()}
    return CandidateSet(gpu=gpu, mit=mit, mitigations=mits, **cols)
