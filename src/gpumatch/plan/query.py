"""``gpumatch plan`` as one library call: :func:`run_plan` of a :class:`PlanQuery`.

The query holds what the command line said (text and counts, None = not given). The shared concepts (task,
model, concurrency, global and micro-batch, lengths, precisions) go through the one mapping of a workload file and
flags, :func:`gpumatch.workload.request.resolve_request`, as ``gpumatch estimate``'s do; :func:`plan_request`
turns the result and the plan's own options into a :class:`~gpumatch.plan.request.PlanRequest`. Rendering the
plan is :mod:`gpumatch.report.plan`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpumatch.catalog import load_catalog
from gpumatch.errors import InputError
from gpumatch.estimate import Calibration
from gpumatch.plan import search
from gpumatch.plan.planner import Plan, plan
from gpumatch.plan.request import PlanRequest, from_request
from gpumatch.workload import load_workload
from gpumatch.workload.request import RequestFlags, deprecation_notes, resolve_request


@dataclass(frozen=True)
class PlanQuery:
    """One ``gpumatch plan``: the shared flags (``request``; its deprecated ``batch`` is the global batch or the
    sequences in flight), the workload file, the plan's own options as typed, and what to show.

    Quantities are text with units as typed ("$20k", "10.2kW", "500ms", "2k"); ``gpus_allow``/``gpus_deny`` GPU
    names or aliases (``--gpu``/``--exclude``); ``top`` entries per role; ``roles`` the roles to show (all: empty).
    """

    request: RequestFlags = field(default_factory=RequestFlags)
    workload: str | None = None
    tp: int | None = None
    pp: int | None = None
    max_gpus: int | None = None
    budget_usd: str | None = None
    w_per_node: str | None = None
    psu_w: str | None = None
    ttft_p50_s: str | None = None
    tpot_p50_s: str | None = None
    tokens_per_s: str | None = None
    gpus_allow: tuple[str, ...] = ()
    gpus_deny: tuple[str, ...] = ()
    top: int = 3
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanRun:
    """The plan and the notes on how it was asked for (a deprecated flag and the one that replaces it)."""

    plan: Plan
    notes: tuple[str, ...] = ()


def plan_request(query: PlanQuery) -> tuple[PlanRequest, tuple[str, ...]]:
    """The planning question of ``query`` (flags over its workload file; GPU names resolved in the catalog) and
    the deprecation notes of the flags it used."""
    work = resolve_request(load_workload(query.workload) if query.workload else None, query.request)
    lists = {"gpus_allow": _canonical(query.gpus_allow), "gpus_deny": _canonical(query.gpus_deny)}
    req = from_request(work, tp=query.tp, pp=query.pp, max_gpus=query.max_gpus, budget_usd=query.budget_usd,
                       w_per_node=query.w_per_node, psu_w=query.psu_w, ttft_p50_s=query.ttft_p50_s,
                       tpot_p50_s=query.tpot_p50_s, tokens_per_s=query.tokens_per_s, **lists)
    return req, deprecation_notes(work)


def run_plan(query: PlanQuery, progress: search.Progress | None = None,
             calibration: Calibration | None = None) -> PlanRun:
    """Plan ``query``: its request (:func:`plan_request`) through :func:`gpumatch.plan.plan`, under
    ``calibration`` (the shipped defaults when None)."""
    req, notes = plan_request(query)
    if query.top < 1:
        raise InputError(f"--top must be at least 1, got {query.top}")
    return PlanRun(plan(req, top=query.top, roles=query.roles or None, progress=progress,
                        calibration=calibration), notes)


def _canonical(names: tuple[str, ...]) -> tuple[str, ...] | None:
    """Catalog names of ``names`` (None when there are none: the file's list stays)."""
    if not names:
        return None
    catalog = load_catalog()
    return tuple(catalog.get(n).name for n in names)
