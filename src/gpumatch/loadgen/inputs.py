"""The requests of each level and of its warm-up: synthetic or from a dataset, with or without a tokenizer.

A count-limited level gets ``num_prompts`` requests; a time-limited one (``--duration``) an endless supply: a first
block made before the level starts, large enough for the whole level where that is known (open loop: 1.25 × rate ×
duration + 16; closed loop: ``num_prompts``, at most :data:`MAX_HEAD`), so that making prompts (tokenizing them)
does not hold up the sending; then blocks of :data:`~gpumatch.loadgen.workload.BLOCK` made as they are needed
(any time that costs shows up as ``client_lag``, never hidden). Seeds differ per level and per block, and each synthetic
prompt starts with its level's tag, so no two levels share a prompt (no prefix-cache hits across levels).

Warm-up (vLLM ``bench serve --num-warmups``, whose default is 0, sends that many copies of the first request under
its concurrency limit before measuring): gpumatch sends distinct requests of the level's shape at the level's own
concurrency or rate. ``--warmup auto`` (the default) sends, closed loop at ``C`` clients,
``min(2 C, max(C, n // 4))`` requests (every client at least once, so the server reaches its batch of ``C``; two
each while that is at most a quarter of the level's ``n`` requests), and open loop at rate ``λ``,
``min(max(2, ⌈2 s × λ⌉), max(2, n // 4))`` (about two seconds of arrivals). ``--warmup 0`` turns it off.

Also here: :func:`check_load_options` (the one-line refusals of these options) and :func:`ticker` (the
per-request progress callback).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpumatch.errors import InputError
from gpumatch.loadgen.metrics import RequestRecord
from gpumatch.loadgen.runner import Level
from gpumatch.loadgen.workload import BLOCK, RequestSpec, synthetic

if TYPE_CHECKING:
    from gpumatch.loadgen.datasets import Dataset
    from gpumatch.loadgen.tokens import TokenCounter

MAX_WARMUP = 10_000
MAX_HEAD = 20_000
WARMUP_SECONDS = 2.0


@dataclass(frozen=True)
class Inputs:
    """What every level's requests are made from: the lengths, the seed, the tokenizer and the dataset."""

    num_prompts: int
    prompt_tokens: int
    output_tokens: int
    range_ratio: float
    seed: int
    counter: TokenCounter | None = None
    dataset: Dataset | None = None

    def _block(self, n: int, seed: tuple[int, ...], tag: str, first_index: int) -> list[RequestSpec]:
        if self.dataset is not None:
            return self.dataset.sample(n, seed, first_index)
        return synthetic(n, self.prompt_tokens, self.output_tokens, self.range_ratio, seed, tag=tag,
                         counter=self.counter, first_index=first_index)

    def level(self, level: Level) -> list[RequestSpec] | Iterable[RequestSpec]:
        """The level's requests: a list of ``num_prompts``, or an endless supply for a time-limited level."""
        seed = (self.seed, level.index + 1)
        tag = f"L{level.index}-"
        if level.duration_s is None:
            return self._block(self.num_prompts, seed, tag, 0)
        n = self.num_prompts
        if level.mode == "rate":
            n = math.ceil(1.25 * level.value * level.duration_s) + 16
        head = self._block(min(max(n, BLOCK), MAX_HEAD), (*seed, 0), tag, 0)

        def tail() -> Iterator[RequestSpec]:
            for b in itertools.count(1):
                yield from self._block(BLOCK, (*seed, b), tag, len(head) + (b - 1) * BLOCK)

        return itertools.chain(head, tail())

    def warmup(self, level: Level, count: int) -> list[RequestSpec]:
        """``count`` warm-up requests of the level's shape, unlike any measured prompt."""
        return self._block(count, (self.seed, level.index + 1, 1_000_003), f"W{level.index}-", 0) if count else []


def warmup_count(asked: int | None, level: Level, num_prompts: int) -> int:
    """Warm-up requests for ``level``: ``asked`` when given, else the ``auto`` rule (module docstring)."""
    if asked is not None:
        return asked
    cap = max(2, num_prompts // 4)
    if level.mode == "concurrency":
        c = int(level.value)
        return min(2 * c, max(c, cap))
    return min(max(2, math.ceil(WARMUP_SECONDS * level.value)), cap)


def load_inputs(req: Any) -> Inputs:
    """The tokenizer and the dataset a :class:`~.bench.ServeRequest` names, read once for the run."""
    from gpumatch.loadgen.datasets import load_dataset
    from gpumatch.loadgen.tokens import load_tokenizer

    counter = load_tokenizer(Path(req.tokenizer)) if req.tokenizer is not None else None
    dataset = None
    if req.dataset is not None:
        dataset = load_dataset(req.dataset_format, Path(req.dataset), req.output_tokens, counter)
    return Inputs(req.num_prompts, req.prompt_tokens, req.output_tokens, req.range_ratio, req.seed, counter, dataset)


def check_load_options(req: Any) -> None:
    """Refuse bad --warmup, --duration, --grace, --burstiness, --prompt-tolerance, dataset format (one line)."""
    from gpumatch.loadgen.datasets import FORMATS
    from gpumatch.loadgen.workload import check_arrival

    if req.warmup is not None and not 0 <= req.warmup <= MAX_WARMUP:
        raise InputError(f"--warmup must be 0 to {MAX_WARMUP} requests or auto, got {req.warmup}")
    if req.duration_s is not None and not (req.duration_s > 0 and math.isfinite(req.duration_s)):
        raise InputError(f"--duration must be a positive number of seconds, got {req.duration_s}")
    if not (req.grace_s >= 0 and math.isfinite(req.grace_s)):
        raise InputError(f"--grace must be 0 or more seconds, got {req.grace_s}")
    check_arrival(1.0, req.arrival, req.burstiness)
    if req.prompt_tolerance is not None and req.prompt_tolerance < 0:
        raise InputError(f"--prompt-tolerance must be 0 or more tokens, got {req.prompt_tolerance}")
    if req.dataset is not None and req.dataset_format not in FORMATS:
        raise InputError(f"unknown dataset format {req.dataset_format!r}", "--dataset sharegpt FILE or jsonl FILE")


def ticker(say: Callable[..., None], level: Level, specs: Any,
           phase: str = "requests") -> Callable[[RequestRecord], None]:
    """The per-request progress callback: requests done of total, or seconds done of a time-limited level."""
    done = [0]
    total = len(specs) if isinstance(specs, list) else 0
    if phase == "warmup" and total:
        say("warmup", level.label, 0, total)

    def tick(rec: RequestRecord) -> None:
        done[0] += 1
        if total:
            say(phase, level.label, done[0], total)
        elif level.duration_s is not None:
            say("seconds", level.label, int(min(rec.end_s, level.duration_s)), int(level.duration_s), done[0])

    return tick
