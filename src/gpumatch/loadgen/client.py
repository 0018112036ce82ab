"""One streamed request to an OpenAI-compatible server, over aiohttp, timed on the client's monotonic clock.

Bodies (OpenAI API, as vLLM, SGLang, TGI and llama.cpp's server accept them): ``/v1/completions`` with
``prompt``, ``/v1/chat/completions`` with one user message; ``max_tokens`` = the output length asked for,
``stream: true``, ``stream_options: {"include_usage": true}`` (the server's token counts arrive in the last
chunk), ``temperature: 0``. With ``enforce_length`` also ``ignore_eos: true`` and ``min_tokens`` = the length
(vLLM's and SGLang's extensions, MLPerf TEST06's concern: a request that stops early is cheaper): the server's
count is then checked against the length asked for (``RequestRecord.length_mismatch``). ``--extra-body`` is merged
into every body last (its keys win, as in vLLM), except the keys the load generator owns (:data:`OWNED_KEYS`);
``--header`` adds HTTP headers to every request.

The stream is Server-Sent Events: ``data: {json}`` lines ending with ``data: [DONE]``. A chunk counts as a
*content chunk* (its arrival time kept) when it carries output text (``choices[0].text``, or
``choices[0].delta.content`` / ``reasoning_content`` in chat).

Failures, as ``RequestRecord.error_class``: ``connection_refused`` (nothing listens: the server is gone),
``disconnected`` (the connection broke mid-stream), ``timeout``, ``http_<status>``, ``bad_stream`` (a chunk
that is not JSON, or a stream without output), ``client_error`` (any other aiohttp error). A request still running
at a time-limited level's hard stop (its ``--duration`` plus the grace period) is cut off and marked
``incomplete`` (status ``incomplete``: neither completed nor failed).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpumatch.errors import InputError
from gpumatch.loadgen.metrics import RequestRecord
from gpumatch.loadgen.workload import RequestSpec

if TYPE_CHECKING:
    import aiohttp

APIS = ("completions", "chat")
OWNED_KEYS = ("model", "prompt", "messages", "stream")
"""Body keys ``--extra-body`` may not set: they decide what is measured (use --model, the dataset, ...)."""


@dataclass(frozen=True)
class Target:
    """Where and how to send: the full URL of the completions route, the model name, the API flavour."""

    url: str
    model: str
    api: str = "completions"
    enforce_length: bool = True
    timeout_s: float = 600.0
    api_key: str | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        """The server's root (``http://host:port``), for ``/v1/models`` and ``/version``."""
        return self.url.split("/v1/")[0].rstrip("/")


def target_url(endpoint: str, api: str) -> str:
    """The completions URL of ``endpoint``: a full ``.../completions`` URL as given, else the server root or a
    ``.../v1`` base with ``/v1/completions`` or ``/v1/chat/completions`` added."""
    if api not in APIS:
        raise InputError(f"unknown API {api!r}", "completions or chat")
    e = endpoint.strip().rstrip("/")
    if not e.startswith(("http://", "https://")):
        raise InputError(f"endpoint {endpoint!r} is not an http(s) URL", "e.g. http://localhost:8000")
    if e.endswith("/completions"):
        return e
    route = "chat/completions" if api == "chat" else "completions"
    return f"{e}/{route}" if e.endswith("/v1") else f"{e}/v1/{route}"


def body(target: Target, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body of one request (module docstring)."""
    b: dict[str, Any] = {"model": target.model, "max_tokens": spec.output_tokens, "stream": True,
                         "stream_options": {"include_usage": True}, "temperature": 0.0}
    if target.api == "chat":
        b["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        b["prompt"] = spec.prompt
    if target.enforce_length:
        b.update({"ignore_eos": True, "min_tokens": spec.output_tokens})
    b.update(target.extra_body)
    return b


def parse_extra_body(text: str | None) -> dict[str, Any]:
    """``--extra-body``: a JSON object merged into every request body (module docstring)."""
    if not text:
        return {}
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"--extra-body is not JSON ({e.msg})", "e.g. '{\"top_k\": 1}'") from None
    if not isinstance(obj, dict):
        raise InputError("--extra-body must be a JSON object", "e.g. '{\"top_k\": 1}'")
    owned = sorted(set(obj) & set(OWNED_KEYS))
    if owned:
        raise InputError(f"--extra-body may not set {', '.join(owned)}", "use --model, --api and the dataset")
    return obj


def parse_headers(items: list[str]) -> dict[str, str]:
    """``--header K:V`` (repeatable; ``K=V`` as vLLM writes it is accepted too: the first ``:`` or ``=`` ends the
    name, since neither may appear in one) as a dict."""
    out: dict[str, str] = {}
    for item in items:
        sep = min((c for c in ":=" if c in item), key=item.index, default=":")
        key, found, value = item.partition(sep)
        if not key.strip() or not found or any(c in key for c in " \t\r\n") or any(c in value for c in "\r\n"):
            raise InputError(f"--header {item!r} is not NAME:VALUE", "e.g. --header 'X-Tenant: a'")
        out[key.strip()] = value.strip()
    return out


def chunk_text(obj: dict[str, Any]) -> str:
    """The output text a stream chunk carries ('' for a usage-only or role-only chunk)."""
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    if "text" in c:
        return str(c.get("text") or "")
    delta = c.get("delta") or {}
    return str(delta.get("content") or delta.get("reasoning_content") or "") if isinstance(delta, dict) else ""


async def send(session: aiohttp.ClientSession, target: Target, spec: RequestSpec, scheduled_s: float,
               t0: float, hard_stop_s: float | None = None) -> RequestRecord:
    """Send ``spec`` (scheduled at ``scheduled_s`` after ``t0``, a ``time.perf_counter`` value) and read its
    stream to the end, or to ``hard_stop_s`` after ``t0`` (then it is ``incomplete``); never raises for a server
    or network failure (it is in the record)."""
    import asyncio

    rec = RequestRecord(spec.index, scheduled_s, spec.prompt_tokens, spec.output_tokens)
    budget = None if hard_stop_s is None else max(hard_stop_s - (time.perf_counter() - t0), 0.0)
    try:
        async with asyncio.timeout(budget):
            return await _exchange(session, target, spec, rec, t0)
    except TimeoutError:
        rec = _fail(rec, t0, "incomplete", "still streaming at the level's hard stop (--duration + grace)")
        rec.status = "incomplete"
        return rec


async def _exchange(session: aiohttp.ClientSession, target: Target, spec: RequestSpec, rec: RequestRecord,
                    t0: float) -> RequestRecord:
    import asyncio

    import aiohttp

    headers = {**target.headers, **({"Authorization": f"Bearer {target.api_key}"} if target.api_key else {})}
    rec.sent_s = time.perf_counter() - t0
    try:
        async with session.post(target.url, json=body(target, spec), headers=headers or None,
                                timeout=aiohttp.ClientTimeout(total=target.timeout_s)) as resp:
            rec.http_status = resp.status
            if resp.status != 200:
                text = (await resp.text())[:300]
                return _fail(rec, t0, f"http_{resp.status}", " ".join(text.split()) or resp.reason or "")
            await _read_stream(resp, rec, t0)
    except aiohttp.ClientConnectorError as e:
        return _fail(rec, t0, "connection_refused", str(e))
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, ConnectionResetError) as e:
        return _fail(rec, t0, "disconnected", str(e) or type(e).__name__)
    except TimeoutError:
        return _fail(rec, t0, "timeout", f"no complete answer within {target.timeout_s:g} s")
    except (aiohttp.ClientError, asyncio.IncompleteReadError) as e:
        return _fail(rec, t0, "client_error", f"{type(e).__name__}: {e}")
    except _BadStream as e:
        return _fail(rec, t0, e.error_class, str(e))
    rec.end_s = time.perf_counter() - t0
    if not rec.chunk_s:
        return _fail(rec, t0, "bad_stream", "the stream ended without output text")
    return rec


class _BadStream(Exception):
    def __init__(self, message: str, error_class: str = "bad_stream") -> None:
        super().__init__(message)
        self.error_class = error_class


async def _read_stream(resp: aiohttp.ClientResponse, rec: RequestRecord, t0: float) -> None:
    done = False
    async for raw in resp.content:
        now = time.perf_counter() - t0
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            break
        try:
            obj = json.loads(data)
        except ValueError:
            raise _BadStream(f"a chunk is not JSON: {data[:80]!r}") from None
        if not isinstance(obj, dict):
            raise _BadStream("a chunk is not a JSON object")
        if obj.get("error"):
            raise _BadStream(f"server error in stream: {str(obj['error'])[:200]}")
        if chunk_text(obj):
            rec.chunk_s.append(now)
        usage = obj.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
            rec.output_tokens = int(usage["completion_tokens"])
            rec.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    if not done and rec.output_tokens is None:
        raise _BadStream("the stream ended before [DONE] and without usage", "disconnected")


def _fail(rec: RequestRecord, t0: float, error_class: str, message: str) -> RequestRecord:
    rec.end_s = time.perf_counter() - t0
    rec.status, rec.error_class, rec.message = "error", error_class, message[:300]
    return rec
