"""The ``attention`` class: how a pass's time grows with its context, from runs that measured several contexts.

The bench measures decode steps (compiled-graph variant) at contexts 2048 and 8192 for each batch, and prefills at
batch 1 over 512, 2048 and 8192 tokens (``gpumatch bench run --suite standard``, docs/bench.md). With the model,
batch and run fixed, what changes between two contexts is the attention core: the KV cache a decode step reads
(bytes ∝ context) and the score/value FLOPs of a causal prefill (∝ prompt²); the weights, the GEMMs per token and
the host overheads stay or scale with the tokens. So each pair of consecutive contexts of one (decode or prefill,
batch, run) is an attention case:

    measured = t(longer context) / t(shorter context),  predicted = the same ratio of two estimates

(:func:`gpumatch.calibrate.compare.predict` divides by the estimate at ``extra["base_options"]``). A ratio
cancels every error common to both contexts (weight streaming, GEMM efficiency, per-pass overheads), which the
decode and prefill classes fit, and leaves the context dependence.

Fields (:data:`FIELDS`): ``attention_efficiency_max`` (the prefill attention kernels' share of peak),
``attention_half_flops`` (their size at half efficiency) and ``decode_attention_full_bw_blocks`` (the thread
blocks a decode attention kernel without split-KV needs for full HBM bandwidth; with one block per (sequence, KV
head), batch 1 of an 8-KV-head model has 8 and reads its cache at a fraction of the bandwidth). A field is fitted
only when the fit cases can tell its value: :func:`identified` (halving or doubling it must move some fit case's
predicted ratio by more than :data:`IDENTIFY_MIN`); the others keep their value and the report names them.

Pairs kept: those whose predicted ratio depends more on the attention fields than on the GEMM and memory curves
(:func:`measures_attention`).

Split: as every class (:func:`gpumatch.calibrate.runs.split_by_shape`), per sub-kind (decode pairs, prefill
pairs) sorted by size, even positions fit, odd held out.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpumatch.calibrate.cases import MeasuredCase
from gpumatch.calibrate.compare import predict
from gpumatch.estimate import Calibration

FIELDS = ("attention_efficiency_max", "attention_half_flops", "decode_attention_full_bw_blocks")
"""Calibration fields of the attention class, fitted when :func:`identified`."""
BOUNDS: dict[str, tuple[float, float]] = {"attention_efficiency_max": (0.15, 0.9),
                                          "attention_half_flops": (1e8, 1e11),
                                          "decode_attention_full_bw_blocks": (4.0, 2000.0)}
"""Search ranges: efficiencies as :data:`gpumatch.calibrate.fit.BOUNDS`; half size 1e8..1e11 FLOP per call
(the GEMM range); blocks 4..2000 (an H200 has 132 SMs, a few blocks each)."""
OTHER_FIELDS: dict[str, tuple[float, float]] = {"gemm_efficiency_max": (0.4, 0.9), "gemm_half_flops": (1e8, 1e11),
                                                "memory_efficiency_max": (0.5, 0.95),
                                                "memory_half_bytes": (1e4, 1e8)}
"""The size-dependent efficiencies that are no attention: a pair whose predicted ratio moves more with one of
these than with any attention field measures them, not attention (:func:`measures_attention`)."""
IDENTIFY_MIN = 0.02
"""Least change of some fit case's predicted ratio (|log|) when a field is halved or doubled for the fit cases to
identify it: four times the run-to-run spread of the committed repeats (prefill b1 s2048 on one H200: 64.24 and
64.55 ms, 0.5%; tests/data/measurements/bench/2026-12-04-h200-{quick,standard}.json)."""


def _context(kind: str, options: dict[str, Any]) -> int:
    """Keys a pass attends: the decode step's context, the prefill's prompt."""
    return int(options["prompt"]) + (1 if kind == "decode" else 0)


def attention_cases(cases: Sequence[MeasuredCase]) -> list[MeasuredCase]:
    """One case per pair of consecutive contexts of the same decode/prefill shape and run (module docstring);
    ``fit`` is not set yet (the split sets it)."""
    groups: dict[tuple[str, int, str], dict[int, MeasuredCase]] = defaultdict(dict)
    for c in cases:
        if c.kind not in ("decode", "prefill"):
            continue
        rest = {k: v for k, v in c.options.items() if k != "prompt"}
        key = (c.kind, int(c.extra["run_id"]), repr(sorted(rest.items())) + repr(sorted(c.shape.items())))
        groups[key][_context(c.kind, c.options)] = c
    out: list[MeasuredCase] = []
    for (kind, run_id, _), by_ctx in sorted(groups.items()):
        contexts = sorted(by_ctx)
        for lo, hi in itertools.pairwise(contexts):
            a, b = by_ctx[lo], by_ctx[hi]
            batch = int(b.options["concurrency"])
            shape = f"attention {kind} batch={batch} context={lo}->{hi}"
            out.append(MeasuredCase(
                case_id=f"run {run_id} {shape}", kind="attention", shape=b.shape, options=dict(b.options),
                metric=b.metric, measured=b.measured / a.measured, source=b.source, fit=False,
                extra={"shape": shape, "size": float(batch * hi), "run_id": run_id, "sub": kind,
                       "base_options": dict(a.options)}))
    return out


def sensitivity(card: str, cal: Calibration, cases: Sequence[MeasuredCase], name: str) -> float:
    """Largest |log| change of a case's prediction when field ``name`` is halved or doubled (within
    :data:`BOUNDS` or :data:`OTHER_FIELDS`); 0 without cases."""
    lo, hi = {**BOUNDS, **OTHER_FIELDS}[name]
    base = [predict(c, cal, card) for c in cases]
    worst = 0.0
    for factor in (0.5, 2.0):
        value = min(max(float(getattr(cal, name)) * factor, lo), hi)
        change: dict[str, Any] = {name: value}
        moved = replace(cal, **change)
        for c, p in zip(cases, base, strict=True):
            q = predict(c, moved, card)
            if p > 0 and q > 0:
                worst = max(worst, abs(math.log(q / p)))
    return worst


def measures_attention(card: str, cal: Calibration, case: MeasuredCase) -> bool:
    """Whether an attention pair's predicted ratio moves more with some attention field than with any of
    :data:`OTHER_FIELDS` under ``cal`` (the starting value: no measurement is used). A 512-token prefill streams
    its weights while the 2048-token one is compute-bound, so that pair's ratio measures the GEMM roofline; a
    decode batch whose blocks already saturate HBM has no attention field left to move."""
    own = max(sensitivity(card, cal, [case], n) for n in FIELDS)
    return own > 0 and own > max(sensitivity(card, cal, [case], n) for n in OTHER_FIELDS)


def identified(card: str, cal: Calibration, fit: Sequence[MeasuredCase]) -> dict[str, float]:
    """``{field: sensitivity}`` of every field of :data:`FIELDS` on the fit cases (:func:`sensitivity`); a field
    is identified when its sensitivity exceeds :data:`IDENTIFY_MIN`."""
    return {name: sensitivity(card, cal, fit, name) for name in FIELDS}
