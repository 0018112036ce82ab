"""A built-in OpenAI-compatible fake server (aiohttp.web) that streams tokens at a fixed rate.

It does no inference: its service time is negligible, so what the load generator measures against it is the
client's own capacity (the client self-test, :mod:`gpumatch.loadgen.selftest`). It runs in its own process
(:class:`Loopback`), so its CPU time is not the client's.

Routes: ``POST /v1/completions`` and ``/v1/chat/completions`` (streamed or not), ``GET /v1/models``. A request
for ``max_tokens`` = n gets its first chunk ``ttft_s`` after arrival and chunk ``k`` at ``ttft_s + k · itl_s``
(an absolute schedule: the server's own overhead does not accumulate), ``tokens_per_chunk`` tokens per chunk,
then a usage chunk (``prompt_tokens`` = words of the prompt, or its tokens by ``tokenizer`` (a tokenizer.json, as
a real server counts them); ``completion_tokens`` = n + ``usage_delta``) and ``data: [DONE]``. ``GET
/loopback/seen`` answers the bodies and headers of the last 100 completion requests (what a client really sent).

Faults for tests and demonstrations: ``usage_delta`` (a server that misreports or ignores the output length),
``error_every`` (every k-th request answers HTTP 500), ``die_after`` (the process kills itself with SIGKILL
while streaming its n-th request: a server crash mid-run).

Command line: ``python -m gpumatch.loadgen.loopback --port 0 --itl-ms 10`` prints
``listening on http://127.0.0.1:PORT`` and serves until terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from gpumatch.errors import GpumatchError

MODEL = "gpumatch-loopback"


@dataclass(frozen=True)
class LoopbackConfig:
    """How the fake server answers (module docstring)."""

    itl_s: float = 0.01
    ttft_s: float = 0.0
    tokens_per_chunk: int = 1
    usage_delta: int = 0
    error_every: int = 0
    die_after: int = 0
    tokenizer: str = ""

    def argv(self) -> list[str]:
        return ["--itl-ms", f"{self.itl_s * 1000:g}", "--ttft-ms", f"{self.ttft_s * 1000:g}",
                "--tokens-per-chunk", str(self.tokens_per_chunk), "--usage-delta", str(self.usage_delta),
                "--error-every", str(self.error_every), "--die-after", str(self.die_after),
                *(["--tokenizer", self.tokenizer] if self.tokenizer else [])]


def make_app(cfg: LoopbackConfig) -> Any:
    """The aiohttp.web application."""
    from aiohttp import web

    state = {"requests": 0}
    seen: collections.deque[dict[str, Any]] = collections.deque(maxlen=100)
    count = _prompt_counter(cfg.tokenizer)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                              "owned_by": "gpumatch", "max_model_len": 1 << 20}]})

    async def complete(request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        state["requests"] += 1
        n_req = state["requests"]
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        if cfg.error_every and n_req % cfg.error_every == 0:
            return web.json_response({"error": {"message": "loopback: injected error"}}, status=500)
        seen.append({"body": body, "headers": dict(request.headers)})
        chat = request.path.endswith("/chat/completions")
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        prompt = body.get("prompt") if not chat else " ".join(m.get("content", "") for m in body.get("messages", []))
        usage = {"prompt_tokens": count(str(prompt or "")), "completion_tokens": n + cfg.usage_delta}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            await _sleep_until(arrived + cfg.ttft_s + (n - 1) * cfg.itl_s)
            text = " tok" * n
            choice = {"index": 0, "message": {"role": "assistant", "content": text}} if chat else \
                {"index": 0, "text": text}
            return web.json_response({"id": f"cmpl-{n_req}", "choices": [choice], "usage": usage})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        sent, k = 0, 0
        while sent < n:
            await _sleep_until(arrived + cfg.ttft_s + k * cfg.itl_s)
            take = min(cfg.tokens_per_chunk, n - sent)
            await resp.write(_chunk(n_req, " tok" * take, chat))
            sent, k = sent + take, k + 1
            if cfg.die_after and n_req >= cfg.die_after and sent >= min(n, 2):
                os.kill(os.getpid(), signal.SIGKILL)
        await resp.write(b"data: " + json.dumps({"id": f"cmpl-{n_req}", "choices": [], "usage": usage}).encode()
                         + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def seen_route(request: web.Request) -> web.Response:
        return web.json_response(list(seen))

    app = web.Application()
    app.router.add_get("/loopback/seen", seen_route)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", complete)
    app.router.add_post("/v1/chat/completions", complete)
    return app


def _prompt_counter(tokenizer: str) -> Any:
    """Prompt tokens as the loopback reports them: words, or the tokens of a tokenizer.json."""
    if not tokenizer:
        return lambda text: len(text.split())
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer)
    return lambda text: len(tok.encode(text).ids)


def _chunk(n_req: int, text: str, chat: bool) -> bytes:
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    return b"data: " + json.dumps({"id": f"cmpl-{n_req}", "choices": [choice]}).encode() + b"\n\n"


async def _sleep_until(t: float) -> None:
    delay = t - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


def serve(cfg: LoopbackConfig, port: int) -> None:
    """Serve on 127.0.0.1:``port`` (0: any free port) until terminated; print the URL first."""
    from aiohttp import web

    async def main() -> None:
        runner = web.AppRunner(make_app(cfg), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
        await site.start()
        bound = runner.addresses[0][1]
        sys.stdout.write(f"listening on http://127.0.0.1:{bound}\n")
        sys.stdout.flush()
        await asyncio.Event().wait()

    asyncio.run(main())


class Loopback:
    """The fake server in a child process: ``with Loopback(cfg) as url: ...`` (``url`` = ``http://127.0.0.1:P``).
    The child is stopped (SIGTERM, then SIGKILL) when the block ends."""

    def __init__(self, cfg: LoopbackConfig, start_timeout_s: float = 30.0) -> None:
        self.cfg, self.start_timeout_s = cfg, start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> str:
        cmd = [sys.executable, "-m", "gpumatch.loadgen.loopback", "--port", "0", *self.cfg.argv()]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        line = self._first_line()
        if not line.startswith("listening on "):
            err = self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""
            self.__exit__(None, None, None)
            raise GpumatchError("the client self-test's loopback server did not start",
                                f"is aiohttp installed? ('pip install gpumatch[serve]') {err.strip()[-200:]}")
        self.url = line.split()[-1]
        return self.url

    def _first_line(self) -> str:
        import selectors

        assert self.proc is not None and self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(self.start_timeout_s)
        sel.close()
        return self.proc.stdout.readline().strip() if ready else ""

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.proc = None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpumatch.loadgen.loopback", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--usage-delta", type=int, default=0)
    p.add_argument("--error-every", type=int, default=0)
    p.add_argument("--die-after", type=int, default=0)
    p.add_argument("--tokenizer", default="")
    a = p.parse_args(argv)
    cfg = LoopbackConfig(a.itl_ms / 1000.0, a.ttft_ms / 1000.0, max(1, a.tokens_per_chunk), a.usage_delta,
                         a.error_every, a.die_after, a.tokenizer)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        serve(cfg, a.port)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
