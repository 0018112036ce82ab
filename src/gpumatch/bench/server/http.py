"""The OpenAI-compatible HTTP API of ``gpumatch serve`` (aiohttp.web), shaped as vLLM's OpenAI server.

Routes (request and response shapes as in https://platform.openai.com/docs/api-reference/completions and
.../chat and vLLM's extensions; streaming as server-sent events ``data: {json}`` ending with ``data: [DONE]``):

- ``POST /v1/completions`` and ``POST /v1/chat/completions``: fields and checks in :mod:`.protocol`; ``stop``,
  ``stop_token_ids``, ``min_tokens``, ``logprobs`` / ``top_logprobs``, ``echo`` as :mod:`.responses` renders them;
- ``GET /v1/models`` and ``GET /v1/models/{id}`` (vLLM's model card: ``root``, ``parent``, ``max_model_len``,
  ``permission``), ``POST /tokenize``, ``POST /detokenize``, ``GET /version``, ``GET /health`` (503 once the
  engine failed), ``GET|POST /ping``, ``GET /metrics`` (Prometheus text, :mod:`.metrics`);
- ``GET /gpumatch/info`` (what was built), ``GET /gpumatch/iterations`` (the recent passes),
  ``GET /gpumatch/telemetry?since=UNIX_S`` (GPU samples, when the server has them).

Every error is vLLM's JSON body (:func:`gpumatch.bench.server.protocol.error_body`): bad requests 400, an unknown
model or path 404, a wrong method 405 (a middleware turns aiohttp's own 404/405/413 into it). A client that goes
away mid-request is noticed at the next write (streams) or within :data:`POLL_S` (whole responses): its request is
aborted, its KV slot freed, and one debug line logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from typing import Any

from aiohttp import web

from gpumatch.bench.server import tokens
from gpumatch.bench.server.engine import Engine, Event, Options
from gpumatch.bench.server.protocol import BadRequest, Job, chat_ids, error_body, parse
from gpumatch.bench.server.responses import CompletionLogprobs, Delta, Output, chat_logprobs

TelemetryFn = Callable[[float | None], dict[str, Any]]
ENGINE_KEY = web.AppKey("engine", Engine)
POLL_S = 0.5
"""How often a whole (non-streamed) response checks that its client is still connected, seconds."""
log = logging.getLogger("gpumatch.serve")


def _error(message: str, status: int = 400, param: str | None = None) -> web.Response:
    return web.json_response(error_body(message, status, param), status=status)


class _Request:
    """One request's bridge from the engine thread to the event loop."""

    def __init__(self, engine: Engine, job: Job) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[Event] = asyncio.Queue()
        self.engine, self.job = engine, job
        self.done = False
        opts = Options(job.ignore_eos, job.stop_token_ids, job.min_tokens, job.logprobs,
                       job.logprobs if job.echo and job.logprobs is not None else None)
        self.rid = engine.submit(job.prompt, job.max_tokens, job.ignore_eos, self.queue.put_nowait, opts)

    async def events(self, alive: Callable[[], bool] | None = None) -> AsyncIterator[Event]:
        """The request's events until its last. With ``alive``: checked before each event and every
        :data:`POLL_S` while none comes; the events stop early (the caller's ``close`` aborts the request) once
        it is false."""
        while not self.done:
            if alive is not None and not alive():
                log.debug("client gone; request %d aborted", self.rid)
                return
            if alive is None or not self.queue.empty():
                ev = await self.queue.get()
            else:
                try:
                    ev = await asyncio.wait_for(self.queue.get(), POLL_S)
                except TimeoutError:
                    continue
            self.done = ev.finish_reason is not None
            yield ev

    def stop(self) -> None:
        """A stop string ended the output: end the request in the engine as ``stop``."""
        if not self.done:
            self.done = True
            self.engine.abort(self.rid, "stop")

    def close(self) -> None:
        if not self.done:
            self.engine.abort(self.rid)


class _Render:
    """The JSON of one response: ids, chunks and whole bodies for a completion or a chat job."""

    def __init__(self, job: Job, model: str, codec: tokens.Codec) -> None:
        self.job, self.model, self.codec = job, model, codec
        self.rid = ("chatcmpl-" if job.chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.object = "chat.completion" if job.chat else "text_completion"
        self.lp = CompletionLogprobs(codec)

    def _logprobs(self, d: Delta) -> Any:
        if self.job.logprobs is None:
            return None
        return chat_logprobs(self.codec, d.logprobs) if self.job.chat else self.lp.add(d.logprobs)

    def chunk(self, d: Delta | None, role: bool = False) -> dict[str, Any]:
        """A stream chunk of ``d`` (None: the chat's opening chunk with the role)."""
        choice: dict[str, Any] = {"index": 0, "logprobs": self._logprobs(d) if d else None,
                                  "finish_reason": d.finish_reason if d else None}
        if d is not None and d.finish_reason is not None:
            choice["stop_reason"] = d.stop_reason
        if self.job.chat:
            choice["delta"] = {"role": "assistant", "content": ""} if role else {"content": d.text if d else ""}
        else:
            choice["text"] = d.text if d else ""
        obj = "chat.completion.chunk" if self.job.chat else "text_completion"
        return {"id": self.rid, "object": obj, "created": self.created, "model": self.model, "choices": [choice]}

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, Any]:
        return {**self.chunk(None), "choices": [], "usage": usage}

    def whole(self, d: Delta, usage: dict[str, int]) -> dict[str, Any]:
        """The body of a whole response whose deltas were merged into ``d``."""
        choice: dict[str, Any] = {"index": 0, "logprobs": self._logprobs(d), "finish_reason": d.finish_reason,
                                  "stop_reason": d.stop_reason}
        if self.job.chat:
            choice["message"] = {"role": "assistant", "content": d.text}
        else:
            choice["text"] = d.text
        return {"id": self.rid, "object": self.object, "created": self.created, "model": self.model,
                "choices": [choice], "usage": usage}


def _alive(request: web.Request) -> Callable[[], bool]:
    def alive() -> bool:
        t = request.transport
        return t is not None and not t.is_closing()
    return alive


async def _stream(request: web.Request, req: _Request, model: str, codec: tokens.Codec) -> web.StreamResponse:
    job, out = req.job, Output(req.job, codec)
    r = _Render(job, model, codec)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(obj: Any) -> None:
        if job.continuous_usage and obj.get("choices"):  # vLLM: the usage so far on every choice chunk
            obj["usage"] = out.usage()
        await resp.write(f"data: {json.dumps(obj, separators=(',', ':'))}\n\n".encode())

    try:
        if job.chat:
            await send(r.chunk(None, role=True))
        async for ev in req.events():
            if ev.error is not None:
                await send(error_body(ev.error, 500))
                break
            d = out.add(ev)
            if out.stopped_by_string:
                req.stop()
            await send(r.chunk(d))
            if d.finish_reason is not None:
                if job.include_usage:
                    await send(r.usage_chunk(out.usage()))
                break
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
    except ConnectionResetError:
        log.debug("client closed the stream of request %d; aborted", req.rid)
    return resp


async def _whole(request: web.Request, req: _Request, model: str, codec: tokens.Codec) -> web.Response:
    job, out = req.job, Output(req.job, codec)
    merged = Delta("")
    async for ev in req.events(_alive(request)):
        if ev.error is not None:
            return _error(ev.error, 500)
        d = out.add(ev)
        merged.text += d.text
        merged.logprobs += d.logprobs
        merged.finish_reason, merged.stop_reason = d.finish_reason, d.stop_reason
        if out.stopped_by_string:
            req.stop()
        if d.finish_reason is not None:
            break
    if merged.finish_reason is None:  # client gone: nobody reads this
        return _error("the client closed the connection", 400)
    return web.json_response(_Render(job, model, codec).whole(merged, out.usage()))


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own 404 / 405 / 413 as vLLM-shaped JSON errors."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        msg = {404: f"Not Found: no route for {request.method} {request.path}",
               405: f"Method Not Allowed: {request.method} {request.path}"}.get(e.status, e.reason)
        headers = {"Allow": e.headers["Allow"]} if "Allow" in e.headers else None
        return web.json_response(error_body(msg, e.status), status=e.status, headers=headers)


def model_card(engine: Engine, created: int) -> dict[str, Any]:
    """vLLM's ``ModelCard`` of the served model (``root``: the served name; no parent: no adapters)."""
    name = engine.info.model
    perm = {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": created,
            "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
            "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False, "organization": "*",
            "group": None, "is_blocking": False}
    return {"id": name, "object": "model", "created": created, "owned_by": "gpumatch", "root": name,
            "parent": None, "max_model_len": engine.scheduler.max_model_len, "permission": [perm]}


def _version() -> str:
    import gpumatch

    return str(gpumatch.__version__)


async def _json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not valid JSON ({e})") from e


def make_app(engine: Engine, telemetry: TelemetryFn | None = None,
             codec: tokens.Codec | None = None) -> web.Application:
    """The aiohttp application over a started ``engine``; ``codec`` turns text into ids and back (default: words
    as tokens, :mod:`gpumatch.bench.server.tokens`)."""
    model = engine.info.model
    vocab = int(engine.runner.model.s.vocab)
    max_len = engine.scheduler.max_model_len
    text_codec: tokens.Codec = codec if codec is not None else tokens.WordCodec(vocab)
    created = int(time.time())
    app = web.Application(client_max_size=16 * 2**20, middlewares=[json_errors])
    app[ENGINE_KEY] = engine

    def refusing(fn: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                return await fn(request)
            except BadRequest as e:
                return _error(str(e), e.status, e.param)
        return handler

    async def generate(request: web.Request, chat: bool) -> web.StreamResponse:
        job = parse(await _json_body(request), chat, vocab, max_len, model, text_codec)
        try:
            req = _Request(engine, job)
        except ValueError as e:
            raise BadRequest(str(e), "max_tokens") from e
        except RuntimeError as e:
            return _error(str(e), 503)
        try:
            if job.stream:
                return await _stream(request, req, model, text_codec)
            return await _whole(request, req, model, text_codec)
        finally:
            req.close()

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, False)

    async def chat(request: web.Request) -> web.StreamResponse:
        return await generate(request, True)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [model_card(engine, created)]})

    async def one_model(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name != model:
            raise BadRequest(f"The model `{name}` does not exist.", "model", 404)
        return web.json_response(model_card(engine, created))

    async def tokenize(request: web.Request) -> web.Response:
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        if body.get("model") not in (None, model):
            raise BadRequest(f"The model `{body['model']}` does not exist.", "model", 404)
        if "messages" in body:
            ids = chat_ids(body["messages"], text_codec)
        elif isinstance(body.get("prompt"), str):
            ids = text_codec.encode(body["prompt"])
        else:
            raise BadRequest("give a prompt (a string) or messages", "prompt")
        strs = [text_codec.decode_one(i) for i in ids] if body.get("return_token_strs") else None
        return web.json_response({"count": len(ids), "max_model_len": max_len, "tokens": ids, "token_strs": strs})

    async def detokenize(request: web.Request) -> web.Response:
        body = await _json_body(request)
        ids = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(ids, list):
            raise BadRequest("tokens must be a list of token ids", "tokens")
        try:
            return web.json_response({"prompt": text_codec.decode(tokens.check_ids(ids, vocab))})
        except ValueError as e:
            raise BadRequest(str(e), "tokens") from e

    async def health(request: web.Request) -> web.Response:
        if engine.error is not None:
            return _error(f"the engine failed: {engine.error}", 503)
        return web.json_response({"status": "ok"})

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": _version()})

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
        web.post("/v1/completions", refusing(completions)), web.post("/v1/chat/completions", refusing(chat)),
        web.get("/v1/models", models), web.get("/v1/models/{name:.+}", refusing(one_model)),
        web.post("/tokenize", refusing(tokenize)), web.post("/detokenize", refusing(detokenize)),
        web.get("/health", health), web.get("/ping", health), web.post("/ping", health),
        web.get("/version", version), web.get("/metrics", metrics),
        web.get("/gpumatch/info", info), web.get("/gpumatch/iterations", iterations),
        web.get("/gpumatch/telemetry", tele),
    ])
    return app
