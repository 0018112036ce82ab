"""Token counts with a local Hugging Face tokenizer (``--tokenizer``): prompts cut to an exact token count.

The tokenizer is a ``tokenizer.json`` read with the ``tokenizers`` library (a file, or a folder holding one); nothing
is downloaded. Counts exclude special tokens (``add_special_tokens=False``): the server adds its own (a BOS token on
``/v1/completions``, the chat template's tokens on ``/v1/chat/completions``), which is why the usage check has a
tolerance (:mod:`gpumatch.loadgen.usage`).

Cutting a text to ``n`` tokens (:meth:`TokenCounter.fit`): encode it once, cut the text at the end offset of
token ``n``, and re-encode the cut, because a byte-pair tokenizer may merge differently at the new end; when the
count moved, cut at the token ``k + (n − got)`` instead, at most :data:`FIT_TRIES` times. The same idea as vLLM's
``gen_prompt_decode_to_target_len`` (decode, re-encode, adjust), done on text offsets so the prompt stays words.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumatch.errors import InputError, MissingDependencyError

MAX_TOKENIZER_BYTES = 256 * 1024 * 1024
FIT_TRIES = 8


@dataclass(frozen=True)
class TokenCounter:
    """A loaded tokenizer and where it came from."""

    tokenizer: Any
    path: Path

    def count(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def fit(self, text: str, n: int) -> str | None:
        """``text`` cut to ``n`` tokens (module docstring); None when it holds fewer than ``n``. The result may
        miss ``n`` by a token for a tokenizer whose merges never land on ``n``: callers record :meth:`count`."""
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        if len(enc.ids) < n:
            return None
        k, cut = n, text
        for _ in range(FIT_TRIES):
            k = min(max(k, 1), len(enc.offsets))
            cut = text[: enc.offsets[k - 1][1]]
            got = self.count(cut)
            if got == n:
                return cut
            k += n - got
        return cut


def load_tokenizer(path: Path) -> TokenCounter:
    """The ``tokenizer.json`` at ``path`` (a file, or a folder holding one); one-line errors otherwise."""
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"no tokenizer.json at {path}", "give a tokenizer.json file or a model folder holding one")
    size = file.stat().st_size
    if size > MAX_TOKENIZER_BYTES:
        raise InputError(f"{file} holds {size:,} bytes, more than a tokenizer ({MAX_TOKENIZER_BYTES:,} at most)",
                         "give the model's tokenizer.json")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise MissingDependencyError("--tokenizer needs the tokenizers package",
                                     "pip install 'gpumatch[serve]'") from None
    try:
        return TokenCounter(Tokenizer.from_file(str(file)), file)
    except Exception as e:  # the Rust side raises plain Exception for a malformed file
        raise InputError(f"{file} is not a tokenizers file: {str(e).splitlines()[0][:120]}",
                         "give the tokenizer.json a Hugging Face model folder holds") from None
