"""Datasets for ``gpumatch bench serve --dataset FORMAT FILE``: read with bounds, sampled with a seed.

- ``sharegpt``: a JSON list of ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...},
  ...]}`` (e.g. ``ShareGPT_V3_unfiltered_cleaned_split.json``). The prompt is the first human turn; the output
  length asked for is the length of the gpt turn that answers it (vLLM's ShareGPT dataset takes turns 0 and 1).
  Conversations without such a pair are skipped, and so, as vLLM's ``is_valid_sequence`` does by default, are pairs
  with a prompt or an answer under 4 tokens, a prompt over 1024 tokens or both over 2048.
- ``jsonl``: one object per line with ``prompt`` (text) and, optionally, ``output_tokens`` (or ``max_tokens``);
  a line without one asks for ``--output-tokens``.

Token counts: with ``--tokenizer`` that tokenizer's (:mod:`.tokens`); without, words (approximate; the server's
``usage`` is what the results report either way).

Bounds: a file of at most :data:`MAX_DATASET_BYTES` and :data:`MAX_ROWS` rows; anything else is a one-line
:class:`~gpumatch.errors.InputError` (exit 2) naming the file, and the line where it applies.

Sampling: each level draws its requests from a seeded permutation of the usable rows (another seed per level),
cycling through new permutations when it asks for more requests than the file holds.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpumatch.errors import InputError
from gpumatch.loadgen.workload import RequestSpec

if TYPE_CHECKING:
    from gpumatch.loadgen.tokens import TokenCounter

FORMATS = ("sharegpt", "jsonl")
MAX_DATASET_BYTES = 1 << 30
MAX_ROWS = 1_000_000
MIN_TOKENS, MAX_PROMPT_TOKENS, MAX_TOTAL_TOKENS = 4, 1024, 2048
"""vLLM's ``is_valid_sequence`` defaults, applied to ShareGPT pairs."""


@dataclass(frozen=True)
class Row:
    prompt: str
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Dataset:
    """The usable rows of a dataset file and how many were skipped."""

    format: str
    path: Path
    rows: tuple[Row, ...]
    skipped: int = 0

    def sample(self, n: int, seed: int | Sequence[int], first_index: int = 0) -> list[RequestSpec]:
        """``n`` requests drawn without replacement from a seeded permutation (cycling when ``n`` exceeds it)."""
        rng = np.random.default_rng(seed)
        picks: list[int] = []
        while len(picks) < n:
            picks += [int(i) for i in rng.permutation(len(self.rows))]
        return [RequestSpec(first_index + k, self.rows[i].prompt, self.rows[i].prompt_tokens,
                            self.rows[i].output_tokens) for k, i in enumerate(picks[:n])]

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "path": str(self.path), "rows": len(self.rows), "skipped": self.skipped}


def load_dataset(fmt: str, path: Path, output_tokens: int, counter: TokenCounter | None = None) -> Dataset:
    """Read ``path`` as ``fmt`` (module docstring); ``output_tokens`` is the length for JSONL lines without one."""
    if fmt not in FORMATS:
        raise InputError(f"unknown dataset format {fmt!r}", "--dataset sharegpt FILE or --dataset jsonl FILE")
    data = _read(path)
    count = _counter(counter)
    if fmt == "sharegpt":
        return _sharegpt(path, data, count)
    return _jsonl(path, data, output_tokens, count)


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_DATASET_BYTES:
            raise InputError(f"dataset {path} holds {size:,} bytes, more than {MAX_DATASET_BYTES:,}",
                             "sample it into a smaller file")
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read dataset {path}: {e.strerror}", "give an existing file") from None
    except UnicodeDecodeError:
        raise InputError(f"dataset {path} is not UTF-8 text", "give a JSON or JSONL file") from None


def _counter(counter: TokenCounter | None) -> Any:
    if counter is None:
        return lambda texts: [len(t.split()) for t in texts]
    return lambda texts: [len(e.ids) for e in counter.tokenizer.encode_batch(texts, add_special_tokens=False)]


def _sharegpt(path: Path, text: str, count: Any) -> Dataset:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg}, line {e.lineno})", "a ShareGPT file is one JSON list") from None
    if not isinstance(doc, list):
        raise InputError(f"{path}: not a JSON list of conversations", "ShareGPT: [{\"conversations\": [...]}, ...]")
    if len(doc) > MAX_ROWS:
        raise InputError(f"{path}: {len(doc):,} conversations, more than {MAX_ROWS:,}", "sample a smaller file")
    pairs = [p for p in (_pair(entry) for entry in doc) if p is not None]
    prompts, answers = count([p for p, _ in pairs]), count([a for _, a in pairs])
    rows = tuple(Row(p, n_in, n_out) for (p, _), n_in, n_out in zip(pairs, prompts, answers, strict=True)
                 if n_in >= MIN_TOKENS and n_out >= MIN_TOKENS and n_in <= MAX_PROMPT_TOKENS
                 and n_in + n_out <= MAX_TOTAL_TOKENS)
    if not rows:
        raise InputError(f"{path}: none of {len(doc):,} conversations has a usable human/gpt pair",
                         "a human turn of 4 to 1024 tokens answered by a gpt turn of 4 tokens or more")
    return Dataset("sharegpt", path, rows, len(doc) - len(rows))


def _pair(entry: Any) -> tuple[str, str] | None:
    """The first human turn and the gpt turn right after it, or None."""
    turns = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(turns, list):
        return None
    for a, b in itertools.pairwise(turns):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return None
        if a.get("from") == "human":
            ok = b.get("from") == "gpt" and isinstance(a.get("value"), str) and isinstance(b.get("value"), str)
            return (a["value"], b["value"]) if ok else None
    return None


def _jsonl(path: Path, text: str, output_tokens: int, count: Any) -> Dataset:
    lines = text.splitlines()
    if len(lines) > MAX_ROWS:
        raise InputError(f"{path}: {len(lines):,} lines, more than {MAX_ROWS:,}", "sample a smaller file")
    parsed = [_line(path, i, line, output_tokens) for i, line in enumerate(lines, 1) if line.strip()]
    if not parsed:
        raise InputError(f"dataset {path} holds no requests", "one JSON object per line with 'prompt'")
    tokens = count([p for p, _ in parsed])
    return Dataset("jsonl", path, tuple(Row(p, n, out) for (p, out), n in zip(parsed, tokens, strict=True)))


def _line(path: Path, lineno: int, line: str, output_tokens: int) -> tuple[str, int]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{lineno}: not JSON ({e.msg})", "one JSON object per line") from None
    prompt = obj.get("prompt") if isinstance(obj, dict) else None
    if not isinstance(prompt, str) or not prompt:
        raise InputError(f"{path}:{lineno}: no 'prompt' text", "each line needs \"prompt\": \"...\"")
    out = obj.get("output_tokens", obj.get("max_tokens", output_tokens))
    if not isinstance(out, int) or isinstance(out, bool) or out < 1:
        raise InputError(f"{path}:{lineno}: 'output_tokens' is not a positive integer", "e.g. \"output_tokens\": 128")
    return prompt, out
