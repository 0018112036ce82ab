"""Explanations of a shortlist entry: why it ranks, what it costs, what would flip the choice, how to verify it.

The flip is computed, not guessed: for two entries with scores ``s1 > s2`` and role weights ``w``, the runner-up
overtakes when one of its terms rises by ``Δ = (s1 − s2)/100 × Σw / w_t`` (and stays within [0, 1]); on the log
scale of :mod:`gpumatch.plan.roles` (``1 + log10(ratio)``) that is a factor ``10^Δ`` on the metric behind the term.

The experiment plan follows the seed's fixed experiment package ("用固定实验包完成候选淘汰赛"): frozen software,
warm-up and a soak of at least 30 minutes, latency percentiles with throughput, peak memory, power and errors
together, and the failed configurations recorded.
"""

from __future__ import annotations

import math
from typing import Any

from gpumatch.plan.request import PlanRequest
from gpumatch.units import GIB

_LOG_TERMS = {"throughput": ("tokens/s", True), "latency": ("latency", False), "cost": ("$ per token", False),
              "energy": ("J per token", False)}


def label(entry: dict[str, Any]) -> str:
    return f"{entry['gpu']} ×{entry['count']}"


def layout_text(layout: dict[str, Any], training: bool) -> str:
    parts = [f"TP{layout['tp']}"] if layout["tp"] > 1 else []
    if layout["pp"] > 1:
        parts.append(f"PP{layout['pp']}")
    if training:
        if layout["dp"] > 1:
            parts.append(f"DP{layout['dp']}")
        if layout["zero"]:
            parts.append(f"ZeRO-{layout['zero']}")
        parts.append(f"mb{layout['micro_batch']}×{layout['grad_accum']}")
    else:
        if layout["replicas"] > 1:
            parts.append(f"{layout['replicas']} replicas")
        parts.append(f"{layout['sequences_per_replica']} seq/replica")
    return " ".join(parts)


def cost_text(est: dict[str, Any], req: PlanRequest) -> str:
    """$/h of the whole candidate and $/1M tokens; $ per run for training with a token target."""
    usd_h, per_m = est.get("usd_per_hour"), est.get("usd_per_million_tokens")
    if usd_h is None or per_m is None:
        return f"no {req.price_basis} price known for this card: cost not compared"
    basis = ("owned: purchase amortized + energy" if req.price_basis == "purchase"
             else f"cloud {req.price_basis}")
    out = f"${usd_h:,.2f}/h ({basis}), ${per_m:,.3g} per 1M tokens"
    if req.training and req.train_tokens and est.get("tokens_per_s"):
        hours = req.train_tokens / est["tokens_per_s"] / 3600.0
        out += f", {hours:,.0f} h and ${usd_h * hours:,.0f} per run of {req.train_tokens:.3g} tokens"
    return out


TIE_POINTS = 0.05
"""Score gaps below this (what prints as "0.0 points") are ties, not a change to name."""


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.01 else f"{x:.1%}"


def flip(a: dict[str, Any], b: dict[str, Any], weights: dict[str, float]) -> str:
    """What single change of ``b`` would overtake ``a`` (scores and term values in the entries)."""
    gap = a["score"] - b["score"]
    total = sum(weights.values())
    if gap < TIE_POINTS:
        return f"tied with {label(b)} (scores {a['score']:.1f} and {b['score']:.1f})"
    options = []
    for term, w in weights.items():
        if w <= 0 or (term == "cost" and b.get("priced") is False):  # an unpriced card's cost term is imputed
            continue
        need = gap / 100.0 * total / w
        have = b["terms"][term]
        if have + need > 1.0 + 1e-9:
            continue
        if term in _LOG_TERMS:
            if have <= 0.0:  # unknown (no price) or off the scale: no factor can be read from it
                continue
            name, higher = _LOG_TERMS[term]
            factor = 10**need
            change = (f"{_pct(factor - 1.0)} higher" if factor < 2.0 else f"{factor:.2g}x higher") if higher else (
                f"{_pct(1.0 - 1.0 / factor)} lower")
            options.append((need, f"if its {name} were {change}"))
        else:
            options.append((need, f"if its {term.replace('_', ' ')} term rose by {need:.2f} (now {have:.2f})"))
    if not options:
        if b.get("estimate", {}).get("usd_per_million_tokens") is None and weights.get("cost", 0.0) > 0:
            return (f"{label(b)} has no price on this basis; a price quote for it could change the order "
                    f"(gap {gap:.1f} points)")
        return f"{label(b)} cannot overtake by any single term (gap {gap:.1f} points)"
    options.sort()
    return f"{label(b)} would take this place {options[0][1]} (gap {gap:.1f} points)"


def experiments(entry: dict[str, Any], req: PlanRequest) -> list[str]:
    """The benchmarks, mitigation tests and watch-list that would verify ``entry`` on hardware."""
    est, lay, n = entry["estimate"], entry["layout"], entry["count"]
    out = []
    if req.training:
        out.append(f"training step: micro-batch {lay['micro_batch']}, {req.seq} tokens, layout "
                   f"{layout_text(lay, True)}; compare peak memory with the predicted "
                   f"{est['total_bytes'] / GIB:.1f} GiB and step time with {est['step_s']:.3g} s")
        if n > 1:
            out.append(f"scaling ladder 1 → {min(n, req.gpus_per_node)} GPUs"
                       + (f" → {n} GPUs ({n // req.gpus_per_node} nodes)" if n > req.gpus_per_node else "")
                       + f": tokens/s per added GPU against the predicted {est['scaling_efficiency']:.0%} efficiency")
    else:
        b = lay["sequences_per_replica"]
        ladder = ", ".join(str(x) for x in sorted({1, max(1, b // 2), b, 2 * b}))
        out.append(f"decode ladder: batch {ladder} at context {req.prompt}-"
                   f"{req.prompt + req.gen}; TPOT against the predicted {est['tpot_s'] * 1e3:.1f} ms")
        batches = "1" if b == 1 else f"1 and {b}"
        out.append(f"prefill: batch {batches} at {req.prompt} tokens; TTFT against the predicted "
                   f"{est['prefill_s'] * 1e3:.0f} ms for the whole batch")
    out.append("GEMM and HBM-bandwidth microbenchmarks at the precision used (achieved vs datasheet peak)")
    if n > 1:
        out.append(f"all-reduce bus bandwidth over {min(n, req.gpus_per_node)} GPUs"
                   + (" and across nodes" if n > req.gpus_per_node else "")
                   + "; check the PCIe generation and width each card negotiated")
    for m in entry["mitigations"]:
        out.append(f"mitigation to test: {m} (run with and without it: memory, speed"
                   + (", loss curve)" if req.training else ", output quality)"))
    out.append("telemetry soak ≥ 30 min under `gpumatch monitor -- <job>`: power-cap duty, clocks and temperature "
               f"after thermal steady state, memory headroom (predicted {entry['headroom_fraction']:.0%} free), "
               "ECC/Xid events, PCIe gen")
    return out


def why(entry: dict[str, Any], rank: int, req: PlanRequest) -> str:
    """One paragraph: rank, what bounds it, the numbers that matter, the flags."""
    est = entry["estimate"]
    lay = entry["layout"]
    if req.training:
        ranks = f"{lay['dp']} DP ranks" if lay["dp"] > 1 else "1 DP rank"
        perf = (f"{est['tokens_per_s']:,.0f} trained tokens/s ({ranks}), step {est['step_s']:.3g} s, "
                f"MFU {est['mfu']:.0%}")
    else:
        where = f"{lay['replicas']} replicas" if lay["replicas"] > 1 else "1 replica"
        engine = req.serving_engine
        how = "prefill included" if engine == "static" else f"{engine} steady state"
        ttft = "one prompt alone" if engine == "static" else "mean"
        perf = (f"{est['tokens_per_s']:,.0f} generated tokens/s ({where}, {how}), TPOT "
                f"{est['tpot_s'] * 1e3:.1f} ms, TTFT {est['ttft_p50_s'] * 1e3:.0f} ms ({ttft})")
    parts = [f"#{rank}: {entry['bound']}-bound; {perf}; uses {est['total_bytes'] / GIB:.1f} of "
             f"{est['capacity_bytes'] / GIB:.1f} GiB per GPU"]
    flagged = any("scaling efficiency" in f for f in entry["flags"])
    if entry["count"] > 1 and not flagged and not math.isnan(est.get("scaling_efficiency") or math.nan):
        parts.append(f"scaling efficiency {est['scaling_efficiency']:.0%}")
    parts.extend(entry["flags"])
    return "; ".join(parts)
