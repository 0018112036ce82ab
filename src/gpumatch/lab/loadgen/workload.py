"""What the load generator sends and when: prompts, output lengths and arrival times, all seeded.

Lengths: each request's prompt and output length are drawn uniformly from the integers in ``[r L, L]`` (``r`` =
``range_ratio``; 1 = fixed lengths), the same rule as the estimator's replay (:mod:`gpumatch.estimate.replay`)
and SGLang's / InferenceX's ``--random-range-ratio``; or replayed from a JSONL dataset file, one object per line
with ``prompt`` (text) and ``output_tokens`` (or ``max_tokens``).

Prompts without a tokenizer: a prompt of ``L`` tokens is ``L`` words drawn from common English words that
byte-pair tokenizers (Llama 3, Qwen, GPT) encode as one token each with their leading space, after a per-request
number so no two prompts share a prefix (no prefix-cache hits). The count is approximate; the server's
``usage.prompt_tokens`` is what the results report (``total_input_tokens``), and the requested count is kept
beside it in each raw record.

Arrivals (open loop): Poisson (exponential gaps of mean 1/rate, seeded; vLLM ``--burstiness 1``) or constant
(gap 1/rate). The first request is scheduled at 0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpumatch.errors import InputError

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

MAX_DATASET_LINES = 1_000_000


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


def make_prompt(tag: str, tokens: int, rng: np.random.Generator) -> str:
    """``tokens`` words (about that many tokens): the request's tag, then words drawn from :data:`WORDS`."""
    picks = rng.integers(0, len(WORDS), size=max(0, tokens - 1))
    return " ".join([tag, *(WORDS[i] for i in picks)])


def synthetic(n: int, prompt_tokens: int, output_tokens: int, range_ratio: float, seed: int | Sequence[int],
              tag: str = "") -> list[RequestSpec]:
    """``n`` requests with seeded lengths and prompts (module docstring); ``tag`` makes the prompts of one level
    differ from another's (each prompt starts with ``<tag><index>``)."""
    rng = np.random.default_rng(seed)
    ins = lengths(prompt_tokens, n, range_ratio, rng)
    outs = lengths(output_tokens, n, range_ratio, rng)
    return [RequestSpec(i, make_prompt(f"{tag}{i}", p, rng), p, o)
            for i, (p, o) in enumerate(zip(ins, outs, strict=True))]


def from_dataset(path: Path, n: int, output_tokens: int | None) -> list[RequestSpec]:
    """The first ``n`` requests of a JSONL file (cycled when it holds fewer); ``output_tokens`` overrides the
    file's lengths. Prompt tokens requested are counted as words (the server's usage is what is reported)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputError(f"cannot read dataset {path}: {e.strerror}", "give a JSONL file") from None
    rows = [(i, line) for i, line in enumerate(lines[:MAX_DATASET_LINES], 1) if line.strip()]
    if not rows:
        raise InputError(f"dataset {path} holds no requests", "one JSON object per line with 'prompt'")
    specs = [_row(path, i, line, output_tokens) for i, line in rows]
    return [RequestSpec(k, specs[k % len(specs)].prompt, specs[k % len(specs)].prompt_tokens,
                        specs[k % len(specs)].output_tokens) for k in range(n)]


def _row(path: Path, lineno: int, line: str, output_tokens: int | None) -> RequestSpec:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{lineno}: not JSON ({e.msg})", "one JSON object per line") from None
    prompt = obj.get("prompt") if isinstance(obj, dict) else None
    if not isinstance(prompt, str) or not prompt:
        raise InputError(f"{path}:{lineno}: no 'prompt' text", "each line needs \"prompt\": \"...\"")
    out = output_tokens if output_tokens is not None else obj.get("output_tokens", obj.get("max_tokens"))
    if not isinstance(out, int) or isinstance(out, bool) or out < 1:
        raise InputError(f"{path}:{lineno}: no positive 'output_tokens'", "add it per line, or give --output-tokens")
    return RequestSpec(lineno - 1, prompt, len(prompt.split()), out)


def arrivals(n: int, rate_per_s: float, process: str, seed: int) -> list[float]:
    """Scheduled send times (s from the level start) of ``n`` requests at ``rate_per_s`` (module docstring)."""
    if rate_per_s <= 0 or not np.isfinite(rate_per_s):
        raise InputError(f"request rate must be a positive number, got {rate_per_s}")
    if process == "constant":
        return [i / rate_per_s for i in range(n)]
    if process != "poisson":
        raise InputError(f"unknown arrival process {process!r}", "poisson or constant")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate_per_s, size=n)
    gaps[0] = 0.0
    return [float(x) for x in np.cumsum(gaps)]
