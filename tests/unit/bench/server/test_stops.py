"""Stop strings as vLLM applies them: cut before the earliest match, matches across token boundaries, the held-back
tail sent once it cannot start a match, nothing after a match."""

from __future__ import annotations

import pytest

from gpumatch.bench.server.stops import StopText


def _run(stops: tuple[str, ...], pieces: list[str]) -> tuple[list[str], str | None]:
    st = StopText(stops)
    out = [st.add(p) for p in pieces]
    if st.matched is None:
        out.append(st.flush())
    return out, st.matched


@pytest.mark.parametrize(("stops", "pieces", "text", "matched"), [
    ((), [" t1", " t2"], " t1 t2", None),
    (("t2",), [" t1", " t2", " t3"], " t1 ", "t2"),
    (("1 t",), [" t1", " t2"], " t", "1 t"),  # spans two tokens
    (("zz", " t2"), [" t1", " t2 t3"], " t1", " t2"),
    (("t3", "t2"), [" t1 t2 t3"], " t1 ", "t2"),  # the earliest of several
    (("xyz",), [" t1", " xy"], " t1 xy", None),  # a partial match at the end is flushed
])
def test_output_is_cut_before_the_earliest_stop(stops: tuple[str, ...], pieces: list[str], text: str,
                                                 matched: str | None) -> None:
    out, got = _run(stops, pieces)
    assert "".join(out) == text and got == matched


def test_the_last_len_minus_one_characters_are_held_back_until_the_end() -> None:
    st = StopText(("abc",))  # holds 2 characters back
    assert [st.add(p) for p in ("xxa", "b", "d")] == ["x", "x", "a"]
    assert st.flush() == "bd" and st.matched is None
    assert st.add("abc") == "" and st.matched == "abc" and st.add("more") == ""
