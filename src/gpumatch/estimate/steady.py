"""The serving steady state's pass equations and their fixed point: one replica, scalar numbers.

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

:func:`gpumatch.estimate.serving.steady_state` builds the per-pass costs (:class:`StepCosts`) from the engine
profile and the replica, solves these equations and reports the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from gpumatch.estimate import flops, roofline
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.engine_profiles import EngineProfile
from gpumatch.estimate.passes import padded_shape

LINEAR_POINTS = 160
"""Grid points of a pass's linear work over its token count (geometric, 1 to :data:`LINEAR_MAX_TOKENS`: 10 % apart,
linear interpolation between them)."""
LINEAR_MAX_TOKENS = 2.0**22
MAX_ITERATIONS = 200
"""Iterations of the fixed point (damped by half); it converges in tens."""
TOLERANCE = 1e-6
"""Relative change of the pass time at which the fixed point stops."""
CLOSED_LOOP_WAIT = 1.0
"""Passes a request of a closed loop waits before it joins one: its client sends it when the previous request's
last token arrives, a few milliseconds after the pass that made it, and the engine has started its next pass by
then (engines do not hold a pass for a request that may come), so it joins the pass after (a whole pass;
:mod:`gpumatch.estimate.replay`, "Arrivals")."""
OPEN_LOOP_WAIT = 0.5
"""Passes a Poisson arrival waits on average before it joins one: it comes at a random point of the pass in flight
(the residual of a pass of nearly constant length)."""


@dataclass(frozen=True)
class StepCosts:
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



def pass_equations(
    k: StepCosts, lam: float, tau: float, budget: float, others: float, wait: float
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


def solve_closed(k: StepCosts, running: float, budget: float, clients: float,
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
        new, b, n, own, left = pass_equations(k, lam, tau, budget, others, CLOSED_LOOP_WAIT)
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


def solve_open(k: StepCosts, lam: float, budget: float,
               tau0: float | None = None) -> tuple[float, dict[str, float], int]:
    """(pass time, details, iterations) at a fixed request rate ``lam``, starting from the pass time ``tau0`` (a
    nearby rate's, in the goodput search) or one request's."""
    tau = tau0 if tau0 is not None else k.decode(1.0) + k.host(1.0)
    det: dict[str, float] = {}
    it = 0
    for it in range(1, MAX_ITERATIONS + 1):  # noqa: B007
        new, b, n, own, _ = pass_equations(k, lam, tau, budget, 1.0, OPEN_LOOP_WAIT)
        tau_next = 0.5 * tau + 0.5 * new
        det = {"b": b, "n": n, "own": own}
        done = abs(tau_next - tau) <= TOLERANCE * tau
        tau = tau_next
        if done:
            break
    return tau, det, it


def goodput(k: StepCosts, budget: float, sat_lam: float, targets: tuple[float | None, float | None],
             frontend_s: float) -> float:
    """The highest open-loop rate (per replica) whose TTFT (the front end's ``frontend_s`` included) and TPOT meet
    ``targets`` (0 when none does)."""
    ttft_max, tpot_max = targets

    last: list[float] = []

    def meets(lam: float) -> bool:
        rho = lam / sat_lam
        if rho >= 1.0:
            return False
        tau, det, _ = solve_open(k, lam, budget, last[-1] if last else None)  # warm start: the previous rate's pass
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
