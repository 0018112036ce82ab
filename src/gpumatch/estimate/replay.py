"""A closed-loop serving benchmark replayed pass by pass: N requests through C clients on one engine replica.

What ``vllm bench serve --max-concurrency C --num-prompts N`` (and InferenceX, SGLang's ``bench_serving``,
AIPerf's concurrency mode) measures is not the long-run steady state of :mod:`gpumatch.estimate.serving`: the C
first requests arrive together at t = 0 (a *first burst* whose prompts queue behind each other for the token
budget), with fixed or narrowly spread lengths the requests finish and are replaced in *waves* (convoys), and the
table's figures are means over the N requests, first burst included (``docs/estimators.md``, "Benchmark
replay"). Peers simulate this step by step (Vidur's replica schedulers, LLMServingSim's copy of vLLM V1's
scheduler; ``../shared/notes/serving-engines.md`` section 4); this module does the same with gpumatch's own
per-pass costs.

Scheduler per engine profile (``data/engines.toml``):

- ``mixed`` (vLLM V1, TensorRT-LLM in-flight batching): each pass takes the running decodes first (one token
  each), then prompt chunks of the running requests still in prefill, then waiting requests first come first
  served, until the token budget or the sequence cap is reached;
- ``alternate`` (SGLang): a pass is either a prefill pass (prompt chunks up to the budget; decodes wait) when a
  prompt waits and can be admitted, or a decode pass of every running request;
- KV admission ``on-demand`` (vLLM, SGLang): blocks are taken as tokens are computed; when a decode finds no
  room the newest running request is preempted and recomputed later (vLLM V1's ``RECOMPUTE``). With the prefix
  cache on (both engines' default) the preempted request's blocks are freed into the cache, not wiped: vLLM V1
  frees a request's blocks tail first into an LRU free queue, so later allocations evict the blocks freed before
  it, then its tail, and at re-admission the prefix still cached is a hit (vLLM's V1 design page "Automatic Prefix
  Caching", docs.vllm.ai/en/latest/design/prefix_caching/; SGLang's radix cache alike). The replay keeps that
  order by counts: a request preempted when ``F`` tokens were free loses ``max(0, A - F)`` of its cached tokens
  after ``A`` tokens are allocated, and recomputes only those; ``reserve``
  (TensorRT-LLM ``GUARANTEED_NO_EVICT``): a request is admitted only when its prompt + output fit; ``ratio``
  (SGLang): blocks are taken as tokens are computed, but a waiting request is admitted only when the free pool
  less ``r`` × the output every running request may still produce (clipped at :data:`CLIP_NEW_TOKENS`) holds its
  prompt and its whole clipped output (``PrefillAdder`` in SGLang's ``schedule_policy.py``:
  ``_get_running_request_total_token_offset``, ``add_one_req``); ``r`` (``new_token_ratio``) starts at
  :data:`RATIO_INIT`, falls by :data:`RATIO_DECAY` each decode pass to :data:`RATIO_MIN`, and goes back to
  :data:`RATIO_INIT` when a running request is retracted (SGLang re-estimates it then; the replay takes the start
  value) or the engine runs empty.

Pass time: each pass costs what :mod:`gpumatch.estimate.passes` charges for its decode rows and prompt chunks.
A request's first token comes at the end of the pass that computes its last prompt chunk; then one token per pass
it takes part in.

Arrivals: a client sends its next request when its last token reaches it, after the pass that made that token;
the request reaches the scheduler a few milliseconds later (the token's delivery, the new request's parsing,
tokenization and hand-over to the engine loop), and by then the engine has already started its next pass with the
requests it had: engines do not hold a pass for a request that may come (vLLM V1's engine-core loop, SGLang's
event loop and TensorRT-LLM's executor take new requests when they schedule a pass). So a request that replaces
a finished one joins the pass after next, having waited one whole pass; only an idle engine (nothing running or
waiting) takes it at once. Measured from the client's send, the delivery delays cancel: TTFT = the pass it
waits + the passes of its prompt. The first burst (C requests at t = 0, engine idle) waits for nothing.

Open loop (``Benchmark.request_rate``: ``vllm bench serve --request-rate R --num-prompts N``, SGLang's
``bench_serving`` alike): the N requests arrive at Poisson times at rate R (exponential gaps from a seeded
generator, the first at 0) whatever the engine does, each joining the queue with the first pass planned after it
arrives; an idle engine waits for the next arrival. A finite run at a rate above what the engine serves has a
mean TTFT (its queue grows for N / R seconds, then drains), which the long-run steady state cannot give.

Decode-only stretches between events (a request finishing or arriving, the KV cache filling) are advanced in one
step at the stretch's mean context, so the cost is linear in the number of requests, not passes.

Lengths: each request's prompt and output length are drawn uniformly from the integers in ``[r L, L]`` (``r`` =
``length_low``; 1 = fixed lengths), the nominal ``L`` and ``r`` as SGLang's and InferenceX's
``--random-range-ratio`` define them, from a seeded generator (the same request list for every run), with every
output forced to its length (``--ignore-eos``).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from gpumatch.estimate.passes import PassTables, Scheduler, context_bucket, pass_cost

MAX_NUM_PROMPTS = 100_000
"""Requests one replay may hold (time and memory grow linearly with it: about 0.1 ms per request)."""
MAX_PASSES = 40_000
"""Scheduling steps (a pass with prompt chunks, or a stretch of decode-only passes) one replay may take, at
about 50 µs each (a few array operations whatever the batch): a few seconds at most. Beyond it the caller keeps
the long-run steady state and says so. Published sweeps stay below it (8B on an H100, C = 1024, N = 10 C,
1k/1k: 35,000 steps with fixed lengths, 29,000 with lengths in [0.8 L, L])."""
MAX_TABLE_BATCHES = 16_384
"""Rows of the decode-step table at most (16k × 12 points: about 1.5 MB; a larger running batch is scaled)."""
SEED = 20261204
"""Seed of the request lengths (fixed: every replay of the same settings draws the same requests)."""


@dataclass(frozen=True)
class Benchmark:
    """A benchmark of ``num_prompts`` requests, lengths uniform in ``[length_low · L, L]``: closed loop (each client
    sends its next request when its last one ends), or with ``request_rate`` (requests/s) open loop, the requests
    arriving at Poisson times whatever the engine does (module docstring, "Open loop")."""

    num_prompts: int
    length_low: float = 1.0
    request_rate: float | None = None


RATIO_INIT = 0.7
"""SGLang's ``new_token_ratio`` at start (``SGLANG_INIT_NEW_TOKEN_RATIO``, default 0.7, × schedule_conservativeness
1.0)."""
RATIO_MIN = RATIO_INIT * 0.14
"""Its floor: the start value × ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` (default 0.14)."""
RATIO_DECAY = (RATIO_INIT - RATIO_MIN) / 600.0
"""Its fall per decode pass: (start − floor) / ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` (default 600)."""
CLIP_NEW_TOKENS = 4096
"""SGLang clips the output it reserves for a request at ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` (4096)."""


@dataclass(frozen=True)
class Replay:
    """The benchmark's figures as it reports them (means over the requests) and what the engine did."""

    ttft_s: float
    tpot_s: float
    e2e_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    first_wave_ttft_s: float
    """Mean TTFT of the first ``C`` requests (the burst at t = 0)."""
    duration_s: float
    requests_per_s: float
    output_tokens_per_s: float
    passes: int
    mean_pass_s: float
    mean_decode_batch: float
    """Decoding requests per pass, time-weighted."""
    mean_running: float
    """Requests admitted (holding KV), time-weighted."""
    prefill_tokens_per_pass: float
    preemptions: int
    num_prompts: int
    length_low: float
    mean_prompt: float
    mean_gen: float

    def after_front_end(self, frontend_s: float) -> Replay:
        """The same figures seen by the clients of an engine whose front end adds ``frontend_s`` to every request's
        first token (HTTP, tokenization, hand-over, the first chunk's streaming: outside the passes)."""
        return replace(self, ttft_s=self.ttft_s + frontend_s, ttft_p50_s=self.ttft_p50_s + frontend_s,
                       ttft_p99_s=self.ttft_p99_s + frontend_s, first_wave_ttft_s=self.first_wave_ttft_s + frontend_s,
                       e2e_s=self.e2e_s + frontend_s)

    def summary(self) -> dict[str, float | int]:
        """The JSON ``serving.replay`` object."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def table_batches(clients: int, s: Scheduler, prompt: float, bench: Benchmark) -> int:
    """Rows of the decode-step table: the most requests that can decode at once -- the clients, the sequence
    cap, and the KV pool over the shortest prompt's tokens (a decoding request holds at least its prompt and
    one token) -- at most :data:`MAX_TABLE_BATCHES` (beyond it a step is proportional to the batch)."""
    shortest = max(math.ceil(bench.length_low * max(round(prompt), 1)), 1) + 1
    by_kv = s.kv_tokens // shortest if math.isfinite(s.kv_tokens) else math.inf
    return int(max(1, min(clients, s.max_seqs, by_kv, MAX_TABLE_BATCHES)))


def request_lengths(prompt: float, gen: float, bench: Benchmark) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) lengths of the ``num_prompts`` requests (module docstring: uniform in ``[r L, L]``)."""
    rng = np.random.default_rng(SEED)

    def draw(length: float) -> np.ndarray:
        hi = max(round(length), 1)
        lo = max(min(math.ceil(bench.length_low * hi), hi), 1)
        return rng.integers(lo, hi + 1, size=bench.num_prompts)

    return draw(prompt), draw(gen)


class Stalled(Exception):
    """The KV pool cannot hold the longest request's prompt and output: the replay could not finish it."""


class TooLarge(Exception):
    """The replay would hold more than :data:`MAX_NUM_PROMPTS` requests or take more than :data:`MAX_PASSES`
    scheduling steps."""


def run(k: PassTables, s: Scheduler, clients: int, bench: Benchmark, prompt: float, gen: float) -> Replay:
    """Replay ``bench`` through ``clients`` closed-loop clients (module docstring); :class:`TooLarge` beyond
    :data:`MAX_NUM_PROMPTS` requests or :data:`MAX_PASSES` passes."""
    if bench.num_prompts > MAX_NUM_PROMPTS:
        raise TooLarge(f"{bench.num_prompts:,} requests, more than the {MAX_NUM_PROMPTS:,} a replay holds")
    prompts, outs = request_lengths(prompt, gen, bench)
    longest = int(np.max(prompts + outs))
    if longest > s.kv_tokens:
        raise Stalled(f"the KV pool holds {s.kv_tokens:.0f} tokens, less than one request of {longest}")
    loop = _Loop(k, s, clients, prompts, outs, arrival_times(bench))
    while loop.done < loop.n:
        loop.step()
    return replace(loop.result(), length_low=bench.length_low)


def arrival_times(bench: Benchmark) -> np.ndarray | None:
    """Open loop (``bench.request_rate``): the requests' arrival times in seconds, a Poisson process at that rate
    from a seeded generator, the first at 0 (``vllm bench serve --request-rate R``: exponential gaps, burstiness 1);
    None for a closed loop."""
    if bench.request_rate is None:
        return None
    gaps = np.random.default_rng(SEED + 1).exponential(1.0 / bench.request_rate, size=bench.num_prompts)
    gaps[0] = 0.0
    out: np.ndarray = np.cumsum(gaps)
    return out


class _Loop:
    """The replay's state: time, the waiting queue, the running requests and what was recorded.

    Requests are indices into per-request arrays (prompt and output length, arrival, prompt tokens still to
    compute, tokens in the KV cache, output tokens made, first-token time); the running requests are an index
    array in admission order, so a pass costs a few array operations whatever the batch."""

    def __init__(self, k: PassTables, s: Scheduler, clients: int, prompts: np.ndarray, outs: np.ndarray,
                 arrivals: np.ndarray | None = None) -> None:
        self.k, self.s = k, s
        self.n = len(prompts)
        self.clients = min(clients, self.n)
        self.prompts, self.outs = prompts.astype(np.int64), outs.astype(np.int64)
        self.arrive = np.zeros(self.n)
        self.todo = np.zeros(self.n, dtype=np.int64)
        """Prompt tokens still to compute (the prompt, or prompt + generated after a preemption)."""
        self.kv = np.zeros(self.n, dtype=np.int64)
        self.made = np.zeros(self.n, dtype=np.int64)
        self.first = np.full(self.n, np.nan)
        self.cached = np.zeros(self.n, dtype=np.int64)
        """Tokens a preempted request left in the prefix cache (0: none, or no prefix cache)."""
        self.free_at_preempt = np.zeros(self.n, dtype=np.int64)
        self.alloc_at_preempt = np.zeros(self.n, dtype=np.int64)
        self.allocated = 0
        """Tokens allocated from the free pool since the start (each decode token, each prompt chunk token)."""
        self.t = 0.0
        self.sent = 0
        self.waiting: deque[int] = deque()
        self.pending: list[int] = []
        """Requests sent at the end of the last pass: they reach the scheduler while the next pass runs
        (module docstring, "Arrivals")."""
        self.run = np.zeros(0, dtype=np.int64)
        self.kv_used = 0
        self.reserved = 0
        self.ratio = RATIO_INIT
        """SGLang's ``new_token_ratio`` (``ratio_admission``)."""
        self.admitting = 0
        """Tokens the requests admitted in the pass being planned reserve: prompt and clipped output, whole
        (``ratio_admission``); the running requests before them reserve ``ratio`` of their output left."""
        self.admitted_now = 0
        """Requests admitted in the pass being planned (the last ones of :attr:`run`)."""
        self.ttft = np.full(self.n, np.nan)
        self.tpot = np.full(self.n, np.nan)
        self.e2e = np.full(self.n, np.nan)
        self.passes = 0
        self.preemptions = 0
        self.decode_time = 0.0  # Σ pass time × decoding requests
        self.running_time = 0.0  # Σ pass time × running requests
        self.prefill_tokens = 0
        self.done = 0
        self.steps = 0
        """Scheduling steps taken (:meth:`_pass` calls): the replay's cost, bounded by :data:`MAX_PASSES`."""
        self.before_s = 0.0
        """GPU seconds of the pass before the one being planned (0 on an idle engine), behind which it is dispatched."""
        self.open = arrivals is not None
        """Open loop: every request arrives at its time in ``arrivals``, none waits for another to end."""
        if arrivals is not None:
            self.arrive = np.asarray(arrivals, dtype=float)
            self.todo = self.prompts.copy()
            self._arrive()
            return
        for _ in range(self.clients):
            self._send()
        self._arrive()  # the first burst finds the engine idle

    def _send(self) -> None:
        i = self.sent
        self.arrive[i] = self.t
        self.todo[i] = self.prompts[i]
        self.pending.append(i)
        self.sent += 1

    def _arrive(self) -> None:
        """The requests sent so far reach the scheduler's queue, in the order they were sent (open loop: those whose
        arrival time has come)."""
        if self.open:
            while self.sent < self.n and self.arrive[self.sent] <= self.t:
                self.waiting.append(self.sent)
                self.sent += 1
            return
        self.waiting.extend(self.pending)
        self.pending.clear()

    def step(self) -> None:
        """One pass with prompt chunks, or a stretch of decode-only passes up to the next event (a request
        arriving ends a stretch after its first pass)."""
        if self.open and not (self.run.size or self.waiting):
            self.t = max(self.t, float(self.arrive[self.sent]))  # idle until the next request arrives
            self._arrive()
        if self.pending and not (self.run.size or self.waiting):
            self._arrive()  # an idle engine takes them at once
        if not self.run.size:
            self.before_s = 0.0  # an idle engine: nothing hides this pass's dispatch
        none = np.zeros(0, dtype=np.int64)
        if self.s.schedule == "alternate" and self._prefill_ready():
            chunks = self._chunks(0)
            if chunks:
                self._pass(none, chunks, 1)
                return
        decoders = self._decoders_with_room()
        chunks = self._chunks(decoders.size) if self.s.schedule == "mixed" else []
        if chunks:
            self._pass(decoders, chunks, 1)
            return
        if not decoders.size:
            raise Stalled("no request can run")  # unreachable when the longest request fits the pool
        steps = 1 if self.pending else int(np.min(self.outs[decoders] - self.made[decoders]))
        if self.open and self.sent < self.n:  # the stretch ends with the pass in which the next request arrives
            step_s = max(self.k.decode(int(decoders.size), float(np.mean(self.kv[decoders]))), 1e-9)
            steps = min(steps, max(1, math.ceil((float(self.arrive[self.sent]) - self.t) / step_s)))
        if not self.s.reserve:
            steps = min(steps, int(self.s.kv_tokens - self.kv_used) // decoders.size)
        if self.s.padded_decode:  # a stretch stays inside one context bucket of its longest request
            need = int(np.max(self.kv[decoders])) + 1
            steps = min(steps, int(context_bucket(need)) - need + 1)
        self._pass(decoders, [], max(steps, 1))

    def _prefill_ready(self) -> bool:
        """SGLang runs a prefill pass when a prompt is mid-prefill or a waiting one can be admitted."""
        return bool(np.any(self.todo[self.run] > 0)) or (bool(self.waiting) and self._admits(self.waiting[0]))

    def _admits(self, i: int) -> bool:
        if self.run.size >= self.s.max_seqs:
            return False
        if self.s.reserve:
            return bool(self.reserved + self.prompts[i] + self.outs[i] <= self.s.kv_tokens)
        if self.s.ratio_admission:
            before = self.run[: self.run.size - self.admitted_now]
            left = np.minimum(self.outs[before] - self.made[before], CLIP_NEW_TOKENS)
            held = self.kv_used + self.admitting + self.ratio * float(np.sum(left))
            return bool(held + self.todo[i] + min(int(self.outs[i] - self.made[i]), CLIP_NEW_TOKENS)
                        <= self.s.kv_tokens)
        return self.kv_used < self.s.kv_tokens

    def _decoders_with_room(self) -> np.ndarray:
        """The running requests past their prompt; with on-demand KV, the newest running requests are preempted
        (recomputed later) until each decode has its token's slot."""
        if not self.s.reserve:
            decoding = int(np.count_nonzero(self.todo[self.run] == 0))
            while self.kv_used + decoding > self.s.kv_tokens and self.run.size > 1:
                i = int(self.run[-1])  # the newest running request
                self.run = self.run[:-1]
                decoding -= int(self.todo[i] == 0)
                self._preempt(i)
        decoders: np.ndarray = self.run[self.todo[self.run] == 0]
        return decoders

    def _preempt(self, i: int) -> None:
        """Return request ``i`` (already out of the running requests) to the head of the queue, its KV freed (into
        the prefix cache when the engine keeps one)."""
        if self.s.prefix_cache:
            self.cached[i] = self.kv[i]
            self.free_at_preempt[i] = int(self.s.kv_tokens - self.kv_used)
            self.alloc_at_preempt[i] = self.allocated
        self.kv_used -= int(self.kv[i])
        self.reserved -= int(self.prompts[i] + self.outs[i])
        self.kv[i] = 0
        self.todo[i] = self.prompts[i] + self.made[i]  # recomputed: its prompt and what it generated
        self.waiting.appendleft(i)
        self.preemptions += 1
        self.ratio = RATIO_INIT

    def _chunks(self, decode_tokens: int) -> list[tuple[int, int]]:
        """Prompt chunks of this pass: running requests in prefill first, then waiting ones (FCFS), within the
        token budget left by ``decode_tokens`` and the free KV slots."""
        left = self.s.token_budget - decode_tokens
        free = self.s.kv_tokens - self.kv_used - decode_tokens
        self.admitting = self.admitted_now = 0
        out: list[tuple[int, int]] = []
        for i in self.run[self.todo[self.run] > 0].tolist():
            if left <= 0 or free <= 0:
                return out
            t = int(min(self.todo[i], left, free))
            out.append((i, t))
            left, free = left - t, free - t
        while self.waiting and left > 0 and free > 0 and self._admits(self.waiting[0]):
            i = self.waiting.popleft()
            if self.s.ratio_admission:  # its whole clipped output, less what the running ones' reserve counts
                self.admitting += min(int(self.outs[i] - self.made[i]), CLIP_NEW_TOKENS) + int(self.todo[i])
                self.admitted_now += 1
            self.run = np.append(self.run, i)
            self.reserved += int(self.prompts[i] + self.outs[i])
            hit = min(self._cache_hit(i), max(int(free), 0))
            if hit:  # the cached prefix comes back without computing it; the last token is always recomputed
                self.todo[i] -= hit
                self.kv[i] += hit
                self.kv_used += hit
                free -= hit
            t = int(min(self.todo[i], left, free))
            out.append((i, t))
            left, free = left - t, free - t
        return out

    def _cache_hit(self, i: int) -> int:
        """Tokens of a re-admitted request still in the prefix cache (module docstring): its cached tokens less
        those the allocations since its preemption evicted, at most all but the last token to compute."""
        if not self.cached[i]:
            return 0
        evicted = max(0, self.allocated - int(self.alloc_at_preempt[i]) - int(self.free_at_preempt[i]))
        hit = min(max(0, int(self.cached[i]) - evicted), int(self.todo[i]) - 1)
        self.cached[i] = 0
        return max(hit, 0)

    def _pass(self, decoders: np.ndarray, chunks: list[tuple[int, int]], steps: int) -> None:
        """Run ``steps`` identical passes (``steps`` > 1 only without prompt chunks) and record what ends."""
        b = int(decoders.size)
        self.steps += 1
        if self.steps > MAX_PASSES:
            raise TooLarge(f"over {MAX_PASSES:,} scheduling steps after {self.done:,} of {self.n:,} requests")
        ctx = (float(np.mean(self.kv[decoders])) + (steps - 1) / 2.0) if b else 0.0
        spans = [(float(self.prompts[i] + self.made[i] - self.todo[i]), float(t)) for i, t in chunks]
        longest = float(np.max(self.kv[decoders])) + 1.0 if b else 0.0  # the stretch's first pass: same bucket
        cost = pass_cost(self.k, self.s, b, ctx, spans, longest, self.before_s)
        tau = cost.total_s
        self.before_s = tau - cost.dispatch_s - cost.host_s
        self.t += tau * steps
        self.passes += steps
        self.decode_time += tau * steps * b
        self.running_time += tau * steps * int(self.run.size)
        self.admitting = self.admitted_now = 0  # the pass is planned: its admissions are running requests now
        if b:
            self.ratio = max(self.ratio - RATIO_DECAY * steps, RATIO_MIN)
        self.made[decoders] += steps
        self.kv[decoders] += steps
        self.kv_used += b * steps
        self.allocated += b * steps + sum(t for _, t in chunks)
        for i, t in chunks:
            self.prefill_tokens += t
            self.todo[i] -= t
            self.kv[i] += t
            self.kv_used += t
            if self.todo[i] == 0:  # the pass that ends the prompt samples a token
                self.made[i] += 1
                if math.isnan(self.first[i]):
                    self.first[i] = self.t
                    self.ttft[i] = self.t - self.arrive[i]
        self._arrive()  # those sent before this pass reached the queue while it ran
        self._finish()

    def _finish(self) -> None:
        run = self.run
        ended_mask = (self.todo[run] == 0) & (self.made[run] >= self.outs[run])
        if not np.any(ended_mask):
            return
        ended = run[ended_mask]
        self.run = run[~ended_mask]  # the others keep their order (preemption takes the newest)
        if not self.run.size:
            self.ratio = RATIO_INIT
        self.kv_used -= int(np.sum(self.kv[ended]))
        self.reserved -= int(np.sum(self.prompts[ended] + self.outs[ended]))
        self.e2e[ended] = self.t - self.arrive[ended]
        o1 = self.outs[ended] - 1
        self.tpot[ended] = np.where(o1 > 0, (self.t - self.first[ended]) / np.maximum(o1, 1), 0.0)
        for _ in range(ended.size):
            self.done += 1
            if self.sent < self.n and not self.open:
                self._send()

    def result(self) -> Replay:
        dur = self.t
        return Replay(
            ttft_s=float(np.mean(self.ttft)), tpot_s=float(np.mean(self.tpot)), e2e_s=float(np.mean(self.e2e)),
            ttft_p50_s=float(np.percentile(self.ttft, 50)), ttft_p99_s=float(np.percentile(self.ttft, 99)),
            tpot_p50_s=float(np.percentile(self.tpot, 50)), tpot_p99_s=float(np.percentile(self.tpot, 99)),
            first_wave_ttft_s=float(np.mean(self.ttft[: self.clients])), duration_s=dur,
            requests_per_s=self.n / dur, output_tokens_per_s=float(np.sum(self.outs)) / dur,
            passes=self.passes, mean_pass_s=dur / self.passes, mean_decode_batch=self.decode_time / dur,
            mean_running=self.running_time / dur, prefill_tokens_per_pass=self.prefill_tokens / self.passes,
            preemptions=self.preemptions, num_prompts=self.n, length_low=1.0,
            mean_prompt=float(np.mean(self.prompts)), mean_gen=float(np.mean(self.outs)),
        )  # fmt: skip
