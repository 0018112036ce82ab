"""Response bodies of ``gpumatch serve`` (torch-free): the output of one request, event by event, and its JSON.

:class:`Output` turns the engine's events into text pieces, applying stop strings (:mod:`.stops`) and the
token-stop rule (a token that ends the request with ``stop``, EOS or a ``stop_token_ids`` id, adds no text, as
vLLM's detokenizer skips it); a token's text is what it adds to the text before it (the codec's ``stream``, vLLM's
incremental detokenization); ``echo`` puts the prompt text before the first piece. Log-probs come in two shapes:

- completions (OpenAI's legacy ``logprobs`` object): ``tokens`` (each token's text), ``token_logprobs``,
  ``top_logprobs`` (per token a dict text -> log-prob of the top-k and the chosen token), ``text_offset`` (where
  each token's text starts in the choice's text); echoed prompt tokens first, the first with ``null`` log-prob and
  ``null`` top dict, as vLLM;
- chat (``logprobs.content``): per token ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
  "bytes"}, ...]}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpumatch.bench.server.engine import Event
from gpumatch.bench.server.protocol import Job
from gpumatch.bench.server.scheduler import TokenLogprob
from gpumatch.bench.server.stops import StopText
from gpumatch.bench.server.tokens import Codec


@dataclass
class Delta:
    """What one event adds: text, the log-prob entries of its tokens (text, entry or None), and the end."""

    text: str
    logprobs: list[tuple[str, TokenLogprob | None]] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class Output:
    """One request's output as events arrive (module docstring)."""

    def __init__(self, job: Job, codec: Codec) -> None:
        self.job, self.codec = job, codec
        self.stops = StopText(job.stop)
        self.echoed = not job.echo
        self.last: Event | None = None
        self.text = codec.stream(job.prompt, job.skip_special_tokens)

    @property
    def stopped_by_string(self) -> bool:
        return self.stops.matched is not None

    def add(self, ev: Event) -> Delta:
        """The delta of ``ev`` (the last event of a request ends it: its finish reason, or ``stop`` on a match)."""
        self.last = ev
        d = Delta("", finish_reason=ev.finish_reason, stop_reason=ev.stop_reason)
        if not self.echoed:
            self.echoed = True
            d.text, d.logprobs = self._echo(ev)
        token_stop = ev.finish_reason == "stop" and ev.token is not None
        piece = self.text.add(ev.token) if ev.token is not None and not token_stop else ""
        if ev.token is not None and self.job.logprobs is not None:  # the token's text as the output has it
            d.logprobs.append((piece if not token_stop else self.codec.decode_one(ev.token), ev.logprob))
        d.text += self.stops.add(piece)
        if self.stops.matched is not None:
            d.finish_reason, d.stop_reason = "stop", self.stops.matched
        elif ev.finish_reason is not None:
            d.text += self.stops.flush()
        return d

    def _echo(self, ev: Event) -> tuple[str, list[tuple[str, TokenLogprob | None]]]:
        """The prompt's text, and its tokens' log-prob entries when asked (the first has none)."""
        job = self.job
        text = job.prompt_text if job.prompt_text is not None else self.codec.decode(job.prompt)
        if job.logprobs is None:
            return text, []
        pieces = self.codec.pieces(text) if job.prompt_text is not None else []
        if len(pieces) != len(job.prompt):
            pieces = [self.codec.decode_one(i) for i in job.prompt]
        lps: list[TokenLogprob | None] = [None, *(ev.prompt_logprobs or ())]
        return text, list(zip(pieces, lps, strict=False))

    def usage(self) -> dict[str, int]:
        ev = self.last
        p, c = (ev.prompt_tokens, ev.completion_tokens) if ev is not None else (len(self.job.prompt), 0)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


class CompletionLogprobs:
    """OpenAI's legacy ``logprobs`` object, built token by token; ``offset``: characters of the choice's text
    before the first token added."""

    def __init__(self, codec: Codec, offset: int = 0) -> None:
        self.codec, self.offset = codec, offset
        self.d: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}

    def add(self, entries: list[tuple[str, TokenLogprob | None]]) -> dict[str, list[Any]]:
        """Add ``entries`` (token text, entry); the object of just these (for a stream chunk)."""
        part: dict[str, list[Any]] = {k: [] for k in self.d}
        for text, lp in entries:
            part["tokens"].append(text)
            part["token_logprobs"].append(lp.logprob if lp is not None else None)
            part["top_logprobs"].append(self._top(lp))
            part["text_offset"].append(self.offset)
            self.offset += len(text)
        for k, v in part.items():
            self.d[k] += v
        return part

    def _top(self, lp: TokenLogprob | None) -> dict[str, float] | None:
        if lp is None:
            return None
        top = {self.codec.decode_one(i): v for i, v in lp.top}
        top.setdefault(self.codec.decode_one(lp.token), lp.logprob)
        return top


def chat_logprobs(codec: Codec, entries: list[tuple[str, TokenLogprob | None]]) -> dict[str, Any]:
    """OpenAI's chat ``logprobs`` object of ``entries`` (module docstring)."""

    def one(text: str, logprob: float) -> dict[str, Any]:
        return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}

    content = []
    for text, lp in entries:
        if lp is None:
            continue
        item = one(text, lp.logprob)
        item["top_logprobs"] = [one(codec.decode_one(i), v) for i, v in lp.top]
        content.append(item)
    return {"content": content}
