"""Request bodies of ``gpumatch serve``: parsing and validation into a :class:`Job` (torch-free).

Fields and checks follow OpenAI's completions / chat API and vLLM's extensions (vLLM
``entrypoints/openai/protocol.py`` and ``sampling_params.py``); a bad field raises :class:`BadRequest`, which the
HTTP layer turns into vLLM's error body ``{"error": {"message", "type": "BadRequestError", "param", "code": 400}}``
(:func:`error_body`). Sampling is greedy whatever ``temperature``, ``top_p``, ``top_k``, ``seed`` and the penalties
say; they are still checked as vLLM checks them, so a request vLLM refuses is refused here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpumatch.bench.server import tokens

MAX_LOGPROBS = 20
"""Most top log-probs a request may ask for (vLLM's ``max_logprobs`` default; OpenAI's chat limit)."""
DEFAULT_MAX_TOKENS = 16
"""Completions' default ``max_tokens`` (OpenAI's legacy default; chat defaults to what the context leaves)."""
ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
               413: "RequestEntityTooLargeError", 500: "InternalServerError", 503: "ServiceUnavailableError"}


class BadRequest(Exception):
    """A request this server refuses: message, the offending parameter, the HTTP status."""

    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status


def error_body(message: str, status: int = 400, param: str | None = None) -> dict[str, Any]:
    """vLLM's error object (``ErrorResponse(error=ErrorInfo(message, type, param, code))``: ``code`` is the HTTP
    status, ``type`` its exception name)."""
    kind = ERROR_TYPES.get(status, "BadRequestError" if status < 500 else "InternalServerError")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


@dataclass(frozen=True)
class Job:
    """A parsed request: prompt ids (and its text, for ``echo``), length, streaming and the vLLM options.
    ``logprobs``: top-k with each output token (None: none); ``echo``: the prompt goes before the output."""

    prompt: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool
    chat: bool
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    min_tokens: int = 0
    logprobs: int | None = None
    echo: bool = False
    prompt_text: str | None = None
    continuous_usage: bool = False
    skip_special_tokens: bool = True


def _int(body: dict[str, Any], name: str, default: int | None) -> int | None:
    v = body.get(name, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{name} must be an integer, not {v!r}", name)
    return v


def _number(body: dict[str, Any], name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadRequest(f"{name} must be a number, not {v!r}", name)
    return float(v)


def _bool(body: dict[str, Any], name: str) -> bool:
    v = body.get(name, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise BadRequest(f"{name} must be true or false, not {v!r}", name)
    return v


def _skip_special(body: dict[str, Any]) -> bool:
    """vLLM's ``skip_special_tokens`` (default true: special tokens such as EOS add no output text)."""
    return _bool(body, "skip_special_tokens") if body.get("skip_special_tokens") is not None else True


def _check_sampling(body: dict[str, Any]) -> None:
    """The sampling knobs this server accepts and ignores, held to vLLM's ranges (SamplingParams._verify_args)."""
    t = _number(body, "temperature")
    if t is not None and t < 0:
        raise BadRequest(f"temperature must be non-negative, got {t}.", "temperature")
    p = _number(body, "top_p")
    if p is not None and not 0 < p <= 1:
        raise BadRequest(f"top_p must be in (0, 1], got {p}.", "top_p")
    k = _int(body, "top_k", None)
    if k is not None and k < -1:
        raise BadRequest(f"top_k must be -1 (disable), or at least 1, got {k}.", "top_k")
    for name in ("presence_penalty", "frequency_penalty"):
        v = _number(body, name)
        if v is not None and not -2 <= v <= 2:
            raise BadRequest(f"{name} must be in [-2, 2], got {v}.", name)
    r = _number(body, "repetition_penalty")
    if r is not None and r <= 0:
        raise BadRequest(f"repetition_penalty must be greater than zero, got {r}.", "repetition_penalty")
    _int(body, "seed", None)
    n = _int(body, "n", 1)
    if n != 1:
        raise BadRequest(f"n must be 1 on this server (one sequence per request), got {n}.", "n")


def _stops(body: dict[str, Any], vocab: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``stop`` (a string or a list of strings, none empty) and ``stop_token_ids`` (ids in the vocabulary)."""
    stop = body.get("stop")
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise BadRequest("stop must be a string or a list of strings", "stop")
    if any(s == "" for s in stop):
        raise BadRequest("stop cannot contain an empty string.", "stop")
    ids = body.get("stop_token_ids") or []
    if not isinstance(ids, list):
        raise BadRequest("stop_token_ids must be a list of token ids", "stop_token_ids")
    try:
        return tuple(stop), tuple(tokens.check_ids(ids, vocab))
    except ValueError as e:
        raise BadRequest(f"stop_token_ids: {e}", "stop_token_ids") from e


def _logprobs(body: dict[str, Any], chat: bool) -> int | None:
    """Top-k wanted: completions ``logprobs`` (an integer); chat ``logprobs: true`` with ``top_logprobs``."""
    if chat:
        on, k = _bool(body, "logprobs"), _int(body, "top_logprobs", None)
        if k is not None and not on:
            raise BadRequest("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs")
        name, k = "top_logprobs", (k or 0) if on else None
    else:
        name, k = "logprobs", _int(body, "logprobs", None)
    if k is not None and k < 0:
        raise BadRequest(f"{name} must be non-negative, got {k}.", name)
    if k is not None and k > MAX_LOGPROBS:
        raise BadRequest(f"Requested sample logprobs of {k}, which is greater than max allowed: {MAX_LOGPROBS}",
                         name)
    return k


def _prompt_ids(prompt: Any, vocab: int, codec: tokens.Codec) -> tuple[list[int], str | None]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return codec.encode(prompt), prompt
    if isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
        raise BadRequest("one prompt per request (a batch of prompts is not supported)", "prompt")
    if isinstance(prompt, list):
        try:
            return tokens.check_ids(prompt, vocab), None
        except ValueError as e:
            raise BadRequest(str(e), "prompt") from e
    raise BadRequest("prompt must be a string or a list of token ids (one prompt per request)", "prompt")


def chat_ids(messages: Any, codec: tokens.Codec) -> list[int]:
    """The prompt ids of chat ``messages``: the words of ``"<role>: <content>"`` of each message, in order."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    words: list[int] = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message needs a role and a content", "messages")
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise BadRequest("message content must be text", "messages")
        words += codec.encode(f"{m['role']}: {content}")
    return words


def context_message(max_model_len: int, prompt_tokens: int, max_tokens: int | None) -> str:
    """vLLM's refusal of a request longer than the model (serving_engine ``_validate_input``)."""
    if max_tokens is None:
        return (f"This model's maximum context length is {max_model_len} tokens. However, you requested "
                f"{prompt_tokens} tokens in the messages, Please reduce the length of the messages.")
    return (f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
            f"completion). Please reduce the length of the messages or completion.")


def _lengths(body: dict[str, Any], chat: bool, prompt_tokens: int, max_model_len: int) -> tuple[int, int]:
    """``max_tokens`` (chat: ``max_completion_tokens`` first; default what the context leaves) and
    ``min_tokens``, checked against each other and the model length."""
    if prompt_tokens < 1:
        raise BadRequest("the prompt has no tokens", "messages" if chat else "prompt")
    if prompt_tokens >= max_model_len:
        raise BadRequest(context_message(max_model_len, prompt_tokens, None), "messages" if chat else "prompt")
    asked = _int(body, "max_completion_tokens", None) if chat else None
    name = "max_completion_tokens" if asked is not None else "max_tokens"
    asked = asked if asked is not None else _int(body, "max_tokens", None if chat else DEFAULT_MAX_TOKENS)
    max_tokens = asked if asked is not None else max_model_len - prompt_tokens
    if max_tokens < 1:
        raise BadRequest(f"max_tokens must be at least 1, got {max_tokens}.", name)
    if prompt_tokens + max_tokens > max_model_len:
        raise BadRequest(context_message(max_model_len, prompt_tokens, max_tokens), name)
    min_tokens = _int(body, "min_tokens", 0) or 0
    if min_tokens < 0:
        raise BadRequest(f"min_tokens must be greater than or equal to 0, got {min_tokens}.", "min_tokens")
    if min_tokens > max_tokens:
        raise BadRequest(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
                         "min_tokens")
    return max_tokens, min_tokens


def _stream_options(body: dict[str, Any], stream: bool) -> tuple[bool, bool]:
    """``(include_usage, continuous_usage)`` of ``stream_options``: as vLLM's ``should_include_usage``
    (``vllm/entrypoints/utils.py``), continuous usage (``continuous_usage_stats``, a usage object on every chunk)
    only together with ``include_usage``."""
    opts = body.get("stream_options")
    if opts is None:
        return False, False
    if not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object", "stream_options")
    if not stream:
        raise BadRequest("Stream options can only be defined when `stream=True`.", "stream_options")
    usage = _bool(opts, "include_usage")
    return usage, usage and _bool(opts, "continuous_usage_stats")


def parse(body: Any, chat: bool, vocab: int, max_model_len: int, model: str,
          codec: tokens.Codec | None = None) -> Job:
    """The job of a request body; :class:`BadRequest` for anything this server cannot or will not do. ``codec``:
    how text becomes ids (default: words as tokens)."""
    codec = codec if codec is not None else tokens.WordCodec(vocab)
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    name = body.get("model")
    if name is not None and name != model:
        raise BadRequest(f"The model `{name}` does not exist.", "model", 404)
    _check_sampling(body)
    if chat:
        ids, text = chat_ids(body.get("messages"), codec), None
    else:
        ids, text = _prompt_ids(body.get("prompt"), vocab, codec)
    max_tokens, min_tokens = _lengths(body, chat, len(ids), max_model_len)
    stop, stop_ids = _stops(body, vocab)
    stream = _bool(body, "stream")
    usage, continuous = _stream_options(body, stream)
    return Job(ids, max_tokens, stream, usage, _bool(body, "ignore_eos"), chat,
               stop=stop, stop_token_ids=stop_ids, min_tokens=min_tokens, logprobs=_logprobs(body, chat),
               echo=False if chat else _bool(body, "echo"), prompt_text=text, continuous_usage=continuous,
               skip_special_tokens=_skip_special(body))
