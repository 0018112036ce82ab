"""Feasibility rules: each rejects candidates for a reason a person understands, or flags them and keeps them.

Rules run vectorized over a :class:`CandidateSet`. :func:`structural` runs before any estimate (cheap: GPU facts,
layout, power, money); :func:`measured` runs on the estimates (memory fit, SLOs, deadline). Each returns a code
per candidate (0 = passes; else an index into :data:`RULES`, the first rule that failed, in the seed's order of
decision: capacity, precision, interconnect, power, then targets and money). :func:`describe` turns one
representative candidate of a rejected group into a sentence with its numbers.

Sources: the 1.5x PSU headroom and the consumer-card concerns are the seed's ("功率余量建议留到1.5倍";
"散热形态、长时间负载、显存容量、远程管理和多卡拓扑"); FP8 needs Ada (sm_89) or Hopper (sm_90) or newer
(NVIDIA Transformer Engine documentation); TP inside a node as in Megatron-LM (Narayanan et al. 2021).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.catalog import GpuSpec
from gpumatch.plan.enumeration import CandidateSet
from gpumatch.plan.pricing import Prices, plan_prices
from gpumatch.plan.request import PlanRequest
from gpumatch.units import GIB

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
PSU_HEADROOM = 1.5
"""The seed's rule: a PSU rated at 1.5x the nameplate load of GPUs and host."""
DEFAULT_MEMORY_MARGIN = 0.05
"""Fraction of each GPU's memory kept free for framework temporaries, fragmentation and request bursts."""

# (code, group title); index 0 is "passes".
RULES: tuple[tuple[str, str], ...] = (
    ("ok", "passes"),
    ("excluded", "not considered (--gpu / --exclude, or the workload's gpus.allow / gpus.deny)"),
    ("precision", "precision not supported by the architecture"),
    ("heads", "tensor parallel does not divide the attention heads"),
    ("layers", "more pipeline stages than layers"),
    ("consumer", "consumer card in a multi-node or 24x7 role"),
    ("cooling", "cooling: passive card in a desk-side box"),
    ("power", "over the power budget per node"),
    ("psu", "PSU headroom below the 1.5x rule"),
    ("budget", "over the purchase budget"),
    ("memory", "does not fit in GPU memory"),
    ("ttft", "SLO unreachable: time to first token"),
    ("tpot", "SLO unreachable: time per output token"),
    ("throughput", "SLO unreachable: tokens per second"),
    ("deadline", "deadline unreachable: training too slow"),
)
CODE = {name: i for i, (name, _) in enumerate(RULES)}


@dataclass(frozen=True)
class GpuFacts:
    """Per-GPU arrays the rules need (index = GPU table position)."""

    specs: tuple[GpuSpec, ...]
    tdp_w: npt.NDArray[np.float64]
    purchase_usd: npt.NDArray[np.float64]
    consumer: BoolArray
    passive: BoolArray
    p2p: BoolArray
    nvlink_domain: npt.NDArray[np.float64]
    fp8: BoolArray
    allowed: BoolArray
    prices: Prices


def gpu_facts(req: PlanRequest, specs: tuple[GpuSpec, ...], nvlink_domain: npt.NDArray[np.float64]) -> GpuFacts:
    """``purchase_usd``: the purchase price per card the budget rule uses, by the one price rule
    (:func:`gpumatch.catalog.prices.select_price`: median of sellers' newest list or street quotes) or the
    workload's ``purchase_usd_per_gpu``; NaN where neither exists. ``prices``: every price of the plan."""
    prices = plan_prices(req, specs)

    allowed = np.array([(not req.gpus_allow or g.name in req.gpus_allow) and g.name not in req.gpus_deny
                        for g in specs])
    return GpuFacts(
        specs=specs,
        tdp_w=np.array([g.tdp_w for g in specs]),
        purchase_usd=prices.purchase,
        prices=prices,
        consumer=np.array([g.segment == "consumer" for g in specs]),
        passive=np.array([g.cooling == "passive" for g in specs]),
        p2p=np.array([g.pcie_p2p for g in specs]),
        nvlink_domain=nvlink_domain,
        fp8=np.array([g.peak("fp8") is not None for g in specs]),
        allowed=allowed,
    )


def node_power_w(req: PlanRequest, facts: GpuFacts, cs: CandidateSet) -> npt.NDArray[np.float64]:
    """Nameplate watts of the fullest node: GPUs at TDP plus the host's share per GPU (Site)."""
    per_node = np.minimum(cs.count, req.gpus_per_node)
    out: npt.NDArray[np.float64] = per_node * (facts.tdp_w[cs.gpu] + req.site.host_power_w_per_gpu)
    return out


def structural(req: PlanRequest, facts: GpuFacts, cs: CandidateSet, supported: BoolArray) -> IntArray:
    """First failing pre-estimate rule per candidate (0 = passes). ``supported``: the GPU computes the precision."""
    arch = req.model
    kv_ok = (cs.tp % arch.kv_heads == 0) | (arch.kv_heads % cs.tp == 0)
    multi_node = cs.count > req.gpus_per_node
    checks: list[tuple[str, Any]] = [
        ("excluded", ~facts.allowed[cs.gpu]),
        ("precision", ~supported),
        ("heads", (arch.heads % cs.tp != 0) | ~kv_ok),
        ("layers", cs.pp > arch.layers),
        ("consumer", facts.consumer[cs.gpu] & (multi_node | req.always_on)),
        ("cooling", facts.passive[cs.gpu] & req.desk_side),
    ]
    watts = node_power_w(req, facts, cs)
    if req.w_per_node:
        checks.append(("power", watts > req.w_per_node))
    if req.psu_w:
        checks.append(("psu", watts * PSU_HEADROOM > req.psu_w))
    if req.budget_usd:
        # A card without a purchase price is kept, not rejected: flags() marks it "price unknown" (README).
        cost = cs.count * facts.purchase_usd[cs.gpu]
        checks.append(("budget", cost > req.budget_usd))
    return _first(checks, len(cs))


def measured(req: PlanRequest, cs: CandidateSet, est: dict[str, Any], margin: float, mode: str = "static") -> IntArray:
    """First failing post-estimate rule: memory (with the margin), TTFT, TPOT, tokens/s, deadline.

    ``mode``: ``static`` checks the static-batch figures (TTFT p50 = one prompt alone, p99 = the prefill of the
    whole batch); for a serving engine, ``prefilter`` checks the static figures only for what the engine cannot
    beat (memory of the whole batch, and TTFT p50 against one prompt on an idle replica, which the engine's TTFT
    includes), and ``engine`` checks its steady state (TTFT and TPOT means against the p50 target, else the p99
    one; tokens/s).
    """
    usable = est["capacity_bytes"] * (1.0 - margin)
    checks: list[tuple[str, Any]] = [("memory", est["total_bytes"] > usable)]
    if "tokens_per_s" in est:
        if not req.training:
            ttft50, ttft99 = ttft_s(est, cs)
            ttft_target = req.ttft_p50_s or req.ttft_p99_s
            tpot_target = req.tpot_p50_s or req.tpot_p99_s
            if mode == "engine":
                if ttft_target:
                    checks.append(("ttft", ttft50 > ttft_target))
            else:
                if req.ttft_p50_s:
                    checks.append(("ttft", ttft50 > req.ttft_p50_s))
                if req.ttft_p99_s and mode == "static":
                    checks.append(("ttft", ttft99 > req.ttft_p99_s))
            if tpot_target and mode != "prefilter":
                checks.append(("tpot", est["tpot_s"] > tpot_target))
        need = req.required_tokens_per_s
        if need and mode != "prefilter":
            checks.append(("deadline" if req.training else "throughput", est["tokens_per_s"] < need))
    return _first(checks, len(cs))


def ttft_s(est: dict[str, Any], cs: CandidateSet) -> tuple[Any, Any]:
    """(p50, p99) time to first token: the estimator's ``ttft_s`` (static model: one prompt's prefill on an idle
    replica, as ``gpumatch estimate`` reports it; engine: the steady-state mean) and the prefill of a replica's
    whole batch (a burst arriving together; the static model's p99 stand-in)."""
    return est["ttft_s"], est["prefill_s"]


def _first(checks: list[tuple[str, Any]], n: int) -> IntArray:
    code = np.zeros(n, dtype=np.int64)
    for name, bad in reversed(checks):
        code = np.where(np.broadcast_to(bad, (n,)), CODE[name], code)
    return code


def describe(code: int, req: PlanRequest, facts: GpuFacts, cs: CandidateSet, i: int, est: dict[str, Any],
             margin: float) -> str:
    """One sentence for candidate ``i`` of ``cs`` rejected by rule ``code`` (``est`` may be empty before estimates)."""
    g = facts.specs[int(cs.gpu[i])]
    name = RULES[code][0]
    mit = cs.mitigations[int(cs.mit[i])]
    tp, n = int(cs.tp[i]), int(cs.count[i])
    a = req.model
    if name == "excluded":
        return req.exclusion(g.name)
    if name == "precision":
        arch_text = g.architecture + (f", compute capability {g.compute_capability}" if g.compute_capability else "")
        arch_text = "" if arch_text == g.name else f" ({arch_text})"
        need = "; FP8 needs Ada (sm_89), Hopper (sm_90) or newer" if mit.precision == "fp8" else ""
        return f"{g.name}{arch_text} has no {mit.precision.upper()} tensor path in the catalog{need}"
    if name == "heads":
        return (f"TP={tp} does not divide {a.name}'s {a.heads} attention heads and {a.kv_heads} KV heads; "
                "use TP 1, 2, 4 or 8")
    if name == "layers":
        return f"PP={int(cs.pp[i])} exceeds the {a.layers} layers of {a.name}"
    if name == "consumer":
        why = f"{n} GPUs span nodes" if n > req.gpus_per_node else "a 24x7 serving role"
        return (f"{g.name} is a consumer card in {why}: no ECC, open-air cooler and {g.form_factor} form "
                "factor, no remote management; use a datacenter card")
    if name == "cooling":
        return (f"{g.name} is passively cooled ({g.form_factor}) and needs server airflow; this is a desk-side box "
                f"(PSU {req.psu_w:.0f} W)")
    watts = float(node_power_w(req, facts, cs.take(np.array([i])))[0])
    per = min(n, req.gpus_per_node)
    load = f"{per} × {g.tdp_w:.0f} W TDP + {per} × {req.site.host_power_w_per_gpu:.0f} W host = {watts:.0f} W"
    if name == "power":
        return f"node draws {load} at nameplate, over the {req.w_per_node:.0f} W per node"
    if name == "psu":
        return f"PSU {req.psu_w:.0f} W < 1.5 × ({load}) = {watts * PSU_HEADROOM:.0f} W (seed's 1.5x headroom rule)"
    if name == "budget":
        unit = float(facts.purchase_usd[int(cs.gpu[i])])
        return (f"{n} × ${unit:,.0f} (purchase price: median of sellers) = ${n * unit:,.0f} exceeds the "
                f"${req.budget_usd:,.0f} purchase budget")
    return _describe_measured(name, req, cs, i, est, margin)


def _describe_measured(name: str, req: PlanRequest, cs: CandidateSet, i: int, est: dict[str, Any],
                       margin: float) -> str:
    if name == "memory":
        need, cap = est["total_bytes"][i] / GIB, est["capacity_bytes"][i] / GIB
        usable = cap * (1.0 - margin)
        short = need - usable
        short_text = f"{short:.1f} GiB" if short >= 0.1 else f"{short * 1024:.0f} MiB"
        return (f"needs {need:.1f} GiB per GPU, has {cap:.1f} GiB ({usable:.1f} GiB after a {margin:.0%} margin): "
                f"short by {short_text}")
    engine = req.serving_engine
    steady = engine != "static" and bool(np.asarray(est.get("engine_evaluated", np.zeros(len(cs))))[i])
    if name == "ttft":
        p50, p99 = ttft_s(est, cs)
        if steady:
            return (f"time to first token {p50[i] * 1e3:.0f} ms ({engine} steady state, mean) > target "
                    f"{_ms(req.ttft_p50_s or req.ttft_p99_s)}")
        if engine != "static":
            return (f"time to first token {p50[i] * 1e3:.0f} ms for one prompt on an idle replica (before any "
                    f"queueing in {engine}) > target p50 {_ms(req.ttft_p50_s)}")
        return (f"time to first token {p50[i] * 1e3:.0f} ms (one prompt) / {p99[i] * 1e3:.0f} ms (whole batch) "
                f"vs target p50 {_ms(req.ttft_p50_s)} / p99 {_ms(req.ttft_p99_s)}")
    if name == "tpot":
        target = req.tpot_p50_s or req.tpot_p99_s or 0.0
        where = f" ({engine} steady state)" if steady else ""
        return f"time per output token {est['tpot_s'][i] * 1e3:.1f} ms{where} > target {target * 1e3:.0f} ms"
    need = req.required_tokens_per_s or 0.0
    have = est["tokens_per_s"][i]
    if name == "deadline":
        if not (req.train_tokens and req.deadline_s):
            return f"{have:,.0f} tokens/s < target {need:,.0f}"
        took, limit = _apart(req.train_tokens / have / 3600, req.deadline_s / 3600)
        return (f"{have:,.0f} tokens/s needs {took} h for {req.train_tokens:.3g} tokens; deadline {limit} h "
                f"({need:,.0f} tokens/s; {need / have - 1:.1%} short)")
    return f"{have:,.0f} generated tokens/s < target {need:,.0f}"


def _apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest decimals (0-3) that do not print them equal ("168.4" vs "168", not both
    "168"), so a shortfall never reads as "needs 168 h, deadline 168 h"."""
    for digits in range(4):
        x, y = f"{a:,.{digits}f}", f"{b:,.{digits}f}"
        if x != y:
            return x, f"{b:,.0f}" if b == round(b) else y
    return f"{a:,.3f}", f"{b:,.3f}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.0f} ms"


def flags(req: PlanRequest, facts: GpuFacts, cs: CandidateSet, i: int, est: dict[str, Any]) -> list[str]:
    """Warnings for a kept candidate: PCIe-only TP (with the predicted efficiency), quality risks, prices."""
    g = facts.specs[int(cs.gpu[i])]
    gi, tp, n = int(cs.gpu[i]), int(cs.tp[i]), int(cs.count[i])
    mit = cs.mitigations[int(cs.mit[i])]
    eff = float(est["scaling_efficiency"][i]) if "scaling_efficiency" in est else float("nan")
    out = []
    over_pcie = n > 1 and facts.nvlink_domain[gi] < min(n, req.gpus_per_node)
    if over_pcie and not facts.p2p[gi]:
        what = f"TP={tp}" if tp > 1 else "gradient/activation traffic"
        out.append(f"{what} over PCIe without peer-to-peer (every transfer bounces through host memory): "
                   f"predicted scaling efficiency {eff:.0%}")
    elif over_pcie and tp > 1:
        out.append(f"TP={tp} over PCIe (no NVLink): predicted scaling efficiency {eff:.0%}")
    if mit.precision in ("int4", "int8", "fp8") and not req.training:
        out.append(f"{mit.precision} weights: verify quality on representative prompts before relying on it")
    if mit.qlora:
        out.append("4-bit base (QLoRA): slower steps than a 16-bit base; check final quality")
    if mit.precision == "fp8" and req.training:
        out.append("fp8 training (scaled fp8 matmuls): compare loss curves against bf16 before committing")
    if g.vendor != "nvidia":
        stack = "ROCm" if g.vendor == "amd" else f"the {g.vendor} software stack"
        out.append(f"{stack}: confirm the framework, kernels and parallelism library you use run on it")
    if req.budget_usd and np.isnan(facts.purchase_usd[gi]):
        out.append(f"price unknown: check the budget yourself (no purchase price for {g.name}; {n} card{'s' * (n > 1)} "
                   f"not checked against the ${req.budget_usd:,.0f} budget; give money.purchase_usd_per_gpu)")
    if facts.consumer[gi] and min(n, req.gpus_per_node) >= 4:
        out.append(f"{min(n, req.gpus_per_node)} open-air {g.form_factor}s in one chassis need risers or blower "
                   "editions")
    return out
