"""The OpenAI-compatible HTTP API of ``gpumatch serve`` (aiohttp.web).

Routes (request and response shapes as in https://platform.openai.com/docs/api-reference/completions and
.../chat, streaming as server-sent events ``data: {json}`` ending with ``data: [DONE]``):

- ``POST /v1/completions``: ``prompt`` (text, or a list of token ids, or a one-element list of either),
  ``max_tokens`` (default 16, as OpenAI's), ``stream``, ``stream_options.include_usage``, ``ignore_eos`` (vLLM's
  extension); ``n`` must be 1. Sampling is greedy: ``temperature``, ``top_p`` and the like are accepted and
  ignored.
- ``POST /v1/chat/completions``: ``messages`` (role + text content; the prompt is the words of
  ``"<role>: <content>"`` of each message), ``max_completion_tokens`` or ``max_tokens`` (default: what the model
  length leaves).
- ``GET /v1/models``, ``GET /health`` (503 once the engine failed), ``GET /metrics`` (Prometheus text),
  ``GET /gpumatch/info`` (what was built), ``GET /gpumatch/iterations`` (the recent passes),
  ``GET /gpumatch/telemetry?since=UNIX_S`` (GPU samples, when the server has them).

Bad bodies are HTTP 400 with OpenAI's error object ``{"error": {"message", "type": "invalid_request_error",
"param", "code"}}``; an unknown model is 404. ``usage`` counts tokens as the codec of
:mod:`gpumatch.bench.server.tokens` does (words, or the weights folder's tokenizer).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from gpumatch.bench.server import tokens
from gpumatch.bench.server.engine import Engine, Event

TelemetryFn = Callable[[float | None], dict[str, Any]]
ENGINE_KEY = web.AppKey("engine", Engine)


class BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.param, self.status = param, status


@dataclass(frozen=True)
class Job:
    """A parsed request."""

    prompt: list[int]
    max_tokens: int
    stream: bool
    include_usage: bool
    ignore_eos: bool
    chat: bool


def _error(message: str, status: int = 400, param: str | None = None) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return web.json_response(body, status=status)


def _int(body: dict[str, Any], name: str, default: int | None) -> int | None:
    v = body.get(name, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadRequest(f"{name} must be an integer, not {v!r}", name)
    return v


def _bool(body: dict[str, Any], name: str) -> bool:
    v = body.get(name, False)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise BadRequest(f"{name} must be true or false, not {v!r}", name)
    return v


def _prompt_ids(prompt: Any, vocab: int, codec: tokens.Codec) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return codec.encode(prompt)
    if isinstance(prompt, list):
        try:
            return tokens.check_ids(prompt, vocab)
        except ValueError as e:
            raise BadRequest(str(e), "prompt") from e
    raise BadRequest("prompt must be a string or a list of token ids (one prompt per request)", "prompt")


def _chat_ids(messages: Any, codec: tokens.Codec) -> list[int]:
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


def parse(body: Any, chat: bool, vocab: int, max_model_len: int, model: str,
          codec: tokens.Codec | None = None) -> Job:
    """The job of a request body; :class:`BadRequest` for anything this server cannot do. ``codec``: how text
    becomes ids (default: words as tokens)."""
    codec = codec if codec is not None else tokens.WordCodec(vocab)
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    name = body.get("model")
    if name is not None and name != model:
        raise BadRequest(f"The model `{name}` does not exist (this server serves `{model}`)", "model", 404)
    if _int(body, "n", 1) != 1:
        raise BadRequest("n must be 1", "n")
    ids = _chat_ids(body.get("messages"), codec) if chat else _prompt_ids(body.get("prompt"), vocab, codec)
    default = max(max_model_len - len(ids), 1) if chat else 16
    max_tokens = _int(body, "max_completion_tokens", None) if chat else None
    max_tokens = max_tokens if max_tokens is not None else _int(body, "max_tokens", default)
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object", "stream_options")
    return Job(ids, default if max_tokens is None else max_tokens, _bool(body, "stream"),
               bool(opts.get("include_usage")),
               _bool(body, "ignore_eos"), chat)


class _Request:
    """One request's bridge from the engine thread to the event loop."""

    def __init__(self, engine: Engine, job: Job) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.engine, self.job = engine, job
        self.done = False
        self.rid = engine.submit(job.prompt, job.max_tokens, job.ignore_eos, self._from_engine)

    def _from_engine(self, ev: Event) -> None:
        """Runs on the event loop (the engine's dispatch hands each pass's events over at once)."""
        self.queue.put_nowait(ev)

    async def events(self) -> Any:
        while not self.done:
            ev = await self.queue.get()
            self.done = ev.finish_reason is not None
            yield ev

    def close(self) -> None:
        if not self.done:
            self.engine.abort(self.rid)


def _chunk(job: Job, rid: str, model: str, created: int, text: str | None, finish: str | None,
           role: bool = False) -> dict[str, Any]:
    if job.chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [choice]}
    return {"id": rid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}]}


def _usage(ev: Event) -> dict[str, int]:
    return {"prompt_tokens": ev.prompt_tokens, "completion_tokens": ev.completion_tokens,
            "total_tokens": ev.prompt_tokens + ev.completion_tokens}


async def _stream(request: web.Request, req: _Request, model: str, codec: tokens.Codec) -> web.StreamResponse:
    job = req.job
    rid = ("chatcmpl-" if job.chat else "cmpl-") + uuid.uuid4().hex
    created = int(time.time())
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(obj: Any) -> None:
        await resp.write(f"data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode())

    if job.chat:
        await send(_chunk(job, rid, model, created, None, None, role=True))
    async for ev in req.events():
        if ev.error is not None:
            await send({"error": {"message": ev.error, "type": "server_error", "param": None, "code": None}})
            break
        text = codec.decode_one(ev.token) if ev.token is not None else ""
        await send(_chunk(job, rid, model, created, text, ev.finish_reason))
        if ev.finish_reason is not None and job.include_usage:
            usage = {"id": rid, "object": _chunk(job, rid, model, created, None, None)["object"],
                     "created": created, "model": model, "choices": [], "usage": _usage(ev)}
            await send(usage)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _whole(req: _Request, model: str, codec: tokens.Codec) -> web.Response:
    job = req.job
    text: list[str] = []
    last: Event | None = None
    async for ev in req.events():
        if ev.error is not None:
            return _error(ev.error, 500)
        if ev.token is not None:
            text.append(codec.decode_one(ev.token))
        last = ev
    assert last is not None
    rid = ("chatcmpl-" if job.chat else "cmpl-") + uuid.uuid4().hex
    out = "".join(text)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": last.finish_reason}
    if job.chat:
        choice["message"] = {"role": "assistant", "content": out}
    else:
        choice["text"] = out
    return web.json_response({"id": rid, "object": "chat.completion" if job.chat else "text_completion",
                              "created": int(time.time()), "model": model, "choices": [choice],
                              "usage": _usage(last)})


def make_app(engine: Engine, telemetry: TelemetryFn | None = None,
             codec: tokens.Codec | None = None) -> web.Application:
    """The aiohttp application over a started ``engine``; ``codec`` turns text into ids and back (default: words
    as tokens, :mod:`gpumatch.bench.server.tokens`)."""
    model = engine.info.model
    vocab = int(engine.runner.model.s.vocab)
    codec = codec if codec is not None else tokens.WordCodec(vocab)
    app = web.Application(client_max_size=16 * 2**20)
    app[ENGINE_KEY] = engine

    async def generate(request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error("the body is not valid JSON")
        try:
            job = parse(body, chat, vocab, engine.scheduler.max_model_len, model, codec)
            req = _Request(engine, job)
        except BadRequest as e:
            return _error(str(e), e.status, e.param)
        except ValueError as e:
            return _error(str(e), 400, "prompt" if "prompt has no tokens" in str(e) else "max_tokens")
        except RuntimeError as e:
            return _error(str(e), 503)
        try:
            return await (_stream(request, req, model, codec) if job.stream else _whole(req, model, codec))
        finally:
            req.close()

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, False)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await generate(request, True)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": "gpumatch",
             "max_model_len": engine.scheduler.max_model_len}]})

    async def health(request: web.Request) -> web.Response:
        if engine.error is not None:
            return _error(f"the engine failed: {engine.error}", 503)
        return web.json_response({"status": "ok"})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=engine.metrics.text(), headers={"Content-Type": "text/plain; version=0.0.4"})

    async def info(request: web.Request) -> web.Response:
        return web.json_response(engine.info.to_dict())

    async def iterations(request: web.Request) -> web.Response:
        return web.json_response({"iterations": [asdict(i) for i in engine.iterations()]})

    async def tele(request: web.Request) -> web.Response:
        raw = request.query.get("since")
        try:
            since = float(raw) if raw is not None else None
        except ValueError:
            return _error(f"since must be a number of seconds since the epoch, not {raw!r}", param="since")
        if telemetry is None:
            return web.json_response({"available": False, "reason": "this server samples no GPU telemetry"})
        return web.json_response(telemetry(since))

    async def hand_over(app: web.Application) -> None:
        loop = asyncio.get_running_loop()

        def run_all(events: list[tuple[Callable[[Event], None], Event]]) -> None:
            for cb, ev in events:
                cb(ev)

        def dispatch(events: list[tuple[Callable[[Event], None], Event]]) -> None:
            if events and not loop.is_closed():
                loop.call_soon_threadsafe(run_all, events)

        engine.dispatch = dispatch

    app.on_startup.append(hand_over)
    app.add_routes([
        web.post("/v1/completions", completions), web.post("/v1/chat/completions", chat),
        web.get("/v1/models", models), web.get("/health", health), web.get("/metrics", metrics),
        web.get("/gpumatch/info", info), web.get("/gpumatch/iterations", iterations),
        web.get("/gpumatch/telemetry", tele),
    ])
    return app
