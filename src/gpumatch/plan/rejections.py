"""The failed configurations of a plan, grouped: one row per (GPU, count, reason, precision) with the closest to
passing as its example, how many configurations it stands for, and how far it is from passing.

Rules that depend on the numerics (precision, memory, latency, throughput) keep one row per precision; yes/no
rules (heads, power, consumer card, ...) one row for all. GPUs a workload excludes get one row each.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.plan import explain, rules
from gpumatch.plan.entries import layout_of
from gpumatch.plan.enumeration import CandidateSet, Mitigation
from gpumatch.plan.request import PlanRequest

FloatArray = npt.NDArray[np.float64]
PER_PRECISION_RULES = ("precision", "memory", "ttft", "tpot", "throughput", "deadline")


def grouped(req: PlanRequest, facts: rules.GpuFacts, cs: CandidateSet, code: npt.NDArray[np.int64],
              est: dict[str, FloatArray], margin: float) -> list[dict[str, Any]]:
    """One row per (GPU, count, reason, mitigation set), with the closest-to-passing example and how many
    configurations it stands for. GPUs excluded by the workload get one row each."""
    bad = np.flatnonzero(code > 0)
    if not bad.size:
        return []
    excluded = rules.CODE["excluded"]
    names = sorted({_prec(m) for m in cs.mitigations})
    mkey = np.array([names.index(_prec(m)) for m in cs.mitigations])[cs.mit[bad]]
    cnt = np.where(code[bad] == excluded, 0, cs.count[bad])
    per_precision = np.isin(code[bad], [rules.CODE[c] for c in PER_PRECISION_RULES])
    keys = np.stack([cs.gpu[bad], cnt, code[bad], np.where(per_precision, mkey, -1)], axis=1)
    closeness = np.nan_to_num(est["total_bytes"][bad] / est["capacity_bytes"][bad], nan=np.inf)
    order = np.lexsort((closeness, keys[:, 3], keys[:, 2], keys[:, 1], keys[:, 0]))
    keys, bad_sorted = keys[order], bad[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, len(keys)))
    rows = []
    for st, size in zip(starts, sizes, strict=True):
        i = int(bad_sorted[st])
        c = int(code[i])
        mit = cs.mitigations[int(cs.mit[i])]
        rows.append({
            "gpu": facts.specs[int(cs.gpu[i])].name,
            "count": None if c == excluded else int(cs.count[i]),
            "reason": rules.describe(c, req, facts, cs, i, est, margin),
            "rule": rules.RULES[c][0],
            "rule_title": rules.RULES[c][1],
            "precision": _prec(mit) if rules.RULES[c][0] in PER_PRECISION_RULES else "any",
            "example": None if c == excluded else _example(req, cs, i),
            "configurations": int(size),
            "shortfall_bytes": _shortfall(c, est, i, margin),
            "miss_fraction": _miss(c, req, cs, est, i, margin),
        })
    return rows


def _miss(code: int, req: PlanRequest, cs: CandidateSet, est: dict[str, FloatArray], i: int,
          margin: float) -> float | None:
    """How far the example is from passing its rule, as a fraction of the limit (0.1 = 10 % over the memory or
    the latency target, or 10 % more tokens/s needed); None for yes/no rules (precision, heads, power, ...)."""
    name = rules.RULES[code][0]
    if name == "memory":
        return float(est["total_bytes"][i] / (est["capacity_bytes"][i] * (1.0 - margin)) - 1.0)
    if name == "ttft" and req.serving_engine != "static":  # engine mode: one figure (prefilter or steady state)
        target = req.ttft_p50_s if not est["engine_evaluated"][i] else (req.ttft_p50_s or req.ttft_p99_s)
        return float(est["ttft_p50_s"][i]) / target - 1.0 if target else None
    if name == "ttft":
        p50, p99 = float(est["ttft_p50_s"][i]), float(est["prefill_s"][i])
        over = [x / t for x, t in ((p50, req.ttft_p50_s), (p99, req.ttft_p99_s)) if t]
        return max(over) - 1.0 if over else None
    if name == "tpot":
        target = req.tpot_p50_s or req.tpot_p99_s
        return float(est["tpot_s"][i]) / target - 1.0 if target else None
    if name in ("throughput", "deadline"):
        need, tok = req.required_tokens_per_s, float(est["tokens_per_s"][i])
        return need / tok - 1.0 if need and tok > 0 else None
    return None


def _shortfall(code: int, est: dict[str, FloatArray], i: int, margin: float) -> float | None:
    """Bytes per GPU beyond the usable memory (capacity less the margin), for memory rejections."""
    if rules.RULES[code][0] != "memory":
        return None
    return float(est["total_bytes"][i] - est["capacity_bytes"][i] * (1.0 - margin))


def _prec(m: Mitigation) -> str:
    return "nf4 (QLoRA)" if m.qlora else m.precision


def _example(req: PlanRequest, cs: CandidateSet, i: int) -> str:
    mit = cs.mitigations[int(cs.mit[i])]
    layout = layout_of(req, cs, i)
    text = explain.layout_text(layout, req.training)
    labels = mit.labels(req)
    return text + (f" + {', '.join(labels)}" if labels else "")
