"""Roles of the shortlist (the seed's four plus two serving roles), their weights and how a score is made.

Seed: "最终短名单通常不会只有一个冠军，而会形成几种角色：开发验证卡、单机训练卡、低功耗推理卡和集群训练卡。
每种角色使用不同权重评分" -- the shortlist has roles, each scored with its own weights, so that peak FLOPS does not
outweigh capacity, reliability and upkeep.

A score is ``100 × Σ w_t · s_t / Σ w_t`` over the terms of :data:`gpumatch.workload.SCORE_TERMS`, each
``s_t`` in [0, 1]:

- throughput, latency, cost, energy are relative to the best candidate in the role's pool, on a log scale:
  ``1 + log10(x / best)`` (higher-better; inverted for lower-better), clipped to [0, 1] -- the best gets 1,
  a candidate 2x worse 0.7, 10x worse 0;
- memory_headroom: free fraction of GPU memory after the estimate, full marks at 30 %;
- scaling: the predicted scaling efficiency (1 on one GPU);
- reliability: 1.0 datacenter card with ECC, 0.7 workstation card with ECC, 0.3 consumer card (no ECC, open-air
  cooler, desktop form factor);
- ecosystem: support risk from the software stack (assumed): NVIDIA compute capability 8.9-9.x 1.0 (FlashAttention,
  bf16 and FP8 paths, every major framework); 8.0-8.6 0.9 (no FP8: FP8 recipes cannot be validated); 10.x/12.x
  0.85 (Blackwell: wheels and kernels still catching up); 7.x 0.5 (no bf16, no FlashAttention-2); AMD ROCm 0.6;
  Intel Gaudi 0.4 (its own software stack and graph compiler).

A candidate whose cost is unknown (its card has no quote on the plan's price basis, e.g. "no on-demand quote") is
neither pushed down nor lifted by it (:func:`impute_cost`): its cost term is the median cost term of the priced
candidates of the pool, i.e. it is ranked as if it cost what a typical candidate costs, and everything else decides.
(The old rule gave it 0, so a card lost a role for lacking a quote. Dropping the cost weight and renormalising
the others, the other fair rule, lifts it instead: on the examples an unpriced H200 NVL then beat every priced
card, because only the cheapest priced card scores 1 on cost while the unpriced one is implicitly as cheap as it
is good.) When no candidate of the pool is priced, the cost weight is dropped for all. The plan marks every
unpriced candidate ("no on-demand quote") so a reader knows its cost was not compared.

Mitigations the planner adds that change the numerics carry a risk the estimate cannot see (quality, convergence),
so the score is multiplied by ``1 − risk``: int4 weights 0.15, int8 0.08, fp8 weights 0.05, fp8 KV cache 0.03,
4-bit QLoRA base 0.08, fp8 training 0.10 (assumed). The seed fixes the numerics first and chooses the hardware
after ("先固定可接受的数值方案，再选择对应指标"), so a precision change must buy a clear gain to win.
A mitigation the request already asked for carries no risk. The development role counts the risk five times: a
development box exists to run the model as it will run elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumatch.catalog import GpuSpec
from gpumatch.plan.enumeration import kv_as_written
from gpumatch.plan.request import PlanRequest
from gpumatch.workload import SCORE_TERMS

FloatArray = npt.NDArray[np.float64]
LOW_POWER_TDP_W = 165.0
"""Board power of the low-power inference class (single-slot 60-150 W cards: L4 72 W, T4 70 W, A10 150 W)."""
HEADROOM_FULL_MARKS = 0.30


@dataclass(frozen=True)
class Role:
    """A shortlist role: who it is for, when it applies, which candidates it admits, its weights."""

    name: str
    title: str
    weights: dict[str, float]
    applies: Callable[[PlanRequest], bool]
    admits: Callable[[PlanRequest, npt.NDArray[np.int64], FloatArray], npt.NDArray[np.bool_]]
    """(request, counts, per-card TDP in W) -> which candidates the role considers."""
    risk_scale: float = 1.0


def _w(**kw: float) -> dict[str, float]:
    return {t: kw.get(t, 0.0) for t in SCORE_TERMS}


def _inference(req: PlanRequest) -> bool:
    return not req.training and not req.dev


ROLES: tuple[Role, ...] = (
    Role("dev", "development / validation card",
         _w(throughput=0.5, cost=2.0, energy=0.5, memory_headroom=2.0, reliability=0.5, ecosystem=2.0),
         lambda r: r.dev, lambda r, n, w: n == 1, 5.0),
    Role("single-node-training", "single-node training card",
         _w(throughput=2.0, latency=1.0, cost=2.0, energy=0.5, memory_headroom=1.0, scaling=1.0, reliability=1.0,
            ecosystem=1.0),
         lambda r: r.training, lambda r, n, w: n <= r.gpus_per_node),
    Role("cluster-training", "cluster training card",
         _w(throughput=2.0, latency=1.0, cost=2.0, energy=1.0, memory_headroom=0.5, scaling=2.0, reliability=2.0,
            ecosystem=1.0),
         lambda r: r.training and r.max_gpus > r.gpus_per_node, lambda r, n, w: n > r.gpus_per_node),
    Role("low-power-inference", "low-power inference card",
         _w(throughput=0.5, latency=0.5, cost=1.0, energy=3.0, memory_headroom=0.5, scaling=0.5, reliability=1.0,
            ecosystem=1.0),
         _inference, lambda r, n, w: w <= LOW_POWER_TDP_W),
    Role("latency-serving", "latency-bound serving",
         _w(throughput=0.5, latency=3.0, cost=2.0, energy=0.5, memory_headroom=1.0, scaling=1.0, reliability=1.5,
            ecosystem=1.0),
         lambda r: _inference(r) and (r.task == "serve" or bool(r.ttft_p50_s or r.ttft_p99_s or r.tpot_p50_s
                                                                  or r.tpot_p99_s)),
         lambda r, n, w: np.ones(n.shape, dtype=bool)),
    Role("throughput-serving", "throughput-bound serving / batch inference",
         _w(throughput=3.0, latency=0.5, cost=2.0, energy=1.0, memory_headroom=1.0, scaling=0.5, reliability=1.0,
            ecosystem=1.0),
         _inference, lambda r, n, w: np.ones(n.shape, dtype=bool)),
)
ROLE_BY_NAME = {r.name: r for r in ROLES}


def applicable(req: PlanRequest) -> tuple[Role, ...]:
    """The roles this request's task asks for, weights merged with the workload's overrides."""
    out = []
    for role in ROLES:
        if role.applies(req):
            merged = dict(role.weights)
            merged.update(req.role_weights.get(role.name, {}))
            out.append(Role(role.name, role.title, merged, role.applies, role.admits, role.risk_scale))
    return tuple(out)


def reliability(g: GpuSpec) -> float:
    if g.segment == "consumer" or not g.ecc:
        return 0.3
    return 0.7 if g.segment == "workstation" else 1.0


def ecosystem(g: GpuSpec) -> float:
    if g.vendor == "amd":
        return 0.6
    if g.vendor != "nvidia":
        return 0.4
    cc = float(g.compute_capability or "0")
    if cc >= 10.0:
        return 0.85
    if cc >= 8.9:
        return 1.0
    return 0.9 if cc >= 8.0 else 0.5


def relative(x: FloatArray, higher_better: bool) -> FloatArray:
    """Log-scale closeness to the pool's best (module docstring); NaN/inf/non-positive -> 0."""
    ok = np.isfinite(x) & (x > 0)
    out = np.zeros(x.shape)
    if not ok.any():
        return out
    best = x[ok].max() if higher_better else x[ok].min()
    ratio = x[ok] / best if higher_better else best / x[ok]
    out[ok] = np.clip(1.0 + np.log10(ratio), 0.0, 1.0)
    return out


def term_values(metrics: dict[str, FloatArray], rel: FloatArray, eco: FloatArray) -> dict[str, FloatArray]:
    """Each term's [0, 1] value for the pool ``metrics`` (throughput, latency, cost, energy, headroom, scaling)."""
    headroom = 1.0 - metrics["total_bytes"] / metrics["capacity_bytes"]
    return {
        "throughput": relative(metrics["tokens_per_s"], True),
        "latency": relative(metrics["latency_s"], False),
        "cost": relative(metrics["usd_per_million_tokens"], False),
        "energy": relative(metrics["energy_j_per_token_facility"], False),
        "memory_headroom": np.clip(np.nan_to_num(headroom) / HEADROOM_FULL_MARKS, 0.0, 1.0),
        "scaling": np.clip(np.nan_to_num(metrics["scaling_efficiency"]), 0.0, 1.0),
        "reliability": rel,
        "ecosystem": eco,
    }


def impute_cost(terms: dict[str, FloatArray], priced: npt.NDArray[np.bool_]) -> dict[str, FloatArray]:
    """``terms`` with the cost term of unpriced candidates set to the median cost term of the priced ones (module
    docstring); unchanged when every candidate is priced or none is (then :func:`score` drops the weight)."""
    if priced.all() or not priced.any():
        return terms
    cost = terms["cost"].copy()
    cost[~priced] = float(np.median(cost[priced]))
    return {**terms, "cost": cost}


def score(weights: dict[str, float], terms: dict[str, FloatArray],
          priced: npt.NDArray[np.bool_] | None = None) -> FloatArray:
    """``100 × Σ w·s / Σ w`` (0 when every weight is 0). Where ``priced`` is False the cost term and its weight
    are left out of both sums; the planner calls it so only when no candidate of the pool is priced (otherwise it
    imputes the term first, :func:`impute_cost`)."""
    n = next(iter(terms.values())).shape
    known = np.ones(n, dtype=bool) if priced is None else np.broadcast_to(priced, n)
    acc = np.zeros(n)
    total = np.zeros(n)
    for t, w in weights.items():
        if w:
            use = known if t == "cost" else np.ones(n, dtype=bool)
            acc = acc + np.where(use, w * terms[t], 0.0)
            total = total + np.where(use, w, 0.0)
    out: FloatArray = np.where(total > 0, 100.0 * acc / np.where(total > 0, total, 1.0), 0.0)
    return out


MITIGATION_RISK = {"int4": 0.15, "int8": 0.08, "fp8": 0.05, "kv-fp8": 0.03, "qlora": 0.08, "fp8-training": 0.10}


def mitigation_risk(req: PlanRequest, precision: str, kv_precision: str | None, qlora: bool) -> float:
    """Risk fraction of the numerics-changing mitigations not asked for by the request (module docstring)."""
    risk = 0.0
    if qlora:
        risk += MITIGATION_RISK["qlora"]
    elif precision != req.precision:
        key = "fp8-training" if req.training and precision == "fp8" else precision
        risk += MITIGATION_RISK.get(key, 0.0)
    if kv_precision and kv_precision != kv_as_written(req) and kv_precision == "fp8":
        risk += MITIGATION_RISK["kv-fp8"]
    return risk
