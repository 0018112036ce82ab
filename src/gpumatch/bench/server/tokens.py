"""Prompt text to token ids and back, without a tokenizer (the served weights are random or carry no vocabulary).

Rule (deterministic, documented in docs/serve.md): a prompt's tokens are its whitespace-separated words; word
``w`` becomes id ``blake2b(w) mod vocab`` (8-byte digest, big-endian). So a client that sends ``N`` words gets
``usage.prompt_tokens == N``. A prompt may also be given as a list of integer ids (the OpenAI completions API
allows it), used as they are. Generated id ``i`` is rendered as the word ``" t<i>"`` (one word per token), so
the completion text splits back into exactly ``completion_tokens`` words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def word_id(word: str, vocab: int) -> int:
    """The id of one word: blake2b (8 bytes) of its UTF-8, modulo ``vocab``."""
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % vocab


def encode(text: str, vocab: int) -> list[int]:
    """Token ids of ``text``: one per whitespace-separated word (module docstring)."""
    return [word_id(w, vocab) for w in text.split()]


def check_ids(ids: Sequence[object], vocab: int) -> list[int]:
    """``ids`` as ints, each in ``[0, vocab)``; ValueError otherwise."""
    out: list[int] = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
            raise ValueError(f"token id {i!r} is not an integer in [0, {vocab})")
        out.append(i)
    return out


def decode_one(token: int) -> str:
    """The text of one generated token: a space and ``t<id>``."""
    return f" t{token}"
