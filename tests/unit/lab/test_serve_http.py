"""``gpumatch serve`` over real HTTP on loopback (tiny model, CPU): streaming and whole responses, exact token
counts and usage, continuous batching (arrivals admitted mid-flight, mixed passes), admission waiting for a slot,
Prometheus text, vLLM-shaped errors, the non-loopback warning."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")
aiohttp = pytest.importorskip("aiohttp")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from gpumatch.errors import InputError  # noqa: E402
from gpumatch.lab.serve import ServeOptions, ServerThread, check_options  # noqa: E402

BUDGET = 8


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    opts = ServeOptions(tiny=True, port=0, max_num_seqs=3, max_model_len=1024, max_num_batched_tokens=BUDGET)
    with ServerThread(opts) as s:
        yield s


async def _stream(session: Any, url: str, body: dict[str, Any], chat: bool = False) -> dict[str, Any]:
    """Send one streaming request; the text pieces, finish reasons, usage and whether [DONE] came."""
    got: dict[str, Any] = {"pieces": [], "finish": [], "usage": None, "done": False, "roles": 0}
    path = "/v1/chat/completions" if chat else "/v1/completions"
    async with session.post(url + path, json={**body, "stream": True}) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        async for raw in r.content:
            line = raw.decode().strip()
            if not line:
                continue
            assert line.startswith("data: ")
            if line == "data: [DONE]":
                got["done"] = True
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                assert d["choices"] == []
                got["usage"] = d["usage"]
                continue
            c = d["choices"][0]
            text = c["delta"].get("content") if chat else c["text"]
            got["roles"] += int(chat and c["delta"].get("role") == "assistant")
            if text:
                got["pieces"].append(text)
            if c["finish_reason"]:
                got["finish"].append(c["finish_reason"])
    return got


def _metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name + ("{" + ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) + "}" if s.labels else "")
            out[key] = s.value
    return out


def test_concurrent_streams_get_exact_counts_and_usage(server: ServerThread) -> None:
    async def main() -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as sess:
            jobs = [_stream(sess, server.url, {"prompt": " ".join(f"w{j}" for j in range(3 + i)), "max_tokens": 4 + i,
                                               "ignore_eos": True, "stream_options": {"include_usage": True}})
                    for i in range(7)]
            return await asyncio.gather(*jobs)

    for i, got in enumerate(asyncio.run(main())):
        assert len(got["pieces"]) == 4 + i and "".join(got["pieces"]).split() == [p.strip() for p in got["pieces"]]
        assert got["usage"] == {"prompt_tokens": 3 + i, "completion_tokens": 4 + i, "total_tokens": 7 + 2 * i}
        assert got["finish"] == ["length"] and got["done"]


def test_chat_stream_and_whole_responses(server: ServerThread) -> None:
    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with aiohttp.ClientSession() as sess:
            chat = await _stream(sess, server.url, {"messages": [{"role": "user", "content": "hello there"}],
                                                    "max_completion_tokens": 5,
                                                    "stream_options": {"include_usage": True}}, chat=True)
            async with sess.post(server.url + "/v1/completions", json={"prompt": [1, 2, 3, 4], "max_tokens": 6}) as r:
                whole = await r.json()
            async with sess.post(server.url + "/v1/chat/completions",
                                 json={"messages": [{"role": "user", "content": [{"type": "text", "text": "a b"}]}],
                                       "max_tokens": 2}) as r:
                whole_chat = await r.json()
            async with sess.get(server.url + "/v1/models") as r:
                models = await r.json()
            return chat, whole, whole_chat, models

    chat, whole, whole_chat, models = asyncio.run(main())
    assert chat["roles"] == 1 and len(chat["pieces"]) == 5 and chat["usage"]["prompt_tokens"] == 3  # "user:", 2 words
    assert whole["usage"] == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}
    assert len(whole["choices"][0]["text"].split()) == 6 and whole["choices"][0]["finish_reason"] == "length"
    assert whole_chat["choices"][0]["message"]["role"] == "assistant"
    assert whole_chat["usage"]["completion_tokens"] == 2 and whole_chat["usage"]["prompt_tokens"] == 3
    assert models["data"][0]["id"] == "tiny"


def test_arrivals_join_running_decodes_and_wait_for_slots(server: ServerThread) -> None:
    """Three slots: two long requests run; a third arrives mid-flight and is prefilled in chunks beside their
    decodes (mixed passes); two more find the slots full and wait (the waiting gauge), then complete."""

    async def main() -> tuple[list[dict[str, Any]], float, list[dict[str, Any]]]:
        async with aiohttp.ClientSession() as sess:
            async with sess.get(server.url + "/gpumatch/iterations") as r:
                before = len((await r.json())["iterations"])
            body = {"prompt": "a b c", "max_tokens": 700, "ignore_eos": True}
            long_ = [asyncio.create_task(_stream(sess, server.url, body)) for _ in range(2)]
            await _until(sess, server.url, lambda m: m["gpumatch_num_requests_running"] >= 2)
            late = [asyncio.create_task(_stream(sess, server.url, {"prompt": " ".join(["x"] * 20), "max_tokens": 3}))
                    for _ in range(3)]
            waiting = await _until(sess, server.url, lambda m: m["gpumatch_num_requests_waiting"] >= 1)
            results = await asyncio.gather(*long_, *late)
            async with sess.get(server.url + "/gpumatch/iterations") as r:
                log = (await r.json())["iterations"][before:]
            return results, waiting["gpumatch_num_requests_waiting"], log

    results, waiting, log = asyncio.run(main())
    assert waiting >= 1
    assert [len(r["pieces"]) for r in results] == [700, 700, 3, 3, 3]
    mixed = [i for i in log if i["kind"] == "mixed"]
    assert mixed and all(i["decode_rows"] + i["prefill_tokens"] <= BUDGET for i in log)
    assert any(i["decode_rows"] == 2 and i["prefill_tokens"] == BUDGET - 2 for i in mixed)  # a 20-word prompt chunked
    # the log tells passes apart and places them in time: numbered in order, each starting after the one before ends
    assert [i["index"] for i in log] == list(range(log[0]["index"], log[0]["index"] + len(log)))
    assert all(b["start_s"] >= a["start_s"] + a["seconds"] for a, b in itertools.pairwise(log))
    assert all(i["schedule_s"] >= 0.0 for i in log)
    # and says what the runner ran: decode rows padded to a batch bucket, keys read up to a context bucket
    decoding = [i for i in log if i["decode_rows"] > 0]
    assert all(i["span"] >= i["decode_rows"] and i["context"] >= 1 for i in decoding)
    assert all(i["decode_rows"] <= i["attended"] <= i["decode_rows"] * i["context"] for i in decoding)
    assert all(sum(t for _, t in i["chunk_spans"]) == i["prefill_tokens"] == 0 for i in log if i["kind"] == "decode")
    assert all(sum(t for _, t in i["chunk_spans"]) == i["prefill_tokens"] > 0 for i in mixed)
    assert not any(i["graph"] for i in log)  # a CPU runner replays no graph


async def _until(sess: Any, url: str, cond: Any, tries: int = 400) -> dict[str, float]:
    for _ in range(tries):
        async with sess.get(url + "/metrics") as r:
            m = _metrics(await r.text())
        if cond(m):
            return m
        await asyncio.sleep(0.005)
    raise AssertionError(f"condition never held; last metrics {m}")


def test_metrics_parse_and_count(server: ServerThread) -> None:
    async def main() -> str:
        async with aiohttp.ClientSession() as sess:
            await _stream(sess, server.url, {"prompt": "one two", "max_tokens": 3})
            async with sess.get(server.url + "/metrics") as r:
                assert r.headers["Content-Type"].startswith("text/plain")
                return await r.text()

    m = _metrics(asyncio.run(main()))
    assert m["gpumatch_kv_cache_slots"] == 3 and 0 <= m["gpumatch_kv_cache_usage_perc"] <= 1
    assert m["gpumatch_generation_tokens_total"] >= 3 and m["gpumatch_prompt_tokens_total"] >= 2
    assert m["gpumatch_iterations_total{kind=prefill}"] >= 1 and m["gpumatch_iteration_seconds_count"] >= 3
    assert m["gpumatch_requests_finished_total{reason=length}"] >= 1


@pytest.mark.parametrize(("path", "body", "status", "param"), [
    ("/v1/completions", {"prompt": 5}, 400, "prompt"),
    ("/v1/completions", {"prompt": "a", "max_tokens": "many"}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "a b", "max_tokens": 1023}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": [1, 99999]}, 400, "prompt"),
    ("/v1/completions", {"prompt": "a", "n": 2}, 400, "n"),
    ("/v1/completions", {"prompt": "a", "stream": "yes"}, 400, "stream"),
    ("/v1/completions", {"prompt": "a", "model": "gpt-4"}, 404, "model"),
    ("/v1/chat/completions", {"messages": []}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [{"content": "x"}]}, 400, "messages"),
    ("/v1/completions", [1, 2], 400, None),
])
def test_bad_bodies_get_openai_errors(server: ServerThread, path: str, body: Any, status: int,
                                      param: str | None) -> None:
    async def main() -> tuple[int, dict[str, Any]]:
        async with aiohttp.ClientSession() as sess, sess.post(server.url + path, json=body) as r:
            return r.status, await r.json()

    got, err = asyncio.run(main())
    kind = {400: "BadRequestError", 404: "NotFoundError"}[status]
    assert got == status and err["error"]["type"] == kind and err["error"]["param"] == param
    assert err["error"]["code"] == status and err["error"]["message"]


def test_invalid_json_health_and_no_telemetry_on_cpu(server: ServerThread) -> None:
    async def main() -> tuple[int, int, dict[str, Any], int]:
        async with aiohttp.ClientSession() as sess:
            async with sess.post(server.url + "/v1/completions", data=b"{not json") as r:
                bad = r.status
            async with sess.get(server.url + "/health") as r:
                health = r.status
            async with sess.get(server.url + "/gpumatch/telemetry?since=0") as r:
                tele = await r.json()
            async with sess.get(server.url + "/gpumatch/telemetry?since=soon") as r:
                bad_since = r.status
            return bad, health, tele, bad_since

    bad, health, tele, bad_since = asyncio.run(main())
    assert (bad, health, bad_since) == (400, 200, 400)
    assert tele["available"] is False and server.listening is not None
    assert server.listening.telemetry == "the server runs on a CPU" and server.listening.idle_power_w is None


def test_loopback_by_default_and_a_warning_otherwise() -> None:
    assert check_options(ServeOptions()) == [] and check_options(ServeOptions(host="::1")) == []
    assert check_options(ServeOptions(host="localhost")) == []
    with ServerThread(ServeOptions(tiny=True, host="0.0.0.0", port=0, max_num_seqs=1, max_model_len=16)) as s:
        assert s.listening is not None and "not loopback" in s.listening.warnings[0]
        assert s.listening.port > 0


@pytest.mark.parametrize("opts", [ServeOptions(max_num_seqs=0), ServeOptions(port=70000), ServeOptions(dtype="int3"),
                                  ServeOptions(model="llama-3.1-8b", tiny=True), ServeOptions(idle_s=-1),
                                  ServeOptions(device="tpu")])
def test_bad_options_are_input_errors(opts: ServeOptions) -> None:
    with pytest.raises(InputError):
        check_options(opts)


def test_a_model_too_big_for_this_cpu_is_refused_before_it_is_built() -> None:
    from gpumatch.lab.serve import build

    with pytest.raises(InputError, match="RAM"):
        build(ServeOptions(model="llama-3.1-405b", device="cpu"))  # 1.6 TB of fp32 weights


def test_an_empty_prompt_is_a_400(server: ServerThread) -> None:
    async def main() -> tuple[int, dict[str, Any]]:
        async with aiohttp.ClientSession() as sess, sess.post(server.url + "/v1/completions",
                                                              json={"prompt": "   "}) as r:
            return r.status, await r.json()

    status, err = asyncio.run(main())
    assert status == 400 and err["error"]["param"] == "prompt"
