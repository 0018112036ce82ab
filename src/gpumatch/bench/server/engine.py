"""The engine thread of ``gpumatch serve``: scheduler + runner in a loop, off the HTTP event loop.

Requests come in through :meth:`Engine.submit` (any thread) with a callback; the loop, in its own thread, takes
commands, plans one pass (:class:`gpumatch.bench.server.scheduler.Scheduler`), runs it
(:class:`gpumatch.bench.server.runner.Runner`) and calls each request's callback with its new token (from the engine
thread: the HTTP layer hands it to its event loop with ``call_soon_threadsafe``). An error in a pass fails every
request in flight and the engine refuses new ones (``/health`` turns 503).

The iteration log keeps the last :data:`LOG_LENGTH` passes (:class:`Iteration`: its number and start, kind, decode
rows, prefill tokens, the shape the runner ran and the seconds of scheduling and of the pass), so a load level's
passes can be told apart and the time between tokens split into scheduling, pass and the gap between passes
(``benchmarks/serve_passes.py``).
Per-request times (arrival at :meth:`Engine.submit`, first scheduled, first and last token, ``time.monotonic``)
feed the ``vllm:*`` histograms of :mod:`gpumatch.bench.server.metrics`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gpumatch.bench.server.metrics import Metrics, RequestTimes
from gpumatch.bench.server.scheduler import Plan, Scheduler, Seq, TokenLogprob, check_fits

LOG_LENGTH = 4096
MEMORY_FRACTION = 0.9
"""Share of the GPU's memory the server may take (weights, activations, graphs and KV slots), as vLLM's
``gpu_memory_utilization`` default."""


@dataclass(frozen=True)
class EngineConfig:
    """What to serve and how (counts; ``dtype`` one of bf16, fp16, fp32, auto)."""

    shape: dict[str, Any]
    max_num_seqs: int = 256
    max_model_len: int = 2048
    max_num_batched_tokens: int = 8192
    dtype: str = "auto"
    device: str = "auto"
    cuda_graphs: bool = True
    compile: bool = False
    """torch.compile the per-layer stretches (:mod:`gpumatch.bench.server.runner`). Off by default: one GPU run so
    far (an H100, 2026-12-07: TPOT 17-30% below the uncompiled server's, docs/serve.md)."""
    seed: int = 0
    eos_token_id: int | None = None


@dataclass(frozen=True)
class Options:
    """A request's sampling-side options beyond prompt and length (vLLM's names): ``stop_token_ids``,
    ``min_tokens``, ``logprobs`` (top-k with each output token), ``prompt_logprobs`` (the same for the prompt)."""

    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None


class Event(NamedTuple):
    """What a request's callback receives: a new token, and the finish reason with its last token (or alone, for
    ``abort`` / ``error``). ``stop_reason``: the stop id that ended it; ``logprob``: the token's, when asked;
    ``prompt_logprobs``: with the first token, the prompt's (tokens 1..), when asked. (A named tuple: one is made
    per token, and it is cheaper to make than a frozen dataclass.)"""

    token: int | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None
    stop_reason: int | None = None
    logprob: TokenLogprob | None = None
    prompt_logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class Iteration:
    """One pass as the engine ran it. ``index``: passes since the engine started (0 first); ``start_s``: its start,
    ``time.monotonic`` seconds (the clock of the request times); ``schedule_s``: the scheduler's planning before it;
    ``seconds``: the pass itself (forward, sampled ids back, bookkeeping, events handed over); ``span`` x
    ``context``: the batch bucket (decode rows padded to it) and context bucket (keys each decode row reads) the
    runner ran, 0 where the runner does not say; ``graph``: replayed from a CUDA graph; ``attended``: the keys the
    decode rows attend, summed over the rows (each row's context, its new token included); ``chunk_spans``: each
    prompt chunk's (first position, tokens)."""

    kind: str
    decode_rows: int
    prefill_tokens: int
    chunks: int
    seconds: float
    index: int = 0
    start_s: float = 0.0
    schedule_s: float = 0.0
    span: int = 0
    context: int = 0
    graph: bool = False
    attended: int = 0
    chunk_spans: tuple[tuple[int, int], ...] = ()


@dataclass
class _Command:
    kind: str
    seq: Seq | None = None
    rid: int = -1
    reason: str = "abort"
    callback: Callable[[Event], None] | None = None


@dataclass
class EngineInfo:
    """What was built (for ``/v1/models``, the startup line and the docs)."""

    model: str
    device: str
    dtype: str
    params: int
    slots: int
    max_model_len: int
    max_num_batched_tokens: int
    kv_cache_bytes: int
    cuda_graphs: int
    compiled: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Engine:
    """The loop (module docstring). Build with :func:`gpumatch.bench.server.build.build_engine`."""

    def __init__(self, runner: Any, scheduler: Scheduler, info: EngineInfo, eos: int | None) -> None:
        self.runner, self.scheduler, self.info, self.eos = runner, scheduler, info, eos
        self.metrics = Metrics(scheduler.max_num_seqs, info.model, scheduler.max_model_len)
        self.log: deque[Iteration] = deque(maxlen=LOG_LENGTH)
        self.error: str | None = None
        self._inbox: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._callbacks: dict[int, Callable[[Event], None]] = {}
        self._ids = 0
        self._passes = 0
        self._id_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpumatch-engine", daemon=True)
        self.dispatch: Callable[[list[tuple[Callable[[Event], None], Event]]], None] = _call_each
        """How a pass's events reach their callbacks: all at once (the HTTP layer sets one hand-over to its event
        loop per pass, instead of one per token)."""

    # --- any thread ----------------------------------------------------------------------------
    def start(self) -> Engine:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._inbox.put(_Command("wake"))
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def submit(self, prompt: list[int], max_tokens: int, ignore_eos: bool, callback: Callable[[Event], None],
               options: Options | None = None) -> int:
        """Queue a request; returns its id. ValueError when it can never fit, RuntimeError when the engine
        failed. ``options`` (its ``ignore_eos`` aside, which the argument gives) as :class:`Options`."""
        if self.error is not None:
            raise RuntimeError(f"the engine failed: {self.error}")
        o = options or Options()
        why = check_fits(len(prompt), max_tokens, self.scheduler.max_model_len)
        if why:
            raise ValueError(why)
        with self._id_lock:
            rid, self._ids = self._ids, self._ids + 1
        seq = Seq(rid, list(prompt), max_tokens, ignore_eos, self.eos, stop_ids=frozenset(o.stop_token_ids),
                  min_tokens=o.min_tokens, logprobs=o.logprobs, prompt_logprobs=o.prompt_logprobs,
                  arrival_s=time.monotonic())
        self._inbox.put(_Command("add", seq=seq, callback=callback))
        return rid

    def abort(self, rid: int, reason: str = "abort") -> None:
        """End request ``rid`` early: ``abort`` (client gone) or ``stop`` (a stop string seen by the caller)."""
        self._inbox.put(_Command("abort", rid=rid, reason=reason))

    def iterations(self) -> list[Iteration]:
        return list(self.log)

    # --- the engine thread ---------------------------------------------------------------------
    def _loop(self) -> None:
        bind = getattr(self.runner, "bind_thread", None)
        if bind is not None:
            bind()
        while not self._stop.is_set():
            self._drain(block=False)
            t0 = time.perf_counter()
            plan = self.scheduler.schedule()
            if not plan.decode and not plan.chunks:
                self._gauges()
                self._drain(block=True)
                continue
            try:
                self._pass(plan, time.perf_counter() - t0)
            except Exception as exc:  # the device failed: every request in flight gets the error
                self._fail(f"{type(exc).__name__}: {str(exc)[:300]}")
                return

    def _drain(self, block: bool) -> None:
        try:
            cmd = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._command(cmd)
            try:
                cmd = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _command(self, cmd: _Command) -> None:
        if cmd.kind == "add" and cmd.seq is not None and cmd.callback is not None:
            self._callbacks[cmd.seq.rid] = cmd.callback
            self.scheduler.add(cmd.seq)
        elif cmd.kind == "abort":
            seq = self.scheduler.abort(cmd.rid, cmd.reason)
            cb = self._callbacks.pop(cmd.rid, None)
            if seq is not None:
                self._finished(seq, time.monotonic())
                if cb is not None:
                    self.dispatch([(cb, Event(None, cmd.reason, len(seq.prompt), len(seq.out)))])
            self._gauges()

    def _pass(self, plan: Plan, schedule_s: float = 0.0) -> None:
        t0 = time.perf_counter()
        now = start = time.monotonic()
        attended = sum(s.kv_tokens + 1 for s in plan.decode)
        spans = tuple((c.start, c.length) for c in plan.chunks)
        for c in plan.chunks:
            if c.seq.scheduled_s is None:
                c.seq.scheduled_s = now
        step = getattr(self.runner, "sample", None)
        sampled = step(plan) if step is not None else None
        ids = sampled.ids if sampled is not None else self.runner.step(plan)
        got = self.scheduler.apply(plan, ids)
        now = time.monotonic()
        events = []
        prompt_lps = sampled.prompt_logprobs if sampled is not None else {}
        scored = bool(prompt_lps or (sampled is not None and sampled.logprobs))
        for s in got:
            if prompt_lps:
                s.prompt_lp += prompt_lps.get(s.rid, [])
            self._timing(s, now)
            cb = self._callbacks.get(s.rid)
            if s.finish_reason is not None:
                self._callbacks.pop(s.rid, None)
                self._finished(s, now)
            if cb is not None:
                events.append((cb, self._event(s, sampled) if scored else
                               Event(s.out[-1], s.finish_reason, len(s.prompt), len(s.out), None, s.stop_reason)))
        seconds = time.perf_counter() - t0
        span, context, graph = getattr(self.runner, "last_shape", (0, 0, False))
        self.log.append(Iteration(plan.kind, len(plan.decode), plan.prefill_tokens, len(plan.chunks), seconds,
                                  self._passes, start, schedule_s, span, context, graph, attended, spans))
        self._passes += 1
        m = self.metrics
        m.iterations.labels(plan.kind).inc()
        m.iteration_s.observe(seconds)
        m.prompt_tokens.inc(plan.prefill_tokens)
        m.generation_tokens.inc(len(got))
        m.vllm.prompt_tokens += plan.prefill_tokens
        m.vllm.generation_tokens += len(got)
        m.vllm.iteration_tokens.observe(plan.prefill_tokens + len(plan.decode))
        self._gauges()
        # the counters first: a client that reads /metrics as soon as its response ends sees its own tokens
        self.dispatch(events)

    @staticmethod
    def _event(s: Seq, sampled: Any) -> Event:
        """The event of ``s``'s new token (with its log-probs, and the prompt's with the first token)."""
        lp = sampled.logprobs.get(s.rid) if sampled is not None else None
        plp = tuple(s.prompt_lp) if s.prompt_logprobs is not None and len(s.out) == 1 else None
        return Event(s.out[-1], s.finish_reason, len(s.prompt), len(s.out), stop_reason=s.stop_reason,
                     logprob=lp, prompt_logprobs=plp)

    def _timing(self, s: Seq, now: float) -> None:
        """TTFT at the first token, the gap since the previous one at every later token."""
        v = self.metrics.vllm
        if s.first_token_s is None:
            s.first_token_s = now
            v.ttft.observe(now - s.arrival_s)
        elif s.last_token_s is not None:
            v.itl.observe(now - s.last_token_s)
        s.last_token_s = now

    def _finished(self, s: Seq, now: float) -> None:
        """Count a finished (or aborted) request; its phase times when it got a token."""
        reason = s.finish_reason or "abort"
        self.metrics.finished.labels(reason).inc()
        times = None
        if s.first_token_s is not None and s.scheduled_s is not None:
            last = s.last_token_s if s.last_token_s is not None else now
            times = RequestTimes(e2e_s=last - s.arrival_s, queue_s=s.scheduled_s - s.arrival_s,
                                 prefill_s=s.first_token_s - s.scheduled_s, decode_s=last - s.first_token_s,
                                 prompt_tokens=len(s.prompt), generation_tokens=len(s.out), max_tokens=s.max_tokens)
        self.metrics.vllm.finished(reason, times)

    def _gauges(self) -> None:
        m, s = self.metrics, self.scheduler
        running, waiting, usage = len(s.running), len(s.waiting), s.kv_usage
        m.running.set(running)
        m.waiting.set(waiting)
        m.kv_usage.set(usage)
        m.slots_used.set(running)
        m.vllm.running, m.vllm.waiting, m.vllm.kv_usage = running, waiting, usage

    def _fail(self, message: str) -> None:
        events = []
        self.error = message
        for rid, cb in list(self._callbacks.items()):
            self.metrics.finished.labels("error").inc()
            self.metrics.vllm.success["error"] += 1
            events.append((cb, Event(None, "error", 0, 0, error=message)))
            self._callbacks.pop(rid, None)
        self.dispatch(events)


def _call_each(events: list[tuple[Callable[[Event], None], Event]]) -> None:
    for cb, ev in events:
        cb(ev)
