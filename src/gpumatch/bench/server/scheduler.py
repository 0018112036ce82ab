"""The iteration-level scheduler of ``gpumatch serve`` (torch-free).

Rules (after vLLM V1's scheduler, https://docs.vllm.ai/en/latest/configuration/optimization.html "Chunked
Prefill": running decodes are scheduled first, then prompt chunks fill the token budget; and Orca's
iteration-level scheduling, Yu et al., OSDI 2022):

1. **Slots.** The KV cache has ``max_num_seqs`` slots of ``max_model_len`` tokens each. A request is admitted
   (leaves the waiting queue, first come first served) only when a slot is free; it keeps its slot until it
   finishes, so admission *is* the capacity check and nothing is ever preempted. A request whose prompt plus
   ``max_tokens`` exceeds ``max_model_len`` is refused when it arrives (:func:`check_fits`).
2. **One iteration** (one forward pass) holds: one token for every running sequence whose prompt is done
   (decode rows), then prompt chunks, FCFS: first the admitted sequences still in prefill, then newly admitted
   ones, each chunk as long as the budget ``max_num_batched_tokens - decode rows`` still allows.
3. The pass that computes a prompt's last chunk samples its first output token; each later pass one more.
   A sequence finishes at ``max_tokens`` output tokens (``length``), or ``stop`` at the EOS id (when it has one
   and the request does not ``ignore_eos``) or at one of its ``stop_ids`` (vLLM's ``stop_token_ids``), neither
   before ``min_tokens`` outputs; its slot is free for the next iteration's admission.

The slot taken is always the lowest free one, so the occupied slots stay packed at the low end (the decode batch
is the slot range up to the highest decoding slot, :attr:`Plan.decode_span`).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TokenLogprob:
    """The natural-log probability of one token and the ``k`` most likely ids at its position (id, log-prob),
    most likely first (vLLM's ``Logprob`` entries)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass
class Seq:
    """One request inside the engine. Token counts; times in seconds of ``time.monotonic``."""

    rid: int
    prompt: list[int]
    max_tokens: int
    ignore_eos: bool = True
    eos: int | None = None
    slot: int = -1
    computed: int = 0
    """Prompt tokens whose K/V are in the cache."""
    out: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stop_ids: frozenset[int] = frozenset()
    """Token ids that end the request with ``stop`` (the EOS id aside)."""
    min_tokens: int = 0
    """Outputs before which neither EOS nor a stop id ends the request."""
    logprobs: int | None = None
    """Top-k log-probabilities wanted with each output token (0: only the sampled one's), None: none."""
    prompt_logprobs: int | None = None
    """The same for every prompt token after the first (``echo`` with ``logprobs``)."""
    stop_reason: int | None = None
    """The id that ended the request with ``stop`` (None for EOS or any other reason), as vLLM's ``stop_reason``."""
    arrival_s: float = 0.0
    scheduled_s: float | None = None
    """When its first prompt chunk was scheduled (end of its queue time)."""
    first_token_s: float | None = None
    last_token_s: float | None = None
    prompt_lp: list[TokenLogprob] = field(default_factory=list)
    """Log-probabilities of prompt tokens 1.. (filled chunk by chunk when ``prompt_logprobs`` is set)."""

    @property
    def prefilling(self) -> bool:
        return self.computed < len(self.prompt)

    @property
    def kv_tokens(self) -> int:
        """Tokens this sequence holds in its slot (prompt computed + outputs fed back)."""
        return self.computed + max(len(self.out) - 1, 0)


@dataclass(frozen=True)
class Chunk:
    """Prompt tokens ``[start, start + length)`` of ``seq`` in this pass."""

    seq: Seq
    start: int
    length: int

    @property
    def completes(self) -> bool:
        return self.start + self.length == len(self.seq.prompt)


@dataclass(frozen=True)
class Plan:
    """One iteration: the decode rows and the prompt chunks (either may be empty, not both)."""

    decode: tuple[Seq, ...]
    chunks: tuple[Chunk, ...]

    @property
    def prefill_tokens(self) -> int:
        return sum(c.length for c in self.chunks)

    @property
    def kind(self) -> str:
        """``decode``, ``prefill`` or ``mixed`` (both in one pass)."""
        if self.decode and self.chunks:
            return "mixed"
        return "decode" if self.decode else "prefill"

    @property
    def decode_span(self) -> int:
        """Slots ``0 .. span-1`` hold every decode row (the batch the decode attention runs over)."""
        return max((s.slot for s in self.decode), default=-1) + 1


def check_fits(prompt_tokens: int, max_tokens: int, max_model_len: int) -> str | None:
    """Why a request cannot be served at all (a message), or None."""
    if prompt_tokens < 1:
        return "the prompt has no tokens"
    if max_tokens < 1:
        return f"max_tokens must be at least 1, not {max_tokens}"
    if prompt_tokens + max_tokens > max_model_len:
        return (f"this server's maximum context length is {max_model_len} tokens; the request has "
                f"{prompt_tokens} prompt tokens and max_tokens {max_tokens}")
    return None


def _finish(s: Seq, tok: int) -> str | None:
    """Why ``s`` ends with its new output ``tok``: ``length`` (``max_tokens`` reached, checked first), ``stop`` (EOS
    unless ignored, or a stop id, kept in ``stop_reason``; not before ``min_tokens``), or None."""
    if len(s.out) >= s.max_tokens:
        return "length"
    if len(s.out) >= s.min_tokens:
        if tok in s.stop_ids:
            s.stop_reason = tok
            return "stop"
        if s.eos is not None and not s.ignore_eos and tok == s.eos:
            return "stop"
    return None


class Scheduler:
    """Waiting queue, slots and the per-iteration plan (module docstring). Not thread-safe: one engine thread."""

    def __init__(self, max_num_seqs: int, max_model_len: int, max_num_batched_tokens: int) -> None:
        if min(max_num_seqs, max_model_len, max_num_batched_tokens) < 1:
            raise ValueError("slots, model length and token budget must be positive")
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self.budget = max_num_batched_tokens
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self._free: list[int] = list(range(max_num_seqs))
        heapq.heapify(self._free)
        self._ids = itertools.count()

    # --- queue ---------------------------------------------------------------------------------
    def add(self, seq: Seq) -> None:
        why = check_fits(len(seq.prompt), seq.max_tokens, self.max_model_len)
        if why:
            raise ValueError(why)
        self.waiting.append(seq)

    def abort(self, rid: int, reason: str = "abort") -> Seq | None:
        """Drop request ``rid`` (client gone: ``abort``; a stop string seen by the HTTP layer: ``stop``): out of the
        queue, or its slot freed. The sequence, or None."""
        for s in self.waiting:
            if s.rid == rid:
                self.waiting.remove(s)
                s.finish_reason = reason
                return s
        for s in self.running:
            if s.rid == rid:
                s.finish_reason = reason
                self._release(s)
                return s
        return None

    # --- one iteration -------------------------------------------------------------------------
    def schedule(self) -> Plan:
        """The next pass: decode rows first, then prompt chunks within the budget (module docstring)."""
        decode = tuple(s for s in self.running if not s.prefilling)
        left = self.budget - len(decode)
        chunks: list[Chunk] = []
        for s in self.running:
            if left <= 0:
                break
            if s.prefilling:
                chunks.append(self._chunk(s, left))
                left -= chunks[-1].length
        while left > 0 and self.waiting and self._free:
            s = self.waiting.popleft()
            s.slot = heapq.heappop(self._free)
            self.running.append(s)
            chunks.append(self._chunk(s, left))
            left -= chunks[-1].length
        return Plan(decode, tuple(chunks))

    @staticmethod
    def _chunk(s: Seq, left: int) -> Chunk:
        return Chunk(s, s.computed, min(len(s.prompt) - s.computed, left))

    def apply(self, plan: Plan, sampled: dict[int, int]) -> list[Seq]:
        """Record the pass: ``sampled`` maps the rid of every row that sampled (decode rows, completing chunks)
        to its new token. Returns the sequences that got a token, finished ones with ``finish_reason`` set and
        their slots freed."""
        for c in plan.chunks:
            c.seq.computed += c.length
        got: list[Seq] = []
        for s in list(plan.decode) + [c.seq for c in plan.chunks if c.completes]:
            if s.finish_reason is not None:  # aborted while the pass ran
                continue
            tok = sampled[s.rid]
            s.out.append(tok)
            got.append(s)
            s.finish_reason = _finish(s, tok)
            if s.finish_reason is not None:
                self._release(s)
        return got

    def _release(self, s: Seq) -> None:
        if s in self.running:
            self.running.remove(s)
            heapq.heappush(self._free, s.slot)

    # --- gauges --------------------------------------------------------------------------------
    @property
    def kv_tokens_used(self) -> int:
        return sum(s.kv_tokens for s in self.running)

    @property
    def kv_usage(self) -> float:
        """Fraction of the cache's token capacity (slots x model length) that running sequences hold."""
        return self.kv_tokens_used / (self.max_num_seqs * self.max_model_len)

    def next_id(self) -> int:
        return next(self._ids)
