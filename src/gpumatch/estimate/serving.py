"""Serving engines at steady state: continuous batching under a closed-loop concurrency or a Poisson rate.

Pure functions over the per-pass costs the estimator already has (:func:`gpumatch.estimate.roofline.decode_step`
as a function of the running batch and its context, :func:`gpumatch.estimate.roofline.prefill` as a function of
prompt tokens) and an engine profile (``data/engines.toml``: schedule, token budget, sequence cap, memory
fraction, KV admission, host cost per pass; each default with its source). One replica, scalar numbers.

Closed loop with ``C`` clients (``vllm bench serve --max-concurrency C``), prompt ``P`` (``P' = P (1 - h)`` of it
computed, ``h`` the prefix-cache hit ratio), output ``O``:

- admission: ``N = min(C, KV slots, max_seqs)`` requests run; the rest wait in the queue;
- a request's life in the engine = its prefill + ``(O - 1)`` passes; Little's law gives the request rate
  ``λ = N / life``, the running decode batch ``B = λ (O - 1) τ`` and the prompts started per pass ``n = λ τ``;
- mixed passes (vLLM, TensorRT-LLM): ``τ = D(B, ctx) + host(B + n) + n · Pm(P')``, ``Pm`` the marginal cost of a
  prompt's tokens riding on a pass that already reads the weights; the prompt tokens per pass are capped by the
  budget (``n P' <= budget - B``), beyond which the prefill bounds ``λ``;
- alternating passes (SGLang): decode passes ``d = D(B, ctx) + host(B)``, and per decode pass ``f`` prefill passes of
  ``m`` prompts each (the full cost of a separate forward, ``F(m)``): ``τ = d + f · F(m)``;
- TPOT = ITL = ``τ``; TTFT = ``C / λ - (O - 1) τ`` (Little's law over the whole loop: queueing for admission or
  for the budget included), which is at least the wait for a pass to join + the request's own prefill chunk
  passes; the wait is a whole pass in a closed loop (the client sends the next request just after a pass ended,
  and it misses the pass the engine starts at once: :data:`CLOSED_LOOP_WAIT`), half a pass for Poisson arrivals.

The fixed point is iterated (damped, at most :data:`MAX_ITERATIONS`) until the pass time changes by less than
:data:`TOLERANCE` (relative). Open loop (rate ``λ`` given): the same pass equations with ``λ`` fixed, plus an
M/D/1 wait ``ρ / (2 μ (1 - ρ))`` at utilization ``ρ = λ / μ`` of the saturated rate ``μ`` (the closed loop with every
admissible request running); goodput is the highest ``λ`` whose TTFT and TPOT meet the targets (bisection).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpumatch.errors import InputError
from gpumatch.estimate import cost, flops, memory, replay, roofline
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
from gpumatch.units import GIB

LINEAR_POINTS = 160
"""Grid points of a pass's linear work over its token count (geometric, 1 to :data:`LINEAR_MAX_TOKENS`: 10 % apart,
linear interpolation between them)."""
LINEAR_MAX_TOKENS = 2.0**22
MAX_ITERATIONS = 200
"""Iterations of the fixed point (damped by half); it converges in tens."""
TOLERANCE = 1e-6
"""Relative change of the pass time at which the fixed point stops."""
DEFAULT_ENGINE = "vllm"
CLOSED_LOOP_WAIT = 1.0
"""Passes a request of a closed loop waits before it joins one: its client sends it when the previous request's
last token arrives, a few milliseconds after the pass that made it, and the engine has started its next pass by
then (engines do not hold a pass for a request that may come), so it joins the pass after (a whole pass;
:mod:`gpumatch.estimate.replay`, "Arrivals")."""
OPEN_LOOP_WAIT = 0.5
"""Passes a Poisson arrival waits on average before it joins one: it comes at a random point of the pass in flight
(the residual of a pass of nearly constant length)."""
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


@dataclass(frozen=True)
class _Costs:
    """Per-pass cost functions of one replica (scalar seconds)."""

    m: ModelNums
    c: Case
    cal: Calibration
    profile: EngineProfile
    prompt: float
    gen: float
    computed: float
    decode_slots: float = math.inf
    """The engine's slot count: the largest batch bucket of a padded engine."""
    dispatch: float = 0.0
    """:func:`prefill_dispatch_s` of the engine."""
    memo: dict[float, float] = field(default_factory=dict)
    linear_table: list[np.ndarray] = field(default_factory=list)
    """(tokens, seconds) of :meth:`_linear` on a geometric grid, made on first use (one vectorized call)."""

    def decode(self, batch: float) -> float:
        """A decode step of ``batch`` rows at the mean context; for a padded engine, of its graph's shape with the
        longest of ``batch`` requests spread over their outputs at ``prompt + gen · batch / (batch + 1)``
        (:func:`gpumatch.estimate.passes.padded_shape`)."""
        ctx = flops.decode_context(self.prompt, self.gen)
        if self.profile.padded_decode and batch > 0:
            longest = self.prompt + self.gen * batch / (batch + 1.0) + 1.0
            rows, ctx = padded_shape(batch, longest, self.decode_slots)
            batch = float(rows)
        c = replace(self.c, seqs_per_replica=max(batch, 1e-9))
        return float(roofline.decode_step(self.m, c, ctx, self.cal)["time_s"])

    def host(self, seqs: float) -> float:
        return self.profile.host_pass_s + self.profile.host_seq_s * seqs

    def dispatched(self, gpu_s: float, hidden_s: float) -> float:
        """A prefill pass of ``gpu_s`` on the GPU, dispatched eagerly behind ``hidden_s`` of the pass before it: the
        longer of its GPU work and what the dispatch (:attr:`dispatch`) takes beyond ``hidden_s``."""
        return max(gpu_s, self.dispatch - hidden_s)

    def prefill(self, prompts: float, tokens: float) -> float:
        """A separate prefill forward of ``prompts`` prompts of ``tokens`` tokens each (fixed costs included)."""
        c = replace(self.c, prompt=max(tokens, 1.0))
        return float(roofline.prefill(self.m, c, self.cal, batch=max(prompts, 1e-9))["time_s"])

    def _linear(self, tokens: float) -> float:
        """Seconds of a forward of ``tokens`` tokens without attention (:func:`roofline.prefill_linear_s`),
        interpolated on a geometric grid of :data:`LINEAR_POINTS` from 1 to :data:`LINEAR_MAX_TOKENS` tokens
        (the fixed point asks for it at every iteration with a new decode batch; past the grid, evaluated)."""
        if tokens > LINEAR_MAX_TOKENS:
            return float(roofline.prefill_linear_s(self.m, replace(self.c, prompt=tokens), self.cal))
        if not self.linear_table:
            xs = np.geomspace(1.0, LINEAR_MAX_TOKENS, LINEAR_POINTS)
            ys = np.broadcast_to(roofline.prefill_linear_s(self.m, replace(self.c, prompt=xs), self.cal), xs.shape)
            self.linear_table.extend((xs, np.array(ys, dtype=float)))
        xs, ys = self.linear_table
        return float(np.interp(max(tokens, 1.0), xs, ys))

    def attention(self, tokens: float) -> float:
        """Prefill attention of one prompt of ``tokens`` tokens (its own keys), remembered per ``tokens``."""
        if tokens not in self.memo:
            c = replace(self.c, prompt=max(tokens, 1.0))
            self.memo[tokens] = float(roofline.prefill_attention_s(self.m, c, self.cal))
        return self.memo[tokens]

    def marginal(self, rows: float, prompts: float, left: float) -> float:
        """What ``prompts`` prompts per pass (a mean, a fraction allowed) of ``computed`` tokens each add to a pass
        of ``rows`` decode rows with ``left`` tokens of budget: the linear work once for all the prompt tokens a
        pass holds, ``L(rows + S) - L(rows)`` (the weights are read once whatever the pass holds), in the share
        ``T / S`` of passes that carry them -- ``T`` the prompt tokens per pass on average, ``S`` what one such
        pass holds: at least one whole prompt, at most the budget left -- plus each prompt's own attention
        (``docs/estimators.md``, "Prefill inside a pass")."""
        if prompts <= 0 or self.computed <= 0:
            return 0.0
        base = max(rows, 1.0)
        t = prompts * self.computed
        size = min(max(self.computed, t), max(left, 1.0))
        extra = self._linear(base + size) - self._linear(base)
        return max(extra, 0.0) * t / size + prompts * self.attention(self.computed)



def _pass_equations(
    k: _Costs, lam: float, tau: float, budget: float, others: float, wait: float
) -> tuple[float, float, float, float, float]:
    """(new TPOT, decode batch B, prompts per pass n, own time to first token in the engine, budget left) at rate
    ``lam`` and pass time ``tau``, seen by one request (Palm view): it decodes with the others that decode and
    shares passes with the others' prefills, ``others`` being the share of the requests in flight that are
    not itself (``(N - 1) / N`` in a closed loop of N, 1 for Poisson arrivals, which see time averages). A request
    arriving while others run first waits ``wait`` of a pass: :data:`CLOSED_LOOP_WAIT` or :data:`OPEN_LOOP_WAIT`."""
    o1 = max(k.gen - 1.0, 0.0)
    b = lam * o1 * tau
    n = lam * tau
    b_o, n_o = b * others, n * others
    left = max(budget - b, 1.0) if budget > 0 else math.inf
    chunks = max(1.0, math.ceil(k.computed / left)) if k.computed > 0 else 1.0
    if k.profile.schedule == "mixed":
        # with pipeline stages the prompts ride in the micro-batches (a request's share: n_o / micro-batches)
        per_mb = n_o / float(roofline.pipeline_micro_batches(k.c, 1.0 + b_o + n_o))
        new = k.decode(1.0 + b_o) + k.host(1.0 + b_o + n_o) + k.marginal(1.0 + b_o, per_mb, left)
        own_pass = k.decode(b_o) + k.host(b_o + 1.0 + n_o)
        own = wait * new * others + chunks * own_pass + k.marginal(b_o, 1.0 + per_mb, left)
        return new, b, n, own, left
    # alternate: prefill passes gather the prompts waiting, up to the budget, and pause the decodes
    fit = left / max(k.computed, 1.0) if budget > 0 else math.inf
    per_pass = max(1.0, min(n_o, fit))
    passes = max(min(1.0, n_o), n_o / per_pass) * chunks
    hidden = k.decode(b_o) if b_o > 0 else 0.0  # a prefill pass is dispatched while the decode pass before runs
    f = k.dispatched(k.prefill(per_pass, k.computed / chunks), hidden) + k.host(per_pass)
    new = k.decode(1.0 + b_o) + k.host(1.0 + b_o) + passes * f
    own_pass = k.dispatched(k.prefill(max(1.0, min(1.0 + n_o, fit)), k.computed / chunks), hidden)
    own = wait * new * others + chunks * (own_pass + k.host(1.0 + n_o))
    return new, b, n, own, left


def _closed(k: _Costs, running: float, budget: float, clients: float,
            front_end: bool = True) -> tuple[float, float, dict[str, float], int]:
    """(rate λ, pass time τ, details, iterations) of the closed loop with ``running`` requests in the engine and
    ``clients`` in the whole loop; a client's cycle includes the front end's cost per request (``frontend_s``)
    unless ``front_end`` is False (the engine's saturated rate, which a queue in front of it keeps fed)."""
    o1 = max(k.gen - 1.0, 0.0)
    others = (running - 1.0) / running if running > 1.0 else 0.0
    tau = k.decode(running) + k.host(running)
    lam = running / (tau * (o1 + 1.0))
    det: dict[str, float] = {}
    it = 0
    for it in range(1, MAX_ITERATIONS + 1):  # noqa: B007 -- the count is reported
        new, b, n, own, left = _pass_equations(k, lam, tau, budget, others, CLOSED_LOOP_WAIT)
        tau_next = 0.5 * tau + 0.5 * new
        life = own + o1 * tau_next
        lam_engine = running / life
        cap = left / (tau_next * k.computed) if k.computed > 0 and budget > 0 else math.inf
        lam_next = min(lam_engine, cap)
        det = {"b": b, "n": n, "own": own, "prefill_limited": float(lam_engine > cap)}
        done = abs(tau_next - tau) <= TOLERANCE * tau and abs(lam_next - lam) <= TOLERANCE * lam
        tau, lam = tau_next, lam_next
        if done:
            break
    front = k.profile.frontend_s if front_end else 0.0
    lam = min(lam, clients / (det["own"] + front + o1 * tau))  # a client's cycle: the front end too
    return lam, tau, det, it


def _open(k: _Costs, lam: float, budget: float, tau0: float | None = None) -> tuple[float, dict[str, float], int]:
    """(pass time, details, iterations) at a fixed request rate ``lam``, starting from the pass time ``tau0`` (a
    nearby rate's, in the goodput search) or one request's."""
    tau = tau0 if tau0 is not None else k.decode(1.0) + k.host(1.0)
    det: dict[str, float] = {}
    it = 0
    for it in range(1, MAX_ITERATIONS + 1):  # noqa: B007
        new, b, n, own, _ = _pass_equations(k, lam, tau, budget, 1.0, OPEN_LOOP_WAIT)
        tau_next = 0.5 * tau + 0.5 * new
        det = {"b": b, "n": n, "own": own}
        done = abs(tau_next - tau) <= TOLERANCE * tau
        tau = tau_next
        if done:
            break
    return tau, det, it


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
    """The steady state of one replica ``c`` (``dp = 1``) of ``engine`` (module docstring); in closed loop with
    ``bench`` (``num_prompts`` > 0) the latencies and rates are those of that benchmark replayed pass by pass
    (:func:`replayed`), the steady state kept beside them.

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
    k = _Costs(m, c, cal, profile, prompt, gen, prompt * (1.0 - prefix_hit_ratio), float(cap_n),
               prefill_dispatch_s(m, c, profile))
    sat_lam, _, _, _ = _closed(k, float(cap_n), budget, float(cap_n), front_end=False)
    if request_rate is None:
        running = min(concurrency, float(cap_n))
        lam, tau, det, it = _closed(k, running, budget, concurrency)
        ttft = concurrency / lam - o1 * tau  # the front end's cost included (_closed)
        stable = True
    else:
        lam = request_rate
        rho = lam / sat_lam
        stable = rho < 1.0
        if stable:
            tau, det, it = _open(k, lam, budget)
        else:  # overloaded: the engine runs saturated (every admissible request running), the queue grows
            _, tau, det, it = _closed(k, float(cap_n), budget, float(cap_n))
        wait = rho / (2.0 * sat_lam * (1.0 - rho)) if stable else math.inf
        ttft = det["own"] + wait + profile.frontend_s
        running = min(lam * (ttft + o1 * tau), float(cap_n))
        det["prefill_limited"] = 0.0
    goodput = _goodput(k, budget, sat_lam, targets, profile.frontend_s) if any(t is not None for t in targets) else None
    sv = Serving(
        engine=engine, schedule=profile.schedule, token_budget=budget, max_seqs=float(tier.max_seqs),
        kv_slots=slots, kv_pool_bytes=pool, kv_bytes_per_seq=kv_per_seq(m, c, profile, prompt, gen),
        running=running, concurrency=concurrency, request_rate=request_rate,
        mean_decode_batch=det["b"], prefill_tokens_per_pass=det["n"] * k.computed, prefills_per_pass=det["n"],
        pass_s=tau, host_pass_s=k.host(det["b"] + det["n"]), ttft_s=ttft, tpot_s=tau, e2e_s=ttft + o1 * tau,
        requests_per_s=lam if stable else sat_lam, saturated_requests_per_s=sat_lam,
        admission_limited=request_rate is None and concurrency > cap_n,
        prefill_limited=bool(det.get("prefill_limited", 0.0)), prefix_hit_ratio=prefix_hit_ratio, iterations=it,
        stable=stable, goodput_requests_per_s=goodput,
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


def _goodput(k: _Costs, budget: float, sat_lam: float, targets: tuple[float | None, float | None],
             frontend_s: float) -> float:
    """The highest open-loop rate (per replica) whose TTFT (the front end's ``frontend_s`` included) and TPOT meet
    ``targets`` (0 when none does)."""
    ttft_max, tpot_max = targets

    last: list[float] = []

    def meets(lam: float) -> bool:
        rho = lam / sat_lam
        if rho >= 1.0:
            return False
        tau, det, _ = _open(k, lam, budget, last[-1] if last else None)  # warm start: the previous rate's pass
        last.append(tau)
        ttft = det["own"] + rho / (2.0 * sat_lam * (1.0 - rho)) + frontend_s
        return (ttft_max is None or ttft <= ttft_max) and (tpot_max is None or tau <= tpot_max)

    lo, hi = 0.0, sat_lam
    if not meets(sat_lam * 1e-6):
        return 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo


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
