"""``plan(workload or request) -> Plan``: the shortlist by role, the rejected candidates and their reasons.

Order of work (the seed's order of decision): enumerate every SKU × count × layout × mitigation × micro-batch;
reject on structure, precision support, power, cooling and money without estimating; estimate memory for the
rest and reject what does not fit (with the margin); estimate time, power and cost for what fits and reject
what misses the targets; score the survivors per role and keep the best configuration per GPU model.

Unrequested numerics (design choice): a precision or KV-cache format the request did not ask for costs a stated
risk fraction of the score (:mod:`gpumatch.plan.roles`), but it can still win on speed, memory and cost, e.g. int4
over fp16 for a 70B model that fits as written. Rather than raise the risks until the request as written always
wins (which would hide real gains and re-tune every role), a role whose shown entries all change the numerics also
carries ``as_requested``: its best feasible candidate in the precision as requested (None when there is none), so
the user sees what keeping the numerics costs. Recompute, offload and gradient accumulation do not change the
numerics and count as "as requested".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.catalog import GpuSpec, load_catalog
from gpumatch.errors import InputError
from gpumatch.estimate import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.options import SCALEUP_DOMAIN
from gpumatch.estimate.precision import WEIGHT_PRECISIONS
from gpumatch.estimate.vectorized import GpuTable, gpu_table
from gpumatch.plan import explain, metrics, pricing, rejections, rules, search, served
from gpumatch.plan.entries import add_intervals
from gpumatch.plan.entries import entry as make_entry
from gpumatch.plan.enumeration import TP_DEGREES, CandidateSet, enumerate_candidates
from gpumatch.plan.request import PlanRequest, from_workload
from gpumatch.plan.roles import (
    Role,
    applicable,
    ecosystem,
    impute_cost,
    mitigation_risk,
    reliability,
    score,
    term_values,
)
from gpumatch.workload import Workload

FloatArray = npt.NDArray[np.float64]
"""Rules whose outcome depends on the precision: their rejected groups are split by it."""


@dataclass(frozen=True)
class Plan:
    """A plan: ``shortlist`` role -> ranked entries; ``rejected`` groups (gpu, count, reason, ...)."""

    request: dict[str, Any]
    roles: dict[str, str]
    shortlist: dict[str, list[dict[str, Any]]]
    rejected: list[dict[str, Any]]
    candidates_evaluated: int
    candidates_estimated: int
    feasible: int
    elapsed_s: float
    basis: str
    notes: tuple[str, ...] = field(default=())
    as_requested: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    not_evaluated: int = 0
    """Serving at an engine: configurations that passed the static checks but were not evaluated at the engine's
    steady state (:mod:`gpumatch.plan.served`), so neither ranked nor rejected; 0 otherwise."""
    price_basis: dict[str, Any] = field(default_factory=dict)
    """The price basis every candidate used (:func:`gpumatch.plan.metrics.price_summary`): basis, rule, quote
    months, the GPU models without a price on it, and with a budget those without a purchase price."""
    """Per role whose shown entries all change the numerics: the best candidate in the precision as requested
    (None: none is feasible), so an unrequested int4/fp8 pick never hides that the request fits as written."""

    def to_dict(self) -> dict[str, Any]:
        """JSON contract of ``gpumatch plan --format json`` (issue 5) plus request, roles and counts."""
        return {
            "request": self.request,
            "roles": dict(self.roles),
            "shortlist": {k: list(v) for k, v in self.shortlist.items()},
            "rejected": list(self.rejected),
            "candidates_evaluated": self.candidates_evaluated,
            "candidates_estimated": self.candidates_estimated,
            "feasible": self.feasible,
            "not_evaluated": self.not_evaluated,
            "elapsed_s": self.elapsed_s,
            "basis": self.basis,
            "notes": list(self.notes),
            "as_requested": dict(self.as_requested),
            "price_basis": dict(self.price_basis),
        }


def plan(
    what: Workload | PlanRequest,
    *,
    top: int = 3,
    roles: Sequence[str] | None = None,
    gpus: Sequence[GpuSpec] | None = None,
    calibration: Calibration | None = None,
    margin: float = rules.DEFAULT_MEMORY_MARGIN,
    progress: search.Progress | None = None,
) -> Plan:
    """Plan ``what``. ``roles`` limits the roles shown; ``gpus`` replaces the catalog; ``margin`` is the fraction
    of GPU memory kept free; ``progress(phase, done, total)`` is called as the estimate passes advance. The
    library neither prints nor exits; errors are :class:`GpumatchError` (a search larger than
    :data:`gpumatch.plan.search.MAX_CANDIDATES` is refused before anything is allocated)."""
    t0 = time.perf_counter()
    req = what if isinstance(what, PlanRequest) else from_workload(what)
    cal = calibration or DEFAULT_CALIBRATION
    specs = tuple(gpus) if gpus is not None else load_catalog().gpus
    table = _table(specs)
    domain = np.array([SCALEUP_DOMAIN.get(g.scale_up, 1.0) for g in specs])
    facts = rules.gpu_facts(req, specs, domain)
    prices = facts.prices
    check_pins(req)
    search.check_size(req, facts.allowed)
    cs = enumerate_candidates(req, len(specs), facts.allowed)
    if not len(cs):
        raise InputError(f"no GPU count up to {req.max_gpus} ({req.gpus_per_node} per node) takes "
                         f"{_pins(req)}", "raise --max-gpus, change --gpus-per-node, or drop --tp/--pp")
    code = rules.structural(req, facts, cs, _supported(cs, table))
    est: dict[str, FloatArray] = {"total_bytes": np.full(len(cs), np.nan), "capacity_bytes": np.full(len(cs), np.nan)}
    idx = np.flatnonzero(code == 0)
    for part in search.chunks(idx.size):
        sub = idx[part]
        mem = metrics.memory(req, table, cs.take(sub), prices, cal)
        for k, v in mem.items():
            est[k][sub] = v
        code[sub] = rules.measured(req, cs.take(sub), mem, margin)
        _report(progress, "memory", int(part[-1]) + 1 if part.size else 0, idx.size)
    fit = idx[code[idx] == 0]
    engine = req.serving_engine != "static"
    parts = []
    for part in search.chunks(fit.size):
        sub = fit[part]
        one = metrics.performance(req, table, cs.take(sub), prices, req.site, cal)
        one["ttft_p50_s"] = rules.ttft_s(one, cs.take(sub))[0] if not req.training else np.full(sub.size, np.nan)
        code[sub] = rules.measured(req, cs.take(sub), one, margin, mode="prefilter" if engine else "static")
        parts.append(one)
        _report(progress, "speed and cost", int(part[-1]) + 1 if part.size else 0, fit.size)
    perf = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    ok = code[fit] == 0
    feasible, fperf = fit[ok], {k: v[ok] for k, v in perf.items()}
    chosen = _roles(req, roles)
    failed = {**{k: np.full(len(cs), np.nan) for k in perf}, **est, "engine_evaluated": np.zeros(len(cs))}
    for k, v in perf.items():
        failed[k][fit] = v
    engine_notes: tuple[str, ...] = ()
    skipped = 0
    if engine and feasible.size:
        fsub = cs.take(feasible)
        plain = np.array([mitigation_risk(req, m.precision, m.kv_precision, m.qlora) == 0.0
                          for m in cs.mitigations])[fsub.mit]
        ep = served.run(req, chosen, lambda r: _static_order(req, r, facts, fsub, fperf), table, cs, feasible,
                        prices, cal, margin, plain)
        skipped = int(feasible.size - ep.evaluated)
        lost = feasible[ep.failed]
        code[lost] = ep.codes
        for k, v in ep.failed_perf.items():
            failed[k][lost] = v
        failed["engine_evaluated"][lost] = 1.0
        engine_notes = (served.note(req, int(feasible.size), ep),)
        feasible, fperf = feasible[ep.ok], ep.perf
    ranked = {r.name: _rank(req, r, facts, cs, feasible, fperf, top) for r in chosen}
    shortlist = {name: v[0] for name, v in ranked.items()}
    as_requested = {name: v[1] for name, v in ranked.items() if v[2]}
    shown = [*(e for v in shortlist.values() for e in v), *(a for a in as_requested.values() if a is not None)]
    add_intervals(req, shown, cal)
    if engine:
        served.add_goodput(req, shown, {g.name: g for g in specs}, cal)
    rejected = rejections.grouped(req, facts, cs, code, failed, margin)
    price_info = pricing.price_summary(req, prices, [i for i, ok in enumerate(facts.allowed) if ok])
    return Plan(
        request=_request_dict(req),
        roles={r.name: r.title for r in chosen},
        shortlist=shortlist,
        rejected=rejected,
        as_requested=as_requested,
        candidates_evaluated=len(cs),
        candidates_estimated=int(idx.size),
        feasible=int(feasible.size),
        not_evaluated=skipped,
        elapsed_s=time.perf_counter() - t0,
        basis=cal.basis,
        notes=engine_notes + _notes(req, shortlist, chosen, bool(rejected)) + _price_notes(price_info)
        + tuple(n for n in (search.pruned_note(req),) if n),
        price_basis=price_info,
    )


def _report(progress: search.Progress | None, phase: str, done: int, total: int) -> None:
    if progress is not None:
        progress(phase, done, total)


def check_pins(req: PlanRequest) -> None:
    """A pinned TP/PP degree the model or the node cannot take is an input error, not a plan with no candidates.

    Same tests as the ``heads``/``layers`` rules (TP divides the attention heads, and divides or is a multiple of
    the KV heads; PP at most the layers), plus TP inside one node (see :mod:`gpumatch.plan.enumeration`).
    """
    a, gpn = req.model, req.gpus_per_node
    if req.tp is not None:
        def heads_ok(t: int) -> bool:
            return a.heads % t == 0 and (t % a.kv_heads == 0 or a.kv_heads % t == 0)

        fits = [t for t in TP_DEGREES if heads_ok(t) and gpn % t == 0 and t <= min(gpn, req.max_gpus)]
        hint = f"use --tp {' | '.join(map(str, fits))}" if fits else "leave --tp out"
        if not heads_ok(req.tp):
            raise InputError(f"--tp {req.tp} does not divide the {a.heads} attention heads / {a.kv_heads} KV heads "
                             f"of {a.name}", hint)
        if gpn % req.tp or req.tp > gpn:
            raise InputError(f"--tp {req.tp} does not divide the {gpn} GPUs of a node (tensor parallel stays "
                             "inside a node)", hint + " or change --gpus-per-node")
    if req.pp is not None and req.pp > a.layers:
        raise InputError(f"--pp {req.pp} exceeds the {a.layers} layers of {a.name}", f"use --pp <= {a.layers}")


def _pins(req: PlanRequest) -> str:
    pins = [f"--tp {req.tp}"] * (req.tp is not None) + [f"--pp {req.pp}"] * (req.pp is not None)
    return " with ".join(pins) or "any layout"


_TABLES: dict[tuple[str, ...], GpuTable] = {}


def _table(specs: tuple[GpuSpec, ...]) -> GpuTable:
    key = tuple(f"{g.name}|{g.origin}" for g in specs)
    if key not in _TABLES or _TABLES[key].specs != specs:
        _TABLES[key] = gpu_table(specs)
    return _TABLES[key]


def _supported(cs: CandidateSet, table: GpuTable) -> npt.NDArray[np.bool_]:
    """The GPU has a compute path for the candidate's weight precision (QLoRA's NF4 runs at the 16-bit peak)."""
    names = [("nf4" if m.qlora else m.precision) for m in cs.mitigations]
    peaks = np.stack([table.peaks[p] for p in WEIGHT_PRECISIONS])
    codes = np.array([WEIGHT_PRECISIONS.index(p) for p in names])
    out: npt.NDArray[np.bool_] = np.isfinite(peaks[codes[cs.mit], cs.gpu])
    return out


def _roles(req: PlanRequest, only: Sequence[str] | None) -> tuple[Role, ...]:
    chosen = applicable(req)
    if only:
        names = {r.name for r in chosen}
        bad = [r for r in only if r not in names]
        if bad:
            raise InputError(f"role {bad[0]!r} does not apply to task {req.task!r}",
                             f"use one of {', '.join(sorted(names))}")
        chosen = tuple(r for r in chosen if r.name in only)
    return chosen


Ranked = tuple[list[dict[str, Any]], dict[str, Any] | None, bool]


def _rank(req: PlanRequest, role: Role, facts: rules.GpuFacts, cs: CandidateSet, feasible: npt.NDArray[np.intp],
          perf: dict[str, FloatArray], top: int) -> Ranked:
    """Score the role's pool and keep the best configuration of each GPU model, best first.

    Also: when every shown entry changes the numerics (a precision or KV format the request did not ask for), the
    best candidate as requested (None when none is feasible) and True; else (entries, None, False).
    """
    sub = cs.take(feasible)
    scored = _scored(req, role, facts, sub, perf)
    if scored is None:
        return [], None, False
    pool, pm, s, terms, risk, order = scored
    seen: set[int] = set()
    entries: list[dict[str, Any]] = []
    picked: list[int] = []
    for j in order:
        g = int(sub.gpu[pool[j]])
        if g in seen:
            continue
        seen.add(g)
        picked.append(int(j))
        entries.append(make_entry(req, facts, sub, int(pool[j]), pm, int(j), s, terms))
        if len(entries) > top:
            break
    for k, e in enumerate(entries[:top]):
        e["why"] = explain.why(e, k + 1, req)
        e["flip"] = (explain.flip(e, entries[k + 1], role.weights) if k + 1 < len(entries) else "no runner-up")
        e["experiments"] = explain.experiments(e, req)
    pool_risk = risk[sub.mit[pool]]
    if any(pool_risk[j] == 0.0 for j in picked[:top]):
        return entries[:top], None, False
    plain = order[pool_risk[order] == 0.0]
    if not plain.size:
        return entries[:top], None, True
    alt = make_entry(req, facts, sub, int(pool[plain[0]]), pm, int(plain[0]), s, terms)
    alt["why"] = explain.why(alt, 0, req).split(": ", 1)[1]
    return entries[:top], alt, True


Scored = tuple[npt.NDArray[np.intp], dict[str, FloatArray], FloatArray, dict[str, FloatArray], FloatArray,
               npt.NDArray[np.intp]]


def _scored(req: PlanRequest, role: Role, facts: rules.GpuFacts, sub: CandidateSet,
            perf: dict[str, FloatArray]) -> Scored | None:
    """(pool, its metrics, scores, terms, risk per mitigation, pool order best first) of the role over ``sub``
    (None: the role admits none)."""
    pool = np.flatnonzero(role.admits(req, sub.count, facts.tdp_w[sub.gpu]))
    if not pool.size:
        return None
    pm = {k: v[pool] for k, v in perf.items()}
    pm["latency_s"] = _latency(req, pm)
    rel = np.array([reliability(g) for g in facts.specs])[sub.gpu[pool]]
    eco = np.array([ecosystem(g) for g in facts.specs])[sub.gpu[pool]]
    priced = np.isfinite(pm["usd_per_million_tokens"])  # unknown cost: neither pushed down nor lifted (roles)
    terms = impute_cost(term_values(pm, rel, eco), priced)
    risk = np.array([mitigation_risk(req, m.precision, m.kv_precision, m.qlora) for m in sub.mitigations])
    s = score(role.weights, terms, None if priced.any() else priced)
    s = s * (1.0 - np.minimum(role.risk_scale * risk[sub.mit[pool]], 0.9))
    order = np.lexsort((sub.count[pool], -np.round(s, 9)))
    return pool, pm, s, terms, risk, order


def _static_order(req: PlanRequest, role: Role, facts: rules.GpuFacts, sub: CandidateSet,
                  perf: dict[str, FloatArray]) -> npt.NDArray[np.intp]:
    """The role's pool as positions into ``sub``, best static score first (the engine pass's order)."""
    scored = _scored(req, role, facts, sub, perf)
    if scored is None:
        return np.zeros(0, dtype=np.intp)
    out: npt.NDArray[np.intp] = scored[0][scored[5]]
    return out


def _latency(req: PlanRequest, pm: dict[str, FloatArray]) -> FloatArray:
    """Time to a result: one request's TTFT + gen × TPOT (inference), hours to the token target (training)."""
    if not req.training:
        out: FloatArray = pm["ttft_p50_s"] + req.gen * pm["tpot_s"]
        return out
    tokens = req.train_tokens or 1e9
    latency: FloatArray = tokens / pm["tokens_per_s"]
    return latency


def _request_dict(req: PlanRequest) -> dict[str, Any]:
    d: dict[str, Any] = {k: getattr(req, k) for k in (
        "name", "task", "precision", "kv_precision", "micro_batch", "seq", "prompt", "gen", "max_gpus",
        "gpus_per_node", "w_per_node", "psu_w", "cooling", "budget_usd", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
        "tpot_p99_s", "tokens_per_s", "train_tokens", "deadline_s")}
    d["model"] = req.model.name
    d["dev"] = req.dev
    # each batch concept under its own name, None for the other kind of task
    d["concurrency"] = None if req.training else req.concurrency
    d["global_batch"] = req.global_batch if req.training else None
    return d


def _price_notes(p: dict[str, Any]) -> tuple[str, ...]:
    """Buyer-facing notes: cards whose cost was not compared, cards whose purchase price was not checked."""
    out = []
    if p["unpriced"]:
        out.append(f"{p['mark']} for {', '.join(p['unpriced'])}: ranked on the other terms (cost weight dropped), "
                   "not pushed down; add a quote (price overlay) or your own price (money section) to compare cost")
    if p["budget_unchecked"]:
        out.append(f"price unknown for {', '.join(p['budget_unchecked'])}: kept, but not checked against the "
                   "purchase budget; check the budget yourself or give money.purchase_usd_per_gpu")
    return tuple(out)


def _notes(req: PlanRequest, shortlist: dict[str, list[dict[str, Any]]], chosen: tuple[Role, ...],
           any_rejected: bool) -> tuple[str, ...]:
    out = []
    why = "see the rejected configurations" if any_rejected else "no feasible candidate is within the role's limits"
    for r in chosen:
        if not shortlist.get(r.name):
            out.append(f"no feasible candidate for the {r.title} role: {why}")
    if req.task == "infer" and req.dev:
        out.append("task 'dev' is planned as single-stream inference of the model (load, run, profile)")
    engine = req.serving_engine
    out.append(THROUGHPUT_NOTE[req.training] if req.training or engine == "static" else ENGINE_NOTE.format(engine))
    return tuple(out)


THROUGHPUT_NOTE = {
    True: "tok/s: tokens trained per second over all data-parallel ranks (as 'gpumatch estimate' gives them "
          "for a pick's estimate_options)",
    False: "tok/s: generated tokens/s over all replicas, prefill included; TTFT: one prompt, idle replica "
           "(static batches: 'gpumatch estimate --engine static')",
}
"""What the shortlist's throughput counts, said once per plan."""
ENGINE_NOTE = ("tok/s: generated, all replicas, at {0}'s steady state; TTFT, TPOT: its means per request (as "
               "'gpumatch estimate' gives them)")
