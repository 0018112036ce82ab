"""``gpumatch serve --tiny`` over real HTTP on loopback, the parts vLLM users rely on: stop strings and stop ids
(streamed and whole), logprobs and echo, vLLM-shaped 400s, /version /tokenize /detokenize /v1/models/{id}, JSON
404/405, a client that leaves mid-stream (no traceback, slot freed), and the ``vllm:*`` metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("torch")
aiohttp = pytest.importorskip("aiohttp")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from gpumatch.bench.server.metrics import REQUEST_BUCKETS_S, TOKEN_BUCKETS_S, TTFT_BUCKETS_S  # noqa: E402
from gpumatch.lab.serve import ServeOptions, ServerThread  # noqa: E402

MAX_LEN = 256


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(ServeOptions(tiny=True, port=0, max_num_seqs=4, max_model_len=MAX_LEN,
                                   max_num_batched_tokens=64)) as s:
        yield s


def _call(server: ServerThread, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Any:
    """One request; (status, JSON body or text)."""
    async def main() -> tuple[int, Any]:
        async with aiohttp.ClientSession() as sess, sess.request(
                method, server.url + path, json=body if raw is None else None, data=raw) as r:
            is_json = r.headers.get("Content-Type", "").startswith("application/json")
            return r.status, await (r.json() if is_json else r.text())
    return asyncio.run(main())


def _post(server: ServerThread, path: str, body: Any) -> Any:
    status, got = _call(server, "POST", path, body)
    assert status == 200, got
    return got


def _stream(server: ServerThread, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        chunks = []
        async with aiohttp.ClientSession() as sess, sess.post(server.url + path, json={**body, "stream": True}) as r:
            async for raw in r.content:
                line = raw.decode().strip()
                if line and line != "data: [DONE]":
                    chunks.append(json.loads(line.removeprefix("data: ")))
        return chunks
    return asyncio.run(main())


def _metrics(server: ServerThread) -> dict[str, Any]:
    _, text = _call(server, "GET", "/metrics")
    return {f.name: f for f in text_string_to_metric_families(text)}


def _running_drops_to_zero(server: ServerThread) -> bool:
    """Whether ``vllm:num_requests_running`` reaches 0 within 4 s (aborts reach the engine thread asynchronously)."""
    for _ in range(200):
        if _metrics(server)["vllm:num_requests_running"].samples[0].value == 0:
            return True
        time.sleep(0.02)
    return False


PROMPT = "the quick brown fox jumps"


def test_stop_strings_cut_the_output_streamed_and_whole(server: ServerThread) -> None:
    full = _post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 10, "ignore_eos": True})
    text = full["choices"][0]["text"]
    words = text.split()
    stop = f"{words[4][-2:]} {words[5][:3]}"  # spans two tokens' texts
    want = text[:text.find(stop)]
    body = {"prompt": PROMPT, "max_tokens": 10, "stop": [stop, "never-there"], "ignore_eos": True}
    whole = _post(server, "/v1/completions", body)
    c = whole["choices"][0]
    assert (c["text"], c["finish_reason"], c["stop_reason"]) == (want, "stop", stop)
    assert whole["usage"]["completion_tokens"] == 6  # generation ended at the token that completed the match
    chunks = _stream(server, "/v1/completions", {**body, "stop": stop})
    assert "".join(ch["choices"][0]["text"] for ch in chunks) == want
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["choices"][0]["stop_reason"] == stop
    chat = _stream(server, "/v1/chat/completions", {"messages": [{"role": "user", "content": PROMPT}],
                                                    "max_tokens": 10, "stop": " "})
    assert "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chat) == ""
    assert chat[-1]["choices"][0]["finish_reason"] == "stop"  # every token's text starts with a space
    assert _running_drops_to_zero(server)


def test_stop_token_ids_end_before_the_tokens_text(server: ServerThread) -> None:
    ids = _post(server, "/tokenize", {"prompt": PROMPT})["tokens"]
    full = _post(server, "/v1/completions", {"prompt": ids, "max_tokens": 8, "logprobs": 0})
    out_ids = [int(t.strip()[1:]) for t in full["choices"][0]["logprobs"]["tokens"]]
    stop_id = out_ids[3]
    k = out_ids.index(stop_id)
    got = _post(server, "/v1/completions", {"prompt": ids, "max_tokens": 8, "stop_token_ids": [stop_id]})
    c = got["choices"][0]
    assert c["finish_reason"] == "stop" and c["stop_reason"] == stop_id
    assert c["text"] == "".join(f" t{i}" for i in out_ids[:k]) and got["usage"]["completion_tokens"] == k + 1
    late = _post(server, "/v1/completions", {"prompt": ids, "max_tokens": 8, "stop_token_ids": [stop_id],
                                             "min_tokens": 8})
    assert late["choices"][0]["finish_reason"] == "length"


def test_completion_logprobs_and_echo(server: ServerThread) -> None:
    got = _post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 5, "logprobs": 3})
    c = got["choices"][0]
    lp = c["logprobs"]
    assert lp["tokens"] == [f" {w}" for w in c["text"].split()] and len(lp["token_logprobs"]) == 5
    assert lp["text_offset"] == [c["text"].index(t, o) for t, o in zip(lp["tokens"], lp["text_offset"], strict=True)]
    for tok, v, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True):
        assert v <= 0 and 1 <= len(top) <= 4 and top[tok] == v == max(top.values())  # greedy takes the top
    echo = _post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 5, "logprobs": 2, "echo": True})
    e = echo["choices"][0]
    assert e["text"] == PROMPT + c["text"]
    assert e["logprobs"]["tokens"][:6] == ["the", " quick", " brown", " fox", " jumps", lp["tokens"][0]]
    assert e["logprobs"]["token_logprobs"][0] is None and e["logprobs"]["top_logprobs"][0] is None
    assert all(v <= 0 for v in e["logprobs"]["token_logprobs"][1:])
    assert e["logprobs"]["token_logprobs"][5:] == pytest.approx(lp["token_logprobs"], abs=1e-4)
    assert e["logprobs"]["text_offset"][:3] == [0, 3, 9]
    streamed = _stream(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 5, "echo": True, "logprobs": 1})
    assert "".join(ch["choices"][0]["text"] for ch in streamed) == e["text"]
    assert sum(len(ch["choices"][0]["logprobs"]["tokens"]) for ch in streamed) == 10


def test_chat_logprobs(server: ServerThread) -> None:
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 4, "logprobs": True,
            "top_logprobs": 2}
    c = _post(server, "/v1/chat/completions", body)["choices"][0]
    content = c["logprobs"]["content"]
    assert "".join(x["token"] for x in content) == c["message"]["content"] and len(content) == 4
    assert all(len(x["top_logprobs"]) == 2 and x["top_logprobs"][0]["logprob"] == x["logprob"] for x in content)
    assert content[0]["bytes"] == list(content[0]["token"].encode())
    chunks = _stream(server, "/v1/chat/completions", body)
    assert sum(len((ch["choices"][0]["logprobs"] or {"content": []})["content"]) for ch in chunks) == 4


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"temperature": -0.5}, "temperature", "non-negative"),
    ({"temperature": "hot"}, "temperature", "number"),
    ({"top_p": 0}, "top_p", "(0, 1]"),
    ({"top_p": 1.5}, "top_p", "(0, 1]"),
    ({"max_tokens": 0}, "max_tokens", "at least 1"),
    ({"max_tokens": 4, "min_tokens": 5}, "min_tokens", "less than or equal to max_tokens"),
    ({"n": 3}, "n", "n must be 1"),
    ({"max_tokens": MAX_LEN}, "max_tokens", f"maximum context length is {MAX_LEN} tokens"),
    ({"prompt": " ".join(["w"] * MAX_LEN)}, "prompt", f"maximum context length is {MAX_LEN} tokens"),
    ({"logprobs": 21}, "logprobs", "greater than max allowed: 20"),
    ({"stop": [""]}, "stop", "empty string"),
    ({"stop": 3}, "stop", "list of strings"),
    ({"stop_token_ids": [-1]}, "stop_token_ids", "not an integer"),
    ({"stream_options": {"include_usage": True}}, "stream_options", "stream=True"),
    ({"prompt": ["a", "b"]}, "prompt", "one prompt per request"),
    ({"echo": 1}, "echo", "true or false"),
])
def test_bad_parameters_get_vllm_400s(server: ServerThread, body: dict[str, Any], param: str, words: str) -> None:
    status, err = _call(server, "POST", "/v1/completions", {"prompt": "a b", **body})
    assert status == 400 and err["error"]["param"] == param and words in err["error"]["message"], err
    assert err["error"]["type"] == "BadRequestError" and err["error"]["code"] == 400


def test_chat_specific_400s_bad_json_and_unknown_model(server: ServerThread) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    status, err = _call(server, "POST", "/v1/chat/completions", {"messages": msgs, "top_logprobs": 2})
    assert status == 400 and err["error"]["param"] == "top_logprobs"
    status, err = _call(server, "POST", "/v1/completions", raw=b'{"prompt": ')
    assert status == 400 and "not valid JSON" in err["error"]["message"]
    status, err = _call(server, "POST", "/v1/chat/completions", {"messages": msgs, "model": "gpt-4"})
    assert status == 404 and err["error"] == {"message": "The model `gpt-4` does not exist.", "type": "NotFoundError",
                                              "param": "model", "code": 404}


def test_endpoints_vllm_clients_call(server: ServerThread) -> None:
    import gpumatch

    assert _call(server, "GET", "/version") == (200, {"version": gpumatch.__version__})
    tok = _post(server, "/tokenize", {"prompt": "a b c", "return_token_strs": True})
    assert tok["count"] == 3 and tok["max_model_len"] == MAX_LEN and len(tok["token_strs"]) == 3
    assert _post(server, "/tokenize", {"messages": [{"role": "user", "content": "a b"}]})["count"] == 3
    assert _post(server, "/detokenize", {"tokens": [5, 7]}) == {"prompt": " t5 t7"}
    card = _call(server, "GET", "/v1/models/tiny")[1]
    assert card["id"] == card["root"] == "tiny" and card["parent"] is None and card["max_model_len"] == MAX_LEN
    assert card["permission"][0]["object"] == "model_permission"
    assert _call(server, "GET", "/v1/models")[1]["data"][0]["owned_by"] == card["owned_by"]
    status, err = _call(server, "GET", "/v1/models/other")
    assert status == 404 and err["error"]["type"] == "NotFoundError"
    status, err = _call(server, "GET", "/no/such/path")
    assert status == 404 and err["error"]["code"] == 404 and "/no/such/path" in err["error"]["message"]
    status, err = _call(server, "GET", "/v1/completions")
    assert status == 405 and err["error"]["type"] == "MethodNotAllowedError"
    assert _call(server, "GET", "/ping")[0] == _call(server, "POST", "/ping")[0] == 200
    status, err = _call(server, "POST", "/detokenize", {"tokens": [10**9]})
    assert status == 400 and err["error"]["param"] == "tokens"


def test_a_client_leaving_mid_stream_is_quiet_and_frees_its_slot(server: ServerThread,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    async def leave() -> int:
        got = 0
        async with aiohttp.ClientSession() as sess:
            r = await sess.post(server.url + "/v1/completions",
                                json={"prompt": PROMPT, "max_tokens": 200, "ignore_eos": True, "stream": True})
            async for raw in r.content:
                got += raw.startswith(b"data: ")
                if got == 3:
                    break
            r.close()  # drop the connection mid-stream
        return got

    before = _metrics(server)["vllm:request_success"]
    assert asyncio.run(leave()) == 3
    assert _running_drops_to_zero(server)
    m = _metrics(server)
    aborted = {s.labels["finished_reason"]: s.value for s in m["vllm:request_success"].samples
               if s.name.endswith("_total")}
    was = {s.labels["finished_reason"]: s.value for s in before.samples if s.name.endswith("_total")}
    assert aborted["abort"] == was["abort"] + 1
    again = _post(server, "/v1/completions", {"prompt": "still here", "max_tokens": 2})
    assert again["usage"]["completion_tokens"] == 2
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert loud == [], [r.getMessage() for r in loud]


def test_a_client_leaving_a_whole_response_aborts_it(server: ServerThread) -> None:
    async def leave() -> None:
        """Send a long non-streaming request and leave as soon as the server runs it (not after a fixed time: a
        fast CPU finished the whole response inside a 0.2 s client timeout once in CI)."""
        async with aiohttp.ClientSession() as sess:
            sent = asyncio.create_task(sess.post(server.url + "/v1/completions",
                                                 json={"prompt": "a", "max_tokens": MAX_LEN - 1, "ignore_eos": True}))
            for _ in range(2000):
                await asyncio.sleep(0.001)
                async with sess.get(server.url + "/metrics") as r:
                    fams = {f.name: f for f in text_string_to_metric_families(await r.text())}
                if fams["vllm:num_requests_running"].samples[0].value >= 1:
                    break
            assert not sent.done(), "the response came back before the client could leave"
            sent.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sent

    def aborts() -> float:
        fam = _metrics(server)["vllm:request_success"]
        return next(s.value for s in fam.samples
                    if s.labels["finished_reason"] == "abort" and s.name.endswith("_total"))

    was = aborts()
    asyncio.run(leave())
    assert _running_drops_to_zero(server) and aborts() == was + 1


def _hist(fam: Any) -> tuple[list[float], float]:
    edges = [float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket")]
    count = next(s.value for s in fam.samples if s.name.endswith("_count"))
    return edges, count


def test_vllm_metrics_names_labels_and_buckets(server: ServerThread) -> None:
    before = _metrics(server)
    for i in range(3):
        _post(server, "/v1/completions", {"prompt": f"req {i}", "max_tokens": 4, "ignore_eos": True})
    after = _metrics(server)
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:gpu_cache_usage_perc", "vllm:prompt_tokens", "vllm:generation_tokens",
                 "vllm:request_success", "vllm:num_preemptions"):
        for s in after[name].samples:
            assert s.labels["model_name"] == "tiny" and s.labels["engine"] == "0", (name, s)
    edges = {"vllm:time_to_first_token_seconds": TTFT_BUCKETS_S, "vllm:inter_token_latency_seconds": TOKEN_BUCKETS_S,
             "vllm:time_per_output_token_seconds": TOKEN_BUCKETS_S}
    edges |= {f"vllm:{n}": REQUEST_BUCKETS_S for n in ("e2e_request_latency_seconds", "request_queue_time_seconds",
                                                        "request_prefill_time_seconds", "request_decode_time_seconds",
                                                        "request_inference_time_seconds")}
    per_request = {"vllm:inter_token_latency_seconds": 3, "vllm:time_per_output_token_seconds": 3}
    for name, want in edges.items():
        got, count = _hist(after[name])
        assert got == [*want, float("inf")], name
        assert count - _hist(before[name])[1] == 3 * per_request.get(name, 1), name
    assert TTFT_BUCKETS_S[0] == 0.001 and REQUEST_BUCKETS_S[-1] == 7680.0  # vLLM's edges, spot-checked

    def total(fam: str, **labels: str) -> float:
        return sum(s.value for s in after[fam].samples if s.name.endswith("_total")
                   and all(s.labels.get(k) == v for k, v in labels.items())) - sum(
            s.value for s in before[fam].samples if s.name.endswith("_total")
            and all(s.labels.get(k) == v for k, v in labels.items()))

    assert total("vllm:request_success", finished_reason="length") == 3
    assert total("vllm:generation_tokens") == 12 and total("vllm:prompt_tokens") == 6
    assert total("gpumatch_generation_tokens") == 12  # the server's own family is still there
