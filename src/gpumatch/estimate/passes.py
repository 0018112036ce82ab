"""The cost of one pass of a serving engine replica: its decode rows and prompt chunks, part by part.

A pass costs ``D(B, ctx) + [L(B + T) − L(B)] + Σ [A(s + t) − A(s)] + host(seqs)``: ``D`` the decode step of the ``B``
decoding requests at their mean context (:func:`gpumatch.estimate.roofline.decode_step`, a table over B and
context); ``L(n)`` the linear work of a forward over ``n`` tokens -- projections, MLP, norms, collectives, which
read the weights once for every token of the pass (:func:`gpumatch.estimate.roofline.prefill_linear_s`) -- so the
``T`` prompt tokens of all the pass's chunks together add ``L(B + T) − L(B)``: little while the pass is bound by its
weight reads, their FLOPs once it is compute-bound (charging each prompt its own ``L(t) − L(1)`` would give every
prompt the weight-read slack again, and a pass of forty 200-token prompts almost nothing); ``A(x)`` the causal
attention of a prompt's first ``x`` tokens, each prompt's own (:func:`gpumatch.estimate.roofline
.prefill_attention_s`; a chunk starting at ``s`` costs ``A(s + t) − A(s)``); ``host`` the engine's per-pass CPU
cost. A pass without decodes (the first burst, SGLang's prefill passes) pays the one-token prefill for the weights
instead of ``D`` and ``L(1 + T) − L(1)`` for its tokens. A pass with prompt chunks also waits for the CPU to
dispatch its eager forward where the engine's profile states a cost per kernel of its own (``prefill_dispatch_s``:
SGLang): the next pass is dispatched while the GPU runs the one before (SGLang's overlap scheduler), so the wait
is what the dispatch takes beyond that pass's GPU time and its own (all of it beyond its own on an idle engine).

The replay (:mod:`gpumatch.estimate.replay`) adds these passes up over a benchmark; :func:`gpumatch.estimate
.pass_costs` holds them against the passes an engine logged. ``gpumatch serve`` runs its decode rows as CUDA graphs
of padded shapes (:func:`padded_shape`), which its profile's passes pay for.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from gpumatch.estimate import roofline
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums

CONTEXT_POINTS = 12
"""Context points of the decode-step table (linear interpolation between them)."""
PREFILL_POINTS = 64
"""Prompt-length points of the marginal prefill table (geometric; linear interpolation between them)."""


@dataclass(frozen=True)
class Scheduler:
    """The engine's scheduling rules (from its profile and tier): what a pass may hold and what it costs the host;
    the replay admits and preempts by them (:mod:`gpumatch.estimate.replay`)."""

    schedule: str
    """``mixed`` or ``alternate`` (:mod:`gpumatch.estimate.replay`)."""
    token_budget: float
    """Tokens one pass computes at most (``max_num_batched_tokens``, ``chunked_prefill_size``)."""
    max_seqs: float
    """Requests running at once at most (``inf``: only the KV cache limits them)."""
    kv_tokens: float
    """Tokens the KV pool of one replica holds."""
    reserve: bool
    """True: admit only when prompt + output fit (no preemption); False: on-demand blocks, preempt on overflow."""
    host_pass_s: float
    host_seq_s: float
    prefix_cache: bool = False
    """True: a preempted request's blocks stay in the engine's prefix cache, evicted oldest-freed first, so its
    re-admission recomputes only what other allocations took since (vLLM V1 and SGLang: prefix caching on by
    default, :mod:`gpumatch.estimate.replay`)."""
    padded_decode: bool = False
    """True: the decode rows run as a CUDA graph captured for a padded shape (:func:`padded_shape`: ``gpumatch
    serve``), so a pass costs the decode step of that shape."""
    decode_slots: float = math.inf
    """The largest batch bucket (the engine's slot count) when ``padded_decode``."""
    ratio_admission: bool = False
    """With on-demand blocks: admit only what the pool holds after reserving ``new_token_ratio`` of every running
    request's remaining output (SGLang; :mod:`gpumatch.estimate.replay`)."""


@dataclass
class PassTables:
    """Per-pass costs of one replica: the decode table over (batch, context), the linear work of a pass over its
    token count and the attention curve of one prompt (module docstring)."""

    decode_table: np.ndarray
    """Seconds, shape (batches, contexts): row ``b - 1`` is a decode step of ``b`` requests."""
    contexts: np.ndarray
    prefill_x: np.ndarray
    attention_s: np.ndarray
    """Prefill attention seconds of a prompt's first ``prefill_x`` tokens (causal), 0 at 0."""
    linear_x: np.ndarray
    linear_s: np.ndarray
    """Seconds of a forward of ``linear_x`` tokens without attention (weights read once for all of them)."""
    prefill_fixed_s: float
    micro_batches: Callable[[float], float]
    prefill_dispatch_s: float = 0.0
    """CPU seconds the engine takes to dispatch one eager prefill forward (:func:`gpumatch.estimate
    .engine_profiles.prefill_dispatch_s`; 0: none beyond the tables' own eager floor)."""

    def decode(self, batch: int, context: float) -> float:
        """One decode step of ``batch`` requests at a mean ``context`` (linear in context between points)."""
        row = self.decode_table[min(batch, self.decode_table.shape[0]) - 1]
        scale = batch / min(batch, self.decode_table.shape[0])  # beyond the table: proportional (never reached)
        step: float = float(np.interp(context, self.contexts, row)) * scale
        return step

    def chunk(self, start: float, tokens: float) -> float:
        """Attention cost of prompt tokens ``[start, start + tokens)`` of one request (its own keys only)."""
        lo, hi = np.interp([start, start + tokens], self.prefill_x, self.attention_s)
        return float(hi - lo)

    def linear(self, rows: int, tokens: float) -> float:
        """What ``tokens`` prompt tokens add to the linear work of a pass of ``rows`` decode rows (one weight
        read for all): ``L(rows + tokens) - L(rows)``, ``rows`` at least 1 (a pass without decodes pays the
        one-token forward, ``prefill_fixed_s``, as its base)."""
        if tokens <= 0:
            return 0.0
        lo, hi = np.interp([max(rows, 1), max(rows, 1) + tokens], self.linear_x, self.linear_s)
        return max(float(hi - lo), 0.0)


def pass_tables(m: ModelNums, c: Case, cal: Calibration, max_batch: int, max_context: float,
                max_pass_tokens: float, prefill_dispatch_s: float = 0.0) -> PassTables:
    """The cost tables of replica ``c`` for decode batches up to ``max_batch``, contexts up to ``max_context``
    tokens and passes of up to ``max_pass_tokens`` tokens (one vectorized evaluation each), with the engine's
    ``prefill_dispatch_s``."""
    batches = np.arange(1, max_batch + 1, dtype=float)[:, None]
    contexts = np.linspace(1.0, max(max_context, 2.0), CONTEXT_POINTS)
    table = np.broadcast_to(roofline.decode_step(m, replace(c, seqs_per_replica=batches), contexts[None, :],
                                                 cal)["time_s"],
                            (max_batch, CONTEXT_POINTS))
    xs = np.unique(np.concatenate(([1.0], np.geomspace(1.0, max(max_context, 2.0), PREFILL_POINTS))))
    attn = np.broadcast_to(roofline.prefill_attention_s(m, replace(c, prompt=xs), cal), xs.shape)
    ns = np.unique(np.concatenate(([1.0], np.geomspace(1.0, max(max_pass_tokens + max_batch, 2.0),
                                                         PREFILL_POINTS))))
    lin = np.broadcast_to(roofline.prefill_linear_s(m, replace(c, prompt=ns), cal), ns.shape)
    fixed = float(roofline.prefill(m, replace(c, prompt=1.0), cal, batch=1.0)["time_s"])

    def micro_batches(seqs: float) -> float:
        return float(np.max(roofline.pipeline_micro_batches(c, seqs)))

    return PassTables(np.array(table, dtype=float), contexts, np.concatenate(([0.0], xs)),
                  np.maximum.accumulate(np.concatenate(([0.0], np.array(attn, dtype=float)))), ns,
                  np.maximum.accumulate(np.array(lin, dtype=float)), fixed, micro_batches, prefill_dispatch_s)


CONTEXT_STEP = 512
"""Context buckets of ``gpumatch serve`` above 512 tokens: steps of ``max(512, max_model_len / 8)``
(``bench/server/runner.context_buckets``), 512 for the ``--max-model-len`` up to 4096 its runs use."""


def batch_bucket(rows: float, slots: float = math.inf) -> int:
    """The batch ``gpumatch serve`` runs ``rows`` decode rows as: the next power of two, at most the slot count
    (``bench/server/runner.buckets``: 1, 2, 4, ... below the slots, then the slots)."""
    if rows <= 0:
        return 0
    return int(min(2 ** math.ceil(math.log2(max(rows, 1.0)) - 1e-9), max(slots, math.ceil(rows))))


def context_bucket(tokens: float) -> float:
    """The keys every decode row of a ``gpumatch serve`` pass reads when the longest row attends ``tokens``:
    powers of two from 16 to 512, then multiples of :data:`CONTEXT_STEP` (``bench/server/runner.context_buckets``;
    its decode attention is one masked SDPA call over the context bucket, keys past a row's length masked but read)."""
    if tokens <= 512:
        return float(max(16, 2 ** math.ceil(math.log2(max(tokens, 1.0)) - 1e-9)))
    return float(CONTEXT_STEP * math.ceil(tokens / CONTEXT_STEP - 1e-9))


def padded_shape(rows: float, longest: float, slots: float = math.inf) -> tuple[int, float]:
    """(rows, keys per row) of the decode graph ``gpumatch serve`` replays for ``rows`` decode rows whose longest
    attends ``longest`` keys: :func:`batch_bucket` and :func:`context_bucket`."""
    return batch_bucket(rows, slots), context_bucket(longest)


@dataclass(frozen=True)
class PassShape:
    """One pass as an engine ran it: ``decode_rows`` decoding requests at a mean ``context`` (tokens each attends,
    its new one included) and the prompt ``chunks`` (first position, tokens)."""

    decode_rows: int
    context: float
    chunks: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class PassCost:
    """One pass's predicted seconds by part (module docstring)."""

    decode_s: float
    """``D(B, ctx)``, or the one-token prefill's weight read for a pass without decodes."""
    linear_s: float
    """``L(B + T) − L(B)``: the prompt tokens' share of the linear work (÷ pipeline micro-batches)."""
    attention_s: float
    """``Σ [A(s + t) − A(s)]``: each chunk's attention over its own prompt (÷ pipeline micro-batches)."""
    host_s: float
    """The engine's CPU cost of the pass: ``host_pass_s + host_seq_s · (B + chunks)``."""
    dispatch_s: float = 0.0
    """A pass with prompt chunks: what dispatching its eager forward takes beyond its GPU work and the GPU time of
    the pass before it, which the dispatch overlaps (SGLang's overlap scheduler launches a pass while the GPU runs
    the one before; on an idle engine nothing hides it): ``max(0, prefill_dispatch_s − decode − linear −
    attention − hidden)``."""

    @property
    def total_s(self) -> float:
        return self.decode_s + self.linear_s + self.attention_s + self.host_s + self.dispatch_s


def pass_cost(k: PassTables, s: Scheduler, decode_rows: int, context: float,
              chunks: list[tuple[float, float]], longest: float = 0.0, hidden_s: float = math.inf) -> PassCost:
    """The cost of one pass of ``decode_rows`` decoding requests at mean ``context`` tokens (the longest attending
    ``longest``) and the prompt ``chunks`` (first position, tokens) (module docstring): the replay's
    pass, and what :func:`gpumatch.estimate.pass_costs` holds against an engine's logged passes. A padded engine
    (``s.padded_decode``) pays the decode step of its graph's shape (:func:`padded_shape`). ``hidden_s``: the GPU
    time of the pass before, behind which this one is dispatched (0 on an idle engine; by default all of the
    dispatch is taken as hidden: ``PassCost.dispatch_s``)."""
    seqs = decode_rows + len(chunks)
    split = k.micro_batches(float(seqs)) if chunks else 1.0
    attention = sum(k.chunk(start, t) for start, t in chunks) / split
    linear = k.linear(decode_rows, sum(t for _, t in chunks)) / split
    rows, ctx = decode_rows, context
    if s.padded_decode and decode_rows:  # eager mixed passes pad their decode rows the same way
        rows, ctx = padded_shape(decode_rows, max(longest, context), s.decode_slots)
    base = k.decode(rows, ctx) if decode_rows else k.prefill_fixed_s
    dispatch = max(0.0, k.prefill_dispatch_s - base - linear - attention - hidden_s) if chunks else 0.0
    return PassCost(base, linear, attention, s.host_pass_s + s.host_seq_s * seqs, dispatch)
