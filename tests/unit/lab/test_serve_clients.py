"""What real load generators (GuideLLM 0.8.1, AIPerf 0.13.0) send to ``gpumatch serve`` and need back, over real
HTTP on loopback against ``--tiny``: each case is a request shape one of them sends (read from their source and
from their run against the server, tests/data/clients/README.md), checked against vLLM's behaviour."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")
aiohttp = pytest.importorskip("aiohttp")

from gpumatch.lab.serve import ServeOptions, ServerThread  # noqa: E402


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(ServeOptions(tiny=True, port=0, max_num_seqs=4, max_model_len=256,
                                   max_num_batched_tokens=64)) as s:
        yield s


def _stream(server: ServerThread, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON chunks of one streamed request (``[DONE]`` left out)."""
    async def main() -> list[dict[str, Any]]:
        chunks = []
        async with aiohttp.ClientSession() as sess, sess.post(server.url + path, json={**body, "stream": True}) as r:
            assert r.status == 200, await r.text()
            async for raw in r.content:
                line = raw.decode().strip()
                if line and line != "data: [DONE]":
                    chunks.append(json.loads(line.removeprefix("data: ")))
        return chunks
    return asyncio.run(main())


GUIDELLM_CHAT = {"stream_options": {"include_usage": True, "continuous_usage_stats": True},
                 "max_completion_tokens": 5, "ignore_eos": True,
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "a b c"}]}]}
"""GuideLLM 0.8.1's chat body (its openai_http backend, as it logged it), less ``model`` and ``stream``."""


def test_continuous_usage_stats_puts_the_usage_so_far_on_every_chunk(server: ServerThread) -> None:
    """vLLM (``serving_chat.py`` / ``serving_completion.py``, ``should_include_usage``): with
    ``include_usage`` and ``continuous_usage_stats`` every chunk with a choice carries ``usage`` (the role chunk
    0 completion tokens, then the tokens so far), and the last chunk is the usage-only one."""
    chunks = _stream(server, "/v1/chat/completions", GUIDELLM_CHAT)
    with_choice = [c for c in chunks if c["choices"]]
    assert [c["usage"]["completion_tokens"] for c in with_choice] == [0, 1, 2, 3, 4, 5]
    prompt = chunks[-1]["usage"]["prompt_tokens"]
    assert all(c["usage"]["prompt_tokens"] == prompt and c["usage"]["total_tokens"] == prompt
               + c["usage"]["completion_tokens"] for c in with_choice)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5


def test_continuous_usage_stats_for_completions(server: ServerThread) -> None:
    body = {"prompt": "a b c", "max_tokens": 3, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    chunks = _stream(server, "/v1/completions", body)
    assert [c["usage"]["completion_tokens"] for c in chunks if c["choices"]] == [1, 2, 3]
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


def test_continuous_usage_stats_without_include_usage_adds_nothing(server: ServerThread) -> None:
    """vLLM: continuous usage only together with ``include_usage``."""
    body = {**GUIDELLM_CHAT, "stream_options": {"continuous_usage_stats": True}}
    chunks = _stream(server, "/v1/chat/completions", body)
    assert all("usage" not in c for c in chunks)
