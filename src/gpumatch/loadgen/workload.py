"""What the load generator sends and when: prompts, output lengths and arrival times, all seeded.

Lengths: each request's prompt and output length are drawn uniformly from the integers in ``[r L, L]`` (``r`` =
``range_ratio``; 1 = fixed lengths), the same rule as the estimator's replay (:mod:`gpumatch.estimate.replay`)
and SGLang's / InferenceX's ``--random-range-ratio``; or sampled from a dataset (:mod:`.datasets`).

Prompts: ``L`` words drawn from common English words that byte-pair tokenizers (Llama 3, Qwen, GPT) encode as one
token each with their leading space, after a per-request tag so no two prompts share a prefix (no prefix-cache
hits). Without a tokenizer the count is approximate (one token per word); with ``--tokenizer``
(:mod:`.tokens`) the prompt is cut to exactly ``L`` tokens of that tokenizer (a prompt shorter than its tag's
tokens is the tag cut short, so prompts of a few tokens may repeat). Either way the server's
``usage.prompt_tokens`` is what the results report (``total_input_tokens``), the requested count is kept beside it
in each raw record, and the two are compared (:mod:`.usage`).

Arrivals (open loop): gaps between requests are gamma-distributed with mean 1/rate and shape ``B`` (the
burstiness; scale 1/(rate B), coefficient of variation 1/√B): ``B`` = 1 is a Poisson process (exponential gaps),
``B`` < 1 burstier, ``B`` > 1 more even (vLLM ``bench serve --burstiness``, which also rescales the gaps so the last
arrival lands at n/rate; gpumatch does not, so the process is the stated one). ``constant``: gap 1/rate. The first
request is scheduled at 0.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpumatch.errors import InputError

if TYPE_CHECKING:
    from gpumatch.loadgen.tokens import TokenCounter

WORDS = (
    "the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with", "as", "his",
    "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "word", "but", "what", "some", "we",
    "can", "out", "other", "were", "all", "there", "when", "up", "use", "your", "how", "said", "an", "each", "she",
    "which", "do", "their", "time", "if", "will", "way", "about", "many", "then", "them", "write", "would", "like",
    "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go",
    "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water", "than", "call",
    "first", "who", "may", "down", "side", "been", "now", "find", "any", "new", "work", "part", "take", "get",
    "place", "made", "live", "where", "after", "back", "little", "only", "round", "man", "year", "came", "show",
    "every", "good", "me", "give", "our", "under", "name", "very", "through", "just", "form", "great", "think",
    "say", "help", "low", "line", "differ", "turn", "cause", "much", "mean", "before", "move", "right", "boy",
    "old", "too", "same", "tell", "does", "set", "three", "want", "air", "well", "also", "play", "small", "end",
    "put", "home", "read", "hand", "port", "large", "spell", "add", "even", "land", "here", "must", "big", "high",
    "such", "follow", "act", "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house",
    "picture", "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth",
)
"""Common English words, one BPE token each with their leading space in the usual LLM tokenizers."""


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: the prompt text, the tokens it was built to hold and the output tokens asked for."""

    index: int
    prompt: str
    prompt_tokens: int
    output_tokens: int


def lengths(nominal: int, n: int, range_ratio: float, rng: np.random.Generator) -> list[int]:
    """``n`` lengths uniform in the integers ``[max(1, ceil(r L)), L]`` (``L`` each when ``r`` = 1)."""
    low = max(1, int(np.ceil(range_ratio * nominal)))
    if low >= nominal:
        return [nominal] * n
    return [int(x) for x in rng.integers(low, nominal + 1, size=n)]


def make_prompt(tag: str, tokens: int, rng: np.random.Generator, counter: TokenCounter | None = None) -> str:
    """``tokens`` words after the request's tag (about that many tokens), or, with a tokenizer, the same text cut
    to exactly ``tokens`` of its tokens (:meth:`~.tokens.TokenCounter.fit`)."""
    if counter is None:
        picks = rng.integers(0, len(WORDS), size=max(0, tokens - 1))
        return " ".join([tag, *(WORDS[i] for i in picks)])
    words = tokens + 8
    while True:
        text = " ".join([tag, *(WORDS[i] for i in rng.integers(0, len(WORDS), size=words))])
        cut = counter.fit(text, tokens)
        if cut is not None:
            return cut
        words *= 2


def synthetic(n: int, prompt_tokens: int, output_tokens: int, range_ratio: float, seed: int | Sequence[int],
              tag: str = "", counter: TokenCounter | None = None, first_index: int = 0) -> list[RequestSpec]:
    """``n`` requests with seeded lengths and prompts (module docstring); ``tag`` makes the prompts of one level
    differ from another's (each prompt starts with ``<tag><index>``). With ``counter`` each spec's
    ``prompt_tokens`` is that tokenizer's count of its prompt."""
    rng = np.random.default_rng(seed)
    ins = lengths(prompt_tokens, n, range_ratio, rng)
    outs = lengths(output_tokens, n, range_ratio, rng)
    out = []
    for k, (p, o) in enumerate(zip(ins, outs, strict=True)):
        i = first_index + k
        text = make_prompt(f"{tag}{i}", p, rng, counter)
        out.append(RequestSpec(i, text, counter.count(text) if counter is not None else p, o))
    return out


BLOCK = 256
"""Requests (or arrival gaps) generated at a time for a time-limited level."""


def check_arrival(rate_per_s: float, process: str, burstiness: float) -> None:
    if rate_per_s <= 0 or not np.isfinite(rate_per_s):
        raise InputError(f"request rate must be a positive number, got {rate_per_s}")
    if process not in ("poisson", "constant"):
        raise InputError(f"unknown arrival process {process!r}", "poisson or constant")
    if not (burstiness > 0 and np.isfinite(burstiness)):
        raise InputError(f"--burstiness must be a positive number, got {burstiness}", "1 is Poisson")
    if process == "constant" and burstiness != 1.0:
        raise InputError("--burstiness shapes random arrivals", "use it with --arrival poisson, or drop it")


def arrival_times(rate_per_s: float, process: str, seed: int, burstiness: float = 1.0) -> Iterator[float]:
    """Endless scheduled send times (s from the level start) at ``rate_per_s`` (module docstring)."""
    check_arrival(rate_per_s, process, burstiness)
    if process == "constant":
        yield from (i / rate_per_s for i in itertools.count())
        return
    rng = np.random.default_rng(seed)
    t = 0.0
    yield t
    while True:
        for gap in rng.gamma(burstiness, 1.0 / (rate_per_s * burstiness), size=BLOCK):
            t += float(gap)
            yield t


def arrivals(n: int, rate_per_s: float, process: str, seed: int, burstiness: float = 1.0) -> list[float]:
    """The first ``n`` of :func:`arrival_times`."""
    return list(itertools.islice(arrival_times(rate_per_s, process, seed, burstiness), n))
