"""Stop strings of ``gpumatch serve`` (torch-free), as vLLM applies them to the detokenized text.

The output text grows one token's text at a time. After each piece the earliest occurrence of any stop string
that ends in the new text is looked for; on a match the output is cut just before it (the stop string is not part
of the output, vLLM's default ``include_stop_str_in_output=False``) and the request ends with ``finish_reason``
``stop`` and ``stop_reason`` the string. While no string matched, the last ``len(longest stop) - 1`` characters are
held back from streaming (they may be the start of a stop string) and sent once they cannot be, or at the end.
"""

from __future__ import annotations


class StopText:
    """The text of one request's output under its stop strings (module docstring)."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1
        self.text = ""
        self.sent = 0
        """Characters of :attr:`text` handed out so far."""
        self.matched: str | None = None

    def add(self, piece: str) -> str:
        """Append one token's text; the text now safe to send (may be empty). After a match (:attr:`matched`
        set) the output is final and later pieces are ignored."""
        if self.matched is not None:
            return ""
        start = max(len(self.text) - self.hold, 0)
        self.text += piece
        hits = [(i, s) for s in self.stops if (i := self.text.find(s, start)) >= 0]
        if hits:
            cut, self.matched = min(hits)
            self.text = self.text[:cut]
            return self._take(len(self.text))
        return self._take(max(len(self.text) - self.hold, self.sent))

    def flush(self) -> str:
        """The held-back rest (the request ended without a match)."""
        return self._take(len(self.text))

    def _take(self, upto: int) -> str:
        out = self.text[self.sent:upto]
        self.sent = max(self.sent, upto)
        return out
