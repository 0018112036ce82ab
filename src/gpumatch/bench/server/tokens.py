"""Prompt text to token ids and back: words as tokens (random weights), or the weights folder's tokenizer.

Rule (deterministic, documented in docs/serve.md): a prompt's tokens are its whitespace-separated words; word
``w`` becomes id ``blake2b(w) mod vocab`` (8-byte digest, big-endian). So a client that sends ``N`` words gets
``usage.prompt_tokens == N``. A prompt may also be given as a list of integer ids (the OpenAI completions API
allows it), used as they are. Generated id ``i`` is rendered as the word ``" t<i>"`` (one word per token), so
the completion text splits back into exactly ``completion_tokens`` words.

With real weights (``gpumatch serve --weights DIR``) and a ``tokenizer.json`` in the folder, :class:`TokenizerCodec`
encodes with that tokenizer (Hugging Face ``tokenizers``; special tokens such as BOS added as its post-processor
says) and renders generated ids incrementally, as vLLM does (:class:`IncrementalText`): each token's text is what
it adds to the decoded text of the tokens before it, so spaces a tokenizer puts between tokens (WordLevel) or
strips from a lone token (SentencePiece's Metaspace) come out as they do in the whole text, and a multi-byte
character split over tokens comes out whole with its last token.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol


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


_WORD = re.compile(r"\s*\S+")
CONTEXT_TOKENS = 5
"""Prompt tokens an :class:`IncrementalText` starts from (vLLM's ``INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET``)."""


class TextStream(Protocol):
    """One request's generated text, token by token: ``add(id)`` returns the text that id adds."""

    def add(self, token: int) -> str: ...


class IncrementalText:
    """vLLM's incremental detokenization (``detokenize_incrementally`` in ``vllm/tokenizers/detokenizer_utils.py``,
    formerly ``vllm/transformers_utils/``; the slow path of V1's ``IncrementalDetokenizer``): the text of new
    token ``t`` is ``decode(ids[prefix:] + [t])`` less ``decode(ids[prefix:read])``, with ``prefix``/``read``
    moved up after each emitted piece; a piece that ends in U+FFFD (an incomplete UTF-8 sequence) is held until a
    later token completes it. It starts from the prompt's last :data:`CONTEXT_TOKENS` ids, so the first token's
    leading space is the one it has after the prompt.
    ``decode``: ids to text (the whole tokenizer's rule, spaces between tokens included)."""

    def __init__(self, decode: Callable[[list[int]], str], prompt: Sequence[int]) -> None:
        self._decode = decode
        self.ids = list(prompt[-CONTEXT_TOKENS:])
        self.prefix, self.read = 0, len(self.ids)

    def add(self, token: int) -> str:
        self.ids.append(token)
        before = self._decode(self.ids[self.prefix:self.read])
        now = self._decode(self.ids[self.prefix:])
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return now[len(before):]


class _OneByOne:
    """Each id's own text (the word codec: ``" t<id>"`` needs no context)."""

    def __init__(self, decode_one: Callable[[int], str]) -> None:
        self._decode_one = decode_one

    def add(self, token: int) -> str:
        return self._decode_one(token)


class Codec(Protocol):
    """Text to ids and ids to text, as the HTTP layer uses them. ``pieces(text)``: the text of each token of
    ``encode(text)``, in order (the ``tokens`` of echoed prompt log-probs)."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode_one(self, token: int) -> str: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def pieces(self, text: str) -> list[str]: ...

    def stream(self, prompt: Sequence[int], skip_special_tokens: bool = True) -> TextStream: ...


class WordCodec:
    """Words as tokens (module docstring)."""

    name = "words"

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab

    def encode(self, text: str) -> list[int]:
        return encode(text, self.vocab)

    def decode_one(self, token: int) -> str:
        return decode_one(token)

    def decode(self, ids: Sequence[int]) -> str:
        """Generated-token text of each id, joined (a word's id does not give the word back)."""
        return "".join(decode_one(i) for i in ids)

    def pieces(self, text: str) -> list[str]:
        """Each word with the whitespace before it (they join back to ``text`` less its trailing space)."""
        return _WORD.findall(text)

    def stream(self, prompt: Sequence[int], skip_special_tokens: bool = True) -> TextStream:
        return _OneByOne(decode_one)


class TokenizerCodec:
    """A Hugging Face ``tokenizer.json`` (module docstring); ValueError when it cannot be read or its ids pass
    the model's vocabulary."""

    name = "tokenizer.json"

    def __init__(self, path: Path, vocab: int) -> None:
        from tokenizers import Tokenizer

        try:
            self._tok: Any = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises its own Exception type for a bad file
            raise ValueError(f"cannot read {path}: {e}") from e
        if self._tok.get_vocab_size(with_added_tokens=True) > vocab:
            raise ValueError(f"{path} has {self._tok.get_vocab_size(with_added_tokens=True)} tokens, more than the "
                             f"model's vocabulary of {vocab}")

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text).ids)

    def decode_one(self, token: int) -> str:
        return str(self._tok.decode([token], skip_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=False))

    def pieces(self, text: str) -> list[str]:
        return [self.decode_one(i) for i in self.encode(text)]

    def stream(self, prompt: Sequence[int], skip_special_tokens: bool = True) -> TextStream:
        """The generated text after ``prompt``, incrementally (:class:`IncrementalText`); special tokens (EOS,
        BOS, ...) add no text unless ``skip_special_tokens`` is false (vLLM's request field and default)."""
        def decode(ids: list[int]) -> str:
            return str(self._tok.decode(ids, skip_special_tokens=skip_special_tokens))
        return IncrementalText(decode, prompt)
