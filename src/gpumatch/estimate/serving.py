"""Serving engines at steady state: continuous batching under a closed-loop concurrency or a Poisson rate.

Pure functions over the per-pass costs the estimator already has (:func:`gpumatch.estimate.roofline.decode_step`
as a function of the running batch and its context, :func:`gpumatch.estimate.roofline.prefill` as a function of
prompt tokens) and an engine profile (:mod:`gpumatch.estimate.engine_profiles`, ``data/engines.toml``: schedule,
token budget, sequence cap, memory fraction, KV admission, host cost per pass; each default with its source). One
replica, scalar numbers: the pass equations and their fixed point are :mod:`gpumatch.estimate.steady`'s; a
benchmark with a request count is replayed pass by pass (:mod:`gpumatch.estimate.replay`) and its means replace
the steady state's, which stays beside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from gpumatch.errors import InputError
from gpumatch.estimate import cost, memory, replay
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.engine_profiles import (
    EngineProfile,
    Tier,
    kv_per_seq,
    kv_pool,
    kv_slots,
    pass_cost_source,
    prefill_dispatch_s,
    profile_under,
)
from gpumatch.estimate.passes import PassCost, PassShape, Scheduler, padded_shape, pass_cost, pass_tables
from gpumatch.estimate.power import Site
from gpumatch.estimate.steady import StepCosts, goodput, solve_closed, solve_open
from gpumatch.units import GIB

DEFAULT_ENGINE = "vllm"
TTFT_LEAVES_OUT = ("the client's own network path to the server (the front end's cost per request is in: the "
                   "engine profile's frontend_s); what an engine version or host adds beyond that "
                   "(docs/estimators.md, 'The front end's cost per request')")
"""What a serving TTFT does not include: the passes (wait, prefill chunks, queueing) plus the profile's front-end
cost per request are in."""


class NoRoom(Exception):
    """The engine's memory share holds the weights and activations but not one sequence's KV cache."""


@dataclass(frozen=True)
class Serving:
    """The steady state of one replica (per-replica rates; seconds and per-second figures).

    ``admission_limited``: fewer requests run than are offered (KV slots or the sequence cap), the rest queue.
    ``prefill_limited``: the prompt tokens the arrivals need exceed the budget left by the decodes, so the
    prefill sets the rate and requests wait for it. ``stable`` is False for an open-loop rate at or above the
    saturated rate (the queue grows without bound: TTFT infinite).
    """

    engine: str
    schedule: str
    token_budget: float
    max_seqs: float
    kv_slots: float
    kv_pool_bytes: float
    kv_bytes_per_seq: float
    """KV bytes per GPU one running sequence holds on average (at the admission's tokens, block-rounded)."""
    running: float
    concurrency: float
    request_rate: float | None
    mean_decode_batch: float
    prefill_tokens_per_pass: float
    prefills_per_pass: float
    pass_s: float
    host_pass_s: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    requests_per_s: float
    saturated_requests_per_s: float
    admission_limited: bool
    prefill_limited: bool
    prefix_hit_ratio: float
    iterations: int
    stable: bool = True
    goodput_requests_per_s: float | None = None
    benchmark: replay.Replay | None = None
    """The closed-loop benchmark replayed pass by pass (:mod:`gpumatch.estimate.replay`) whose means the
    latency and rate fields hold; None: the fields are the long-run steady state."""
    steady_ttft_s: float | None = None
    steady_tpot_s: float | None = None
    replay_note: str = ""
    """Why a requested benchmark replay was not run (its bound, or a pool too small), else empty."""
    pass_costs: tuple[float, float, str] = (0.0, 0.0, "")
    """(fixed seconds per pass, seconds per pass per running sequence, where from) of the profile applied."""
    frontend_s: float = 0.0
    """The front end's cost per request, in every TTFT and end-to-end latency above (engine profile)."""

    def assumptions(self, dp: float) -> dict[str, Any]:
        """The JSON ``serving`` object: what the figures assume (rates over all ``dp`` replicas)."""

        def clean(v: float | None) -> float | None:
            return None if v is None or math.isnan(v) or math.isinf(v) else v

        return {
            "engine": self.engine, "schedule": self.schedule, "mode": "closed-loop" if self.request_rate is None
            else "open-loop", "concurrency_per_replica": self.concurrency,
            "request_rate_per_s": None if self.request_rate is None else self.request_rate * dp,
            "token_budget": int(self.token_budget), "max_seqs": int(self.max_seqs) or None,
            "kv_slots": clean(math.floor(self.kv_slots)), "kv_pool_bytes": self.kv_pool_bytes,
            "running_requests": self.running, "mean_decode_batch": self.mean_decode_batch,
            "prefill_tokens_per_pass": self.prefill_tokens_per_pass, "prefills_per_pass": self.prefills_per_pass,
            "pass_costs": {"host_pass_s": self.pass_costs[0], "host_seq_s": self.pass_costs[1],
                           "source": self.pass_costs[2]},
            "pass_s": self.pass_s, "host_pass_s": self.host_pass_s, "frontend_s": self.frontend_s,
            "admission_limited": self.admission_limited,
            "prefill_limited": self.prefill_limited, "prefix_hit_ratio": self.prefix_hit_ratio,
            "saturated_requests_per_s": clean(self.saturated_requests_per_s * dp),
            "goodput_requests_per_s": None if self.goodput_requests_per_s is None
            else self.goodput_requests_per_s * dp, "stable": self.stable, "iterations": self.iterations,
            "model": "steady-state" if self.benchmark is None else "benchmark-replay",
            "steady_state_ttft_s": self.steady_ttft_s, "steady_state_tpot_s": self.steady_tpot_s,
            "replay": None if self.benchmark is None else self.benchmark.summary(),
            "replay_skipped": self.replay_note or None, "ttft_leaves_out": TTFT_LEAVES_OUT,
        }  # fmt: skip


def steady_state(
    m: ModelNums,
    c: Case,
    cal: Calibration,
    engine: str,
    gpu_name: str,
    *,
    concurrency: float,
    request_rate: float | None = None,
    prefix_hit_ratio: float = 0.0,
    targets: tuple[float | None, float | None] = (None, None),
    bench: replay.Benchmark | None = None,
) -> Serving:
    """The steady state of one replica ``c`` (``dp = 1``) of ``engine`` (:mod:`gpumatch.estimate.steady`); in
    closed loop with ``bench`` (``num_prompts`` > 0) the latencies and rates are those of that benchmark replayed pass
    by pass (:func:`replayed`), the steady state kept beside them.

    ``concurrency``: requests in flight per replica (closed loop), or the most the engine may hold in flight in
    open loop; ``request_rate`` per replica (open loop, Poisson) or None; ``targets``: (TTFT, TPOT) in seconds
    for goodput, or None each.
    """
    profile = profile_under(engine, cal, gpu_name)
    if profile.schedule == "static":
        raise InputError("the static engine has no serving steady state", "use --engine vllm, sglang or trtllm")
    if not 0.0 <= prefix_hit_ratio < 1.0:
        raise InputError(f"prefix-cache hit ratio must be in [0, 1), got {prefix_hit_ratio}")
    tier = profile.tier(gpu_name, float(c.capacity_bytes))
    budget = float(tier.token_budget)
    prompt, gen = float(c.prompt), float(c.gen)
    pool = kv_pool(m, c, cal, profile, budget)
    slots = kv_slots(m, c, profile, pool, prompt, gen)
    cap = min(slots, float(tier.max_seqs) if tier.max_seqs else math.inf)
    if cap < 1.0:
        raise NoRoom(f"{engine} keeps no room for one sequence of {prompt + gen:.0f} tokens "
                     f"({pool / GIB:.2f} GiB of KV cache after weights and activations)")
    o1 = max(gen - 1.0, 0.0)
    cap_n = math.floor(cap)
    k = StepCosts(m, c, cal, profile, prompt, gen, prompt * (1.0 - prefix_hit_ratio), float(cap_n),
               prefill_dispatch_s(m, c, profile))
    sat_lam, _, _, _ = solve_closed(k, float(cap_n), budget, float(cap_n), front_end=False)
    if request_rate is None:
        running = min(concurrency, float(cap_n))
        lam, tau, det, it = solve_closed(k, running, budget, concurrency)
        ttft = concurrency / lam - o1 * tau  # the front end's cost included (solve_closed)
        stable = True
    else:
        lam = request_rate
        rho = lam / sat_lam
        stable = rho < 1.0
        if stable:
            tau, det, it = solve_open(k, lam, budget)
        else:  # overloaded: the engine runs saturated (every admissible request running), the queue grows
            _, tau, det, it = solve_closed(k, float(cap_n), budget, float(cap_n))
        wait = rho / (2.0 * sat_lam * (1.0 - rho)) if stable else math.inf
        ttft = det["own"] + wait + profile.frontend_s
        running = min(lam * (ttft + o1 * tau), float(cap_n))
        det["prefill_limited"] = 0.0
    best = goodput(k, budget, sat_lam, targets, profile.frontend_s) if any(t is not None for t in targets) else None
    sv = Serving(
        engine=engine, schedule=profile.schedule, token_budget=budget, max_seqs=float(tier.max_seqs),
        kv_slots=slots, kv_pool_bytes=pool, kv_bytes_per_seq=kv_per_seq(m, c, profile, prompt, gen),
        running=running, concurrency=concurrency, request_rate=request_rate,
        mean_decode_batch=det["b"], prefill_tokens_per_pass=det["n"] * k.computed, prefills_per_pass=det["n"],
        pass_s=tau, host_pass_s=k.host(det["b"] + det["n"]), ttft_s=ttft, tpot_s=tau, e2e_s=ttft + o1 * tau,
        requests_per_s=lam if stable else sat_lam, saturated_requests_per_s=sat_lam,
        admission_limited=request_rate is None and concurrency > cap_n,
        prefill_limited=bool(det.get("prefill_limited", 0.0)), prefix_hit_ratio=prefix_hit_ratio, iterations=it,
        stable=stable, goodput_requests_per_s=best,
        pass_costs=(profile.host_pass_s, profile.host_seq_s, pass_cost_source(engine, cal, gpu_name)),
        frontend_s=profile.frontend_s,
    )  # fmt: skip
    if bench is not None and bench.num_prompts > 0 and (request_rate is None) == (bench.request_rate is None):
        return replayed(sv, m, c, cal, tier, profile, bench, prefix_hit_ratio)
    return sv


def replayed(sv: Serving, m: ModelNums, c: Case, cal: Calibration, tier: Tier, profile: EngineProfile,
             bench: replay.Benchmark, prefix_hit_ratio: float) -> Serving:
    """``sv`` with its latencies and rates replaced by those of ``bench`` replayed through ``sv.concurrency``
    clients (:mod:`gpumatch.estimate.replay`) under the same engine rules and KV pool; the steady state's TTFT
    and TPOT are kept beside them. A prefix-cache hit ratio shortens every computed prompt by that share."""
    clients = bench.num_prompts if bench.request_rate is not None else max(1, round(sv.concurrency))
    prompt = float(c.prompt) * (1.0 - prefix_hit_ratio)
    # KV bytes per token, averaged over the longest request (prompt + output): with sliding-window layers a request
    # holds at most the window in them, so the average falls with length; taken at a million tokens (as before
    # 2026-12-07) it came to a few hundred bytes for a fully windowed model and made the pool look unlimited
    longest_tokens = float(c.prompt) + float(c.gen)
    per_token = float(memory.kv_cache_bytes(m, replace(c, seqs_per_replica=1.0), longest_tokens)) / longest_tokens
    sched = Scheduler(
        schedule=profile.schedule, token_budget=float(tier.token_budget),
        max_seqs=float(tier.max_seqs) if tier.max_seqs else math.inf,
        kv_tokens=math.floor(sv.kv_pool_bytes / per_token) if per_token > 0 else math.inf,
        reserve=profile.kv_admission == "reserve", ratio_admission=profile.kv_admission == "ratio",
        host_pass_s=profile.host_pass_s, host_seq_s=profile.host_seq_s, prefix_cache=profile.prefix_cache,
        padded_decode=profile.padded_decode,
        decode_slots=math.floor(min(sv.kv_slots, sv.max_seqs or math.inf)))
    rows, longest = replay.table_batches(clients, sched, prompt, bench), prompt + float(c.gen) + 1.0
    if profile.padded_decode:
        rows, longest = padded_shape(rows, longest, sched.decode_slots)
    k = pass_tables(m, c, cal, rows, longest, min(sched.token_budget, clients * max(prompt, 1.0)),
                     prefill_dispatch_s(m, c, profile))
    try:
        r = replay.run(k, sched, clients, bench, prompt, float(c.gen))
    except (replay.Stalled, replay.TooLarge) as e:
        return replace(sv, replay_note=f"benchmark replay skipped ({e}); the long-run steady state is shown")
    r = r.after_front_end(profile.frontend_s)
    return replace(sv, ttft_s=r.ttft_s, tpot_s=r.tpot_s, e2e_s=r.e2e_s, requests_per_s=r.requests_per_s,
                   mean_decode_batch=r.mean_decode_batch, running=r.mean_running, pass_s=r.mean_pass_s,
                   prefill_tokens_per_pass=r.prefill_tokens_per_pass, benchmark=r, steady_ttft_s=sv.ttft_s,
                   steady_tpot_s=sv.tpot_s)


def pass_costs(m: ModelNums, c: Case, cal: Calibration, engine: str, gpu_name: str,
               passes: list[PassShape]) -> list[PassCost]:
    """The predicted cost of each of ``passes`` on one replica ``c`` of ``engine``: the replay's pass time
    (:func:`gpumatch.estimate.passes.pass_cost`) with the engine profile's host costs, for holding an engine's
    logged passes against the model part by part. Each pass is costed at the shape given: for a padded engine
    (``padded_decode``) give the shape it ran (:func:`gpumatch.estimate.passes.padded_shape`)."""
    if not passes:
        return []
    profile = profile_under(engine, cal, gpu_name)
    sched = Scheduler(schedule=profile.schedule, token_budget=math.inf, max_seqs=math.inf,
                             kv_tokens=math.inf, reserve=profile.kv_admission == "reserve",
                             host_pass_s=profile.host_pass_s, host_seq_s=profile.host_seq_s)
    batch = max(max(p.decode_rows for p in passes), 1)
    context = max(max(p.context for p in passes), max((s + t for p in passes for s, t in p.chunks), default=1.0))
    tokens = max(sum(t for _, t in p.chunks) for p in passes)
    k = pass_tables(m, c, cal, batch, context + 1.0, max(tokens, 1.0), prefill_dispatch_s(m, c, profile))
    return [pass_cost(k, sched, p.decode_rows, p.context, list(p.chunks)) for p in passes]


def serving_memory(out: dict[str, float], sv: Serving, running: float) -> dict[str, float]:
    """The memory items of ``out`` (one evaluation of ``running`` sequences per replica) with the KV cache the
    engine's running requests hold: ``running`` × :attr:`Serving.kv_bytes_per_seq` instead of ``running`` full
    prompt + output caches (on-demand blocks), never more than the engine's KV pool (:attr:`Serving.kv_pool_bytes`:
    a replayed benchmark's mean running count can exceed the slots at the mean occupancy, since requests early in
    their output hold less, but the engine admits and preempts so that its pool is never exceeded), total, margin
    and fit to match."""
    kv = min(running * sv.kv_bytes_per_seq, sv.kv_pool_bytes)
    delta = kv - out["kv_cache_bytes"]
    total = out["total_bytes"] + delta
    return {"kv_cache_bytes": kv, "total_bytes": total, "margin_bytes": out["capacity_bytes"] - total,
            "fits": float(total <= out["capacity_bytes"])}


def serving_metrics(out: dict[str, float], sv: Serving, dp: float, gen: float, site: Site) -> dict[str, float]:
    """The figures of ``out`` (one :func:`gpumatch.estimate.engine.evaluate` of the running batch) that the
    steady state replaces: latencies, rates over all ``dp`` replicas, and the per-token energy and cost that
    follow from the rate (the GPUs draw the decode power of the running batch)."""
    rate = sv.requests_per_s * dp
    tok_s = rate * gen if sv.benchmark is None else sv.benchmark.output_tokens_per_s * dp
    count = out["count"]
    energy = out["power_w"] * count / tok_s if tok_s > 0 else math.inf
    return {
        "ttft_s": sv.ttft_s, "tpot_s": sv.tpot_s, "itl_s": sv.tpot_s, "e2e_s": sv.e2e_s, "requests_per_s": rate,
        "output_tokens_per_s": tok_s, "tokens_per_s": tok_s, "tokens_per_s_per_replica": tok_s / dp,
        "useful_tokens_per_s": tok_s, "decode_tokens_per_s": sv.mean_decode_batch / sv.pass_s * dp,
        "energy_j_per_token": energy,
        "energy_j_per_token_facility": energy * site.pue + site.host_power_w_per_gpu * count * site.pue / tok_s,
        "usd_per_million_tokens_cloud": cost.usd_per_million_tokens(out["usd_per_hour_cloud"], tok_s),
        "usd_per_million_tokens_owned": cost.usd_per_million_tokens(out["usd_per_hour_owned"], tok_s),
    }  # fmt: skip
