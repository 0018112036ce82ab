"""The official ``openai`` Python client against ``gpumatch serve --tiny`` (real HTTP on loopback, CPU):
completions, chat, streaming, stop, logprobs, echo, models.list / retrieve, and a 400 and a 404 raised as the
client's own exception types."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("torch")
pytest.importorskip("aiohttp")
openai = pytest.importorskip("openai")

from gpumatch.lab.serve import ServeOptions, ServerThread  # noqa: E402

PROMPT = "one two three four"


@pytest.fixture(scope="module")
def client() -> Iterator[openai.OpenAI]:
    with ServerThread(ServeOptions(tiny=True, port=0, max_num_seqs=2, max_model_len=128,
                                   max_num_batched_tokens=32)) as s:
        yield openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_completions_whole_streamed_stop_logprobs_echo(client: openai.OpenAI) -> None:
    whole = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=6,
                                      extra_body={"ignore_eos": True})
    text = whole.choices[0].text
    assert whole.usage is not None and whole.usage.completion_tokens == 6 and len(text.split()) == 6
    stream = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=6, stream=True,
                                       stream_options={"include_usage": True})
    pieces, usage = [], None
    for ch in stream:
        pieces += [c.text for c in ch.choices]
        usage = ch.usage or usage
    assert "".join(pieces) == text and usage is not None and usage.total_tokens == 10
    stop = text.split()[2]
    cut = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=6, stop=[stop])
    assert cut.choices[0].text == text[:text.find(stop)] and cut.choices[0].finish_reason == "stop"
    lp = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3, logprobs=2, echo=True)
    c = lp.choices[0]
    assert c.text.startswith(PROMPT) and c.logprobs is not None and c.logprobs.token_logprobs is not None
    assert c.logprobs.token_logprobs[0] is None and len(c.logprobs.token_logprobs) == 4 + 3
    assert c.logprobs.tokens is not None and c.logprobs.tokens[:2] == ["one", " two"]


def test_chat_whole_and_streamed_with_logprobs(client: openai.OpenAI) -> None:
    msgs = [{"role": "user", "content": PROMPT}]
    whole = client.chat.completions.create(model="tiny", messages=msgs, max_completion_tokens=4,  # type: ignore[arg-type]
                                           logprobs=True, top_logprobs=3)
    c = whole.choices[0]
    assert c.message.role == "assistant" and c.message.content is not None and c.finish_reason == "length"
    assert c.logprobs is not None and c.logprobs.content is not None and len(c.logprobs.content) == 4
    assert all(len(t.top_logprobs) == 3 for t in c.logprobs.content)
    text = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
        model="tiny", messages=msgs, max_tokens=4, stream=True) if ch.choices)  # type: ignore[arg-type]
    assert text == c.message.content


def test_models_and_errors_as_the_clients_exceptions(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["tiny"]
    card = client.models.retrieve("tiny")
    assert card.id == "tiny" and card.owned_by == "gpumatch"
    with pytest.raises(openai.BadRequestError) as bad:
        client.completions.create(model="tiny", prompt=PROMPT, temperature=-1)
    assert bad.value.status_code == 400 and "temperature" in bad.value.message
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt=PROMPT)
