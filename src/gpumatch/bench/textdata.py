"""The quality check's text: a user's UTF-8 file tokenized with the weights folder's ``tokenizer.json`` (the
``tokenizers`` library), and the fixed windows it is scored in. No torch.

Bounded: at most :func:`byte_budget` bytes of the file are read (a token is rarely over 16 bytes of UTF-8;
the budget allows 64 per token), and at most ``max_tokens`` tokens are kept, the first ones.

Windows (Hugging Face's "Perplexity of fixed-length models", https://huggingface.co/docs/transformers/perplexity,
the strided sliding window): a window of ``window`` tokens starts every ``stride`` tokens; the first window scores
every prediction in it, each later one only the targets the previous window did not score, with the rest of the
window as context. A target is predicted from the logits of the token before it, which must be in the same
window: with ``stride < window`` every token but the first is scored exactly once (n - 1 targets); with
``stride == window`` (no overlap) the first token of each later window is not scored either.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from gpumatch.errors import InputError, MissingDependencyError


def byte_budget(max_tokens: int) -> int:
    """Bytes of the text file read for ``max_tokens`` tokens: 64 per token, at least 64 KiB."""
    return max(64 * max_tokens, 65536)


def read_text(path: Path, max_bytes: int) -> str:
    """The first ``max_bytes`` bytes of ``path`` as text (a character cut at the end is dropped); a missing file,
    a non-UTF-8 file or an empty one is an InputError."""
    if not path.is_file():
        raise InputError(f"text file {str(path)!r} does not exist", "give a UTF-8 text file with --text")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", "check the file's permissions") from e
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not UTF-8 text (byte {e.start})", "save it as UTF-8") from e
    if not text.strip():
        raise InputError(f"{path} has no text", "give a file of representative text (some thousand tokens)")
    return text


def load_tokens(tokenizer: Path, text_path: Path, max_tokens: int) -> list[int]:
    """The text's token ids (the tokenizer's special tokens included, e.g. Llama's BOS), the first
    ``max_tokens``; fewer than 2 is an InputError (nothing to predict)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        raise MissingDependencyError("--text needs the tokenizers library", "pip install 'gpumatch[bench]'") from e
    try:
        tok = Tokenizer.from_file(str(tokenizer))
    except Exception as e:  # the library raises its own Exception for any unreadable tokenizer.json
        raise InputError(f"{tokenizer} is not a readable tokenizer.json: {str(e)[:200]}", "check the file") from e
    ids = list(tok.encode(read_text(text_path, byte_budget(max_tokens))).ids)[:max_tokens]
    if len(ids) < 2:
        raise InputError(f"{text_path} gives {len(ids)} token(s)", "the quality check needs a longer text")
    return ids


def windows(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """``(begin, end, first_target)`` of each window over ``n`` tokens (module docstring): the window is
    tokens[begin:end]; it scores the targets first_target..end-1, each predicted from the logits one before."""
    if window < 2 or not 1 <= stride <= window:
        raise ValueError(f"need window >= 2 and 1 <= stride <= window, not {window}, {stride}")
    out: list[tuple[int, int, int]] = []
    done, begin = 1, 0
    while done < n:
        end = min(begin + window, n)
        first = max(done, begin + 1)
        if end > first:
            out.append((begin, end, first))
        done = max(done, end)
        begin += stride
    return out
