"""The engine thread of ``gpumatch serve``: scheduler + runner in a loop, off the HTTP event loop.

Requests come in through :meth:`Engine.submit` (any thread) with a callback; the loop, in its own thread, takes
commands, plans one pass (:class:`gpumatch.bench.server.scheduler.Scheduler`), runs it
(:class:`gpumatch.bench.server.runner.Runner`) and calls each request's callback with its new token (from the engine
thread: the HTTP layer hands it to its event loop with ``call_soon_threadsafe``). An error in a pass fails every
request in flight and the engine refuses new ones (``/health`` turns 503).

The iteration log keeps the last :data:`LOG_LENGTH` passes (kind, decode rows, prefill tokens, seconds).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpumatch.bench.server.metrics import Metrics
from gpumatch.bench.server.scheduler import Plan, Scheduler, Seq

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
    """torch.compile the per-layer stretches (:mod:`gpumatch.bench.server.runner`). Off by default: tested on a
    CPU only so far; on a GPU it has not yet run past its startup check (docs/serve.md)."""
    seed: int = 0
    eos_token_id: int | None = None


@dataclass(frozen=True)
class Event:
    """What a request's callback receives: a new token, and the finish reason with its last token (or alone, for
    ``abort`` / ``error``)."""

    token: int | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None


@dataclass(frozen=True)
class Iteration:
    kind: str
    decode_rows: int
    prefill_tokens: int
    chunks: int
    seconds: float


@dataclass
class _Command:
    kind: str
    seq: Seq | None = None
    rid: int = -1
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
        self.metrics = Metrics(scheduler.max_num_seqs)
        self.log: deque[Iteration] = deque(maxlen=LOG_LENGTH)
        self.error: str | None = None
        self._inbox: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._callbacks: dict[int, Callable[[Event], None]] = {}
        self._ids = 0
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

    def submit(self, prompt: list[int], max_tokens: int, ignore_eos: bool, callback: Callable[[Event], None]) -> int:
        """Queue a request; returns its id. ValueError when it can never fit or the engine failed."""
        if self.error is not None:
            raise RuntimeError(f"the engine failed: {self.error}")
        with self._id_lock:
            rid, self._ids = self._ids, self._ids + 1
        seq = Seq(rid, list(prompt), max_tokens, ignore_eos, self.eos)
        from gpumatch.bench.server.scheduler import check_fits

        why = check_fits(len(seq.prompt), max_tokens, self.scheduler.max_model_len)
        if why:
            raise ValueError(why)
        self._inbox.put(_Command("add", seq=seq, callback=callback))
        return rid

    def abort(self, rid: int) -> None:
        self._inbox.put(_Command("abort", rid=rid))

    def iterations(self) -> list[Iteration]:
        return list(self.log)

    # --- the engine thread ---------------------------------------------------------------------
    def _loop(self) -> None:
        bind = getattr(self.runner, "bind_thread", None)
        if bind is not None:
            bind()
        while not self._stop.is_set():
            self._drain(block=False)
            plan = self.scheduler.schedule()
            if not plan.decode and not plan.chunks:
                self._gauges()
                self._drain(block=True)
                continue
            try:
                self._pass(plan)
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
            seq = self.scheduler.abort(cmd.rid)
            cb = self._callbacks.pop(cmd.rid, None)
            if seq is not None:
                self.metrics.finished.labels("abort").inc()
                if cb is not None:
                    self.dispatch([(cb, Event(None, "abort", len(seq.prompt), len(seq.out)))])

    def _pass(self, plan: Plan) -> None:
        t0 = time.perf_counter()
        sampled = self.runner.step(plan)
        got = self.scheduler.apply(plan, sampled)
        events = []
        for s in got:
            cb = self._callbacks.get(s.rid)
            if s.finish_reason is not None:
                self._callbacks.pop(s.rid, None)
                self.metrics.finished.labels(s.finish_reason).inc()
            if cb is not None:
                events.append((cb, Event(s.out[-1], s.finish_reason, len(s.prompt), len(s.out))))
        self.dispatch(events)
        seconds = time.perf_counter() - t0
        self.log.append(Iteration(plan.kind, len(plan.decode), plan.prefill_tokens, len(plan.chunks), seconds))
        m = self.metrics
        m.iterations.labels(plan.kind).inc()
        m.iteration_s.observe(seconds)
        m.prompt_tokens.inc(plan.prefill_tokens)
        m.generation_tokens.inc(len(got))
        self._gauges()

    def _gauges(self) -> None:
        m, s = self.metrics, self.scheduler
        m.running.set(len(s.running))
        m.waiting.set(len(s.waiting))
        m.kv_usage.set(s.kv_usage)
        m.slots_used.set(len(s.running))

    def _fail(self, message: str) -> None:
        events = []
        self.error = message
        for rid, cb in list(self._callbacks.items()):
            self.metrics.finished.labels("error").inc()
            events.append((cb, Event(None, "error", 0, 0, error=message)))
            self._callbacks.pop(rid, None)
        self.dispatch(events)


def _call_each(events: list[tuple[Callable[[Event], None], Event]]) -> None:
    for cb, ev in events:
        cb(ev)
