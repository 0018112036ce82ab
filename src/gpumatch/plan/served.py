"""The serving roles at an engine's steady state: the static model pre-ranks, the engine decides.

A continuous-batching engine's figures (:func:`gpumatch.estimate.served.engine_figures`: TTFT with the pass in
flight and any queueing, TPOT with the prompts riding on the passes, the closed-loop rate at the concurrency,
memory of the requests it admits) come from a fixed point per configuration, a scalar computation of about 1-3 ms,
too slow for every candidate of a full-catalog search. So, for task ``serve`` with an engine (vllm unless the
workload's ``[serving] engine`` names another; ``static`` keeps the static-batch plan):

1. the static pass keeps what the engine cannot beat (:func:`gpumatch.plan.rules.measured`, ``prefilter``: the
   memory of the whole batch, and one prompt's prefill on an idle replica against the TTFT p50 target);
2. each role scores its pool on the static figures; per role and GPU model, the candidates are evaluated at the
   engine's steady state in that order until :data:`ENGINE_PICKS` meet the targets at the engine
   (:func:`gpumatch.plan.rules.measured`, ``engine``: TTFT and TPOT means, tokens/s) or :data:`ENGINE_LOOKS`
   were evaluated (a configuration is evaluated once for all roles), and, per role, the best that keep the numerics
   as requested until one meets the targets (at most :data:`ENGINE_LOOKS`), for the plan's "as requested" line;
3. the roles rank only those that met the targets, on the engine's figures; those that missed are rejected with
   the engine's numbers. The rest passed the static checks but were not evaluated: neither ranked nor rejected.

``estimate_options`` of an entry name the engine, so ``gpumatch estimate`` with them gives the entry's figures
(the same function computes both). The shown entries also get their goodput (:func:`add_goodput`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.catalog import GpuSpec
from gpumatch.estimate import Calibration, Request, build_case, model_nums
from gpumatch.estimate.served import engine_figures, engine_state, scalar_case
from gpumatch.estimate.vectorized import GpuTable
from gpumatch.plan import metrics, rules
from gpumatch.plan.enumeration import CandidateSet
from gpumatch.plan.pricing import Prices
from gpumatch.plan.request import PlanRequest
from gpumatch.plan.roles import Role

FloatArray = npt.NDArray[np.float64]
ENGINE_PICKS = 3
"""Configurations per role and GPU model that must meet the targets at the engine's steady state (the shortlist
shows one per GPU model; three let the engine reorder a model's layouts and mitigations)."""
ENGINE_LOOKS = 6
"""At most this many configurations per role and GPU model are evaluated at the engine (static order)."""


@dataclass(frozen=True)
class EnginePass:
    """``ok``: positions (into the static feasible set) that met the targets at the engine; ``perf``: their
    engine figures (the planner's metric keys); ``failed``: positions evaluated that missed, with ``codes``
    (rules) and ``failed_perf``; ``evaluated``: how many were evaluated."""

    ok: npt.NDArray[np.intp]
    perf: dict[str, FloatArray]
    failed: npt.NDArray[np.intp]
    codes: npt.NDArray[np.int64]
    failed_perf: dict[str, FloatArray]
    evaluated: int


def run(req: PlanRequest, roles: Sequence[Role], static_order: Callable[[Role], npt.NDArray[np.intp]],
        table: GpuTable, cs: CandidateSet, feasible: npt.NDArray[np.intp], prices: Prices, cal: Calibration,
        margin: float, plain: npt.NDArray[np.bool_]) -> EnginePass:
    """The engine pass of the module docstring over the static-feasible candidates ``feasible`` (indices into
    ``cs``); ``static_order(role)`` gives a role's pool as positions into ``feasible``, best first; ``plain``
    marks the positions that keep the numerics as requested: per role, the best of them by the static order are
    evaluated too (until one meets the targets, at most :data:`ENGINE_LOOKS`), so the plan can show the best
    candidate as requested beside picks that change the precision."""
    sub = cs.take(feasible)
    case = metrics.build_case(req, table, sub, prices, False)
    m = model_nums(req.model)
    names = [table.specs[int(g)].name for g in sub.gpu]
    rows: dict[int, dict[str, float]] = {}
    code: dict[int, int] = {}

    def check(j: int) -> int:
        if j not in rows:
            out = engine_figures(m, scalar_case(case, j), cal, req.site, req.serving_engine, names[j],
                                 prefix_hit_ratio=req.prefix_hit_ratio)
            metrics.set_price(req, out)
            out["ttft_p50_s"] = out["ttft_s"]
            rows[j] = {k: float(out[k]) for k in (*metrics.KEYS, "ttft_p50_s") if k in out}
            one = {k: np.array([v]) for k, v in rows[j].items()}
            code[j] = int(rules.measured(req, sub.take(np.array([j])), one, margin, mode="engine")[0])
        return code[j]

    for role in roles:
        met: dict[int, int] = {}
        seen: dict[int, int] = {}
        order = static_order(role)
        for j in order:
            g = int(sub.gpu[j])
            if met.get(g, 0) >= ENGINE_PICKS or seen.get(g, 0) >= ENGINE_LOOKS:
                continue
            seen[g] = seen.get(g, 0) + 1
            met[g] = met.get(g, 0) + (check(int(j)) == 0)
        for j in order[plain[order]][:ENGINE_LOOKS]:
            if check(int(j)) == 0:
                break
    done = np.array(sorted(rows), dtype=np.intp)
    passed = np.array([code[j] == 0 for j in done], dtype=bool)
    return EnginePass(ok=done[passed], perf=_stack(rows, done[passed]), failed=done[~passed],
                      codes=np.array([code[j] for j in done[~passed]], dtype=np.int64),
                      failed_perf=_stack(rows, done[~passed]), evaluated=int(done.size))


def add_goodput(req: PlanRequest, entries: Sequence[dict[str, Any]], specs: dict[str, GpuSpec],
                cal: Calibration) -> None:
    """Give each shown entry its goodput: the highest open-loop (Poisson) request rate whose mean TTFT and TPOT at
    the engine meet the targets (p50, else p99), over all replicas, as ``goodput_requests_per_s`` and
    ``goodput_tokens_per_s`` in its ``estimate``; its ``estimate_options`` get the targets (``slo_ttft_s``,
    ``slo_tpot_s``), so ``gpumatch estimate`` with them reports the same goodput. About 20 ms each (a bisection
    over the open-loop fixed point), hence for the shown entries only, not for ranking. No targets: nothing."""
    targets = (req.ttft_p50_s or req.ttft_p99_s, req.tpot_p50_s or req.tpot_p99_s)
    if not any(t is not None for t in targets):
        return
    m = model_nums(req.model)
    done: dict[tuple[Any, ...], float | None] = {}  # an entry shown in several roles is computed once
    for e in entries:
        opts = dict(e["estimate_options"])
        opts.update({k: v for k, v in zip(("slo_ttft_s", "slo_tpot_s"), targets, strict=True) if v is not None})
        e["estimate_options"] = opts
        key = (e["gpu"], *sorted(opts.items()))
        if key not in done:
            case, _ = build_case(req.model, specs[e["gpu"]], Request(**opts))
            sv, _, _ = engine_state(m, case, cal, req.serving_engine, e["gpu"], targets=targets,
                                    prefix_hit_ratio=req.prefix_hit_ratio)
            rate = None if sv is None else sv.goodput_requests_per_s
            done[key] = None if rate is None else rate * float(case.dp)
        good = done[key]
        e["estimate"]["goodput_requests_per_s"] = good
        e["estimate"]["goodput_tokens_per_s"] = None if good is None else good * req.gen


def _stack(rows: dict[int, dict[str, float]], at: npt.NDArray[np.intp]) -> dict[str, FloatArray]:
    keys = (*metrics.KEYS, "ttft_p50_s")
    return {k: np.array([rows[int(j)].get(k, np.nan) for j in at], dtype=float) for k in keys}


def note(req: PlanRequest, static_feasible: int, ep: EnginePass) -> str:
    """What the serving roles were ranked on, said once per plan."""
    return (f"ranked at {req.serving_engine}'s steady state ({req.concurrency} in flight): {ep.evaluated:,} of "
            f"{static_feasible:,} passing the static checks evaluated (best {ENGINE_PICKS} per role and GPU), "
            f"{ep.ok.size:,} meet the targets")
