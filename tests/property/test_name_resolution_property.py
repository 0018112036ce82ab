"""Property tests for GPU name resolution (gpumatch.names via the shipped catalog).

1. Any re-spelling of a SKU's name or alias that only changes case, punctuation between characters,
   the kind of word break (space, "-", "_", ...), or adds a vendor word resolves to that same SKU.
2. Arbitrary text never crashes lookup: it resolves, or raises UnknownNameError (or its subclass
   AmbiguousNameError) whose message is one line.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gpumatch.catalog import load_catalog
from gpumatch.errors import UnknownNameError

CATALOG = load_catalog()  # built-in files only: GPUMATCH_HOME is not read for the built-in part
SPELLINGS = sorted({(s, g.name) for g in CATALOG.gpus for s in (g.name, *g.aliases)})
SEPARATORS = st.sampled_from(["", "", "", " ", "-", "_", ".", "  ", "/"])
WORD_BREAKS = st.sampled_from([" ", "-", "_", ".", "  ", "/"])  # a vendor word must stay a separate word
VENDOR = {"nvidia": "NVIDIA ", "amd": "AMD ", "intel": "Intel "}


def _case(draw: st.DrawFn, word: str) -> str:
    return "".join(ch.upper() if draw(st.booleans()) else ch.lower() for ch in word)


@st.composite
def respelled(draw: st.DrawFn) -> tuple[str, str]:
    spelling, canonical = draw(st.sampled_from(SPELLINGS))
    text = ""
    for token in re.findall(r"[A-Za-z0-9]+", spelling):
        if token.lower() in {"nvidia", "amd", "intel", "habana"}:
            text += _case(draw, token) + draw(WORD_BREAKS)  # a vendor word stays a separate word
        else:
            text += "".join(_case(draw, ch) + draw(SEPARATORS) for ch in token) + draw(SEPARATORS)
    if draw(st.booleans()):
        text = VENDOR[CATALOG.get(canonical).vendor].strip() + draw(WORD_BREAKS) + text
    return text, canonical


@settings(max_examples=300, deadline=None)
@given(respelled())
def test_respelled_names_resolve_to_the_same_sku(case: tuple[str, str]) -> None:
    text, canonical = case
    assert CATALOG.get(text).name == canonical


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_text_resolves_or_fails_cleanly(text: str) -> None:
    try:
        gpu = CATALOG.get(text)
    except UnknownNameError as e:
        assert "\n" not in e.message
        assert e.hint
    else:
        assert gpu in CATALOG.gpus
