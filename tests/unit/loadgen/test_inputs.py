"""What ``gpumatch bench serve`` sends, without a server: prompts of an exact token count with a tokenizer trained
here on the fly (``tokenizers``, saved to a tmp tokenizer.json), ShareGPT and JSONL datasets read with bounds and
sampled with a seed, gamma arrivals (burstiness) checked statistically, the warm-up rule, requests in flight from
send/end times, the usage check's warnings, and the parsing of --extra-body and --header."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tokenizers")

from gpumatch.errors import GpumatchError, InputError
from gpumatch.loadgen import datasets
from gpumatch.loadgen.client import parse_extra_body, parse_headers
from gpumatch.loadgen.datasets import load_dataset
from gpumatch.loadgen.inputs import warmup_count
from gpumatch.loadgen.metrics import RequestRecord, in_flight, summarize
from gpumatch.loadgen.runner import Level
from gpumatch.loadgen.tokens import load_tokenizer
from gpumatch.loadgen.usage import prompt_mismatch, run_warnings, usage_summary
from gpumatch.loadgen.workload import WORDS, arrivals, synthetic

SENTENCES = [" ".join(WORDS[i:i + 12]) for i in range(0, len(WORDS), 3)] + ["L0-1 W2-3 the water of the world"]


def train_bpe(path: Path, vocab_size: int) -> Path:
    """A byte-level BPE tokenizer (as GPT/Llama 3 use) trained on a few sentences; a small vocabulary splits most
    words into several tokens, a larger one keeps them whole."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(SENTENCES, trainer)
    tok.save(str(path))
    return path


def train_wordlevel(path: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=["[UNK]"], show_progress=False))
    tok.save(str(path))
    return path


@pytest.mark.parametrize("kind", ["bpe-small", "bpe-large", "wordlevel"])
def test_prompts_have_the_exact_token_count(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "tokenizer.json"
    if kind == "wordlevel":
        train_wordlevel(path)
    else:
        train_bpe(path, 300 if kind == "bpe-small" else 2000)
    counter = load_tokenizer(tmp_path)  # a folder holding tokenizer.json
    for n in (1, 2, 3, 7, 64, 333):
        specs = synthetic(4, n, 4, 1.0, (5, n), tag="L0-", counter=counter)
        assert [s.prompt_tokens for s in specs] == [n] * 4, (kind, n)
        assert [counter.count(s.prompt) for s in specs] == [n] * 4
        if n >= 7:  # the tag "L0-<i>" fits: no two prompts alike (shorter ones are the tag cut short)
            assert len({s.prompt for s in specs}) == 4
    ranged = synthetic(20, 100, 8, 0.5, 1, counter=counter)
    assert all(50 <= s.prompt_tokens <= 100 and counter.count(s.prompt) == s.prompt_tokens for s in ranged)


def test_small_vocabulary_splits_words_so_word_counts_are_wrong(tmp_path: Path) -> None:
    counter = load_tokenizer(train_bpe(tmp_path / "t.json", 300))
    spec = synthetic(1, 64, 4, 1.0, 0)[0]  # no tokenizer: 64 words
    assert len(spec.prompt.split()) == 64 and counter.count(spec.prompt) > 1.5 * 64


def test_tokenizer_errors_are_one_line_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no tokenizer\.json at"):
        load_tokenizer(tmp_path)
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(InputError, match="is not a tokenizers file"):
        load_tokenizer(bad)


def _sharegpt(path: Path, entries: list[object]) -> Path:
    path.write_text(json.dumps(entries))
    return path


def _conv(human: str, gpt: str, first: str = "human") -> dict[str, object]:
    return {"conversations": [{"from": first, "value": human}, {"from": "gpt", "value": gpt}]}


def test_sharegpt_first_human_turn_and_answer_length(tmp_path: Path) -> None:
    entries: list[object] = [
        _conv("tell me about the water of the world", "the water of the world is a big thing to know about"),
        {"conversations": [{"from": "system", "value": "be short"}, {"from": "human", "value": "one two three four"},
                           {"from": "gpt", "value": "five six seven eight nine"}, {"from": "human", "value": "x"}]},
        _conv("too short", "an answer of some words"),                  # prompt under 4 tokens: skipped
        _conv("a prompt of enough words here", "no"),                   # answer under 4 tokens: skipped
        {"conversations": [{"from": "human", "value": "only a question and no answer"}]},  # no pair: skipped
        {"id": "no conversations"}, "not even an object",
    ]
    ds = load_dataset("sharegpt", _sharegpt(tmp_path / "sg.json", entries), 128)
    assert [(r.prompt, r.prompt_tokens, r.output_tokens) for r in ds.rows] == [
        ("tell me about the water of the world", 8, 12), ("one two three four", 4, 5)]
    assert ds.skipped == 5
    counter = load_tokenizer(train_bpe(tmp_path / "t.json", 300))
    tok_ds = load_dataset("sharegpt", tmp_path / "sg.json", 128, counter)
    assert tok_ds.rows[0].prompt_tokens == counter.count("tell me about the water of the world")
    assert tok_ds.rows[0].output_tokens == counter.count("the water of the world is a big thing to know about")


def test_dataset_sampling_is_seeded_and_cycles(tmp_path: Path) -> None:
    lines = [json.dumps({"prompt": f"prompt number {i}", "output_tokens": i + 1}) for i in range(10)]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n\n")
    ds = load_dataset("jsonl", tmp_path / "d.jsonl", 128)
    a, b, c = ds.sample(10, (0, 1)), ds.sample(10, (0, 1)), ds.sample(10, (0, 2))
    assert [s.prompt for s in a] == [s.prompt for s in b] != [s.prompt for s in c]
    assert sorted(s.output_tokens for s in a) == list(range(1, 11))  # without replacement: each row once
    many = ds.sample(25, 3, first_index=100)
    assert [s.index for s in many] == list(range(100, 125))
    assert all(sum(s.prompt == f"prompt number {i}" for s in many[:20]) == 2 for i in range(10))


def test_jsonl_output_tokens_optional_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "a b c", "max_tokens": 7}\n{"prompt": "d e"}\n')
    ds = load_dataset("jsonl", f, 32)
    assert [(r.prompt_tokens, r.output_tokens) for r in ds.rows] == [(3, 7), (2, 32)]
    f.write_text('{"prompt": "a"}\nnot json\n')
    with pytest.raises(InputError, match=r"d.jsonl:2: not JSON"):
        load_dataset("jsonl", f, 32)
    f.write_text('{"prompt": "a", "output_tokens": 0}\n')
    with pytest.raises(InputError, match=r"d.jsonl:1: 'output_tokens' is not a positive integer"):
        load_dataset("jsonl", f, 32)
    with pytest.raises(InputError, match="not a JSON list"):
        load_dataset("sharegpt", _sharegpt(tmp_path / "s.json", {"conversations": []}), 32)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="none of 1 conversations"):
        load_dataset("sharegpt", _sharegpt(tmp_path / "s.json", [_conv("hi", "ho")]), 32)
    with pytest.raises(InputError, match="cannot read dataset"):
        load_dataset("jsonl", tmp_path / "missing.jsonl", 32)
    with pytest.raises(InputError, match="unknown dataset format"):
        load_dataset("csv", f, 32)


def test_dataset_size_and_row_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"p {i}"}) + "\n" for i in range(50)))
    monkeypatch.setattr(datasets, "MAX_ROWS", 20)
    with pytest.raises(InputError, match="50 lines, more than 20"):
        load_dataset("jsonl", f, 8)
    monkeypatch.setattr(datasets, "MAX_DATASET_BYTES", 100)
    with pytest.raises(InputError, match=r"holds \d[\d,]* bytes, more than 100"):
        load_dataset("jsonl", f, 8)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_arrivals_have_mean_one_over_rate_and_cv_one_over_sqrt_b(burstiness: float) -> None:
    times = arrivals(40_000, 10.0, "poisson", 11, burstiness)
    gaps = np.diff(times)
    assert times[0] == 0.0 and gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.05)
    assert arrivals(50, 10.0, "poisson", 11, burstiness) == times[:50]


def test_burstiness_input_and_labels() -> None:
    with pytest.raises(InputError, match="--burstiness shapes random arrivals"):
        arrivals(3, 1.0, "constant", 0, 2.0)
    with pytest.raises(InputError, match="positive"):
        arrivals(3, 1.0, "poisson", 0, 0.0)
    assert Level(0, "rate", 4.0, burstiness=0.5).label == "4/s gamma B=0.5"
    assert Level(0, "rate", 4.0).to_dict()["burstiness"] == 1.0
    assert Level(0, "rate", 4.0, "constant").to_dict()["burstiness"] is None


def test_warmup_rule() -> None:
    closed = [warmup_count(None, Level(0, "concurrency", c), 200) for c in (1, 4, 16, 64, 256)]
    assert closed == [2, 8, 32, 64, 256]  # 2 per client up to n/4 = 50, never fewer than one per client
    assert [warmup_count(None, Level(0, "rate", r), 200) for r in (0.5, 4, 100)] == [2, 8, 50]
    assert warmup_count(0, Level(0, "concurrency", 8), 200) == 0
    assert warmup_count(5, Level(0, "rate", 8), 200) == 5


def _rec(i: int, sent: float, end: float, status: str = "ok") -> RequestRecord:
    return RequestRecord(i, sent, 4, 2, sent_s=sent, end_s=end, chunk_s=[end], status=status,
                         prompt_tokens=4, output_tokens=2)


def test_in_flight_time_weighted_mean_and_max() -> None:
    # [0, 2) [1, 3) [1, 2) [3, 4): 2 + 2 + 1 + 1 = 6 request-seconds over 4 s; at most 3 at once (t in [1, 2))
    recs = [_rec(0, 0.0, 2.0), _rec(1, 1.0, 3.0), _rec(2, 1.0, 2.0, "error"), _rec(3, 3.0, 4.0, "incomplete")]
    assert in_flight(recs, 4.0) == {"mean_in_flight_requests": 1.5, "max_in_flight_requests": 3}
    back_to_back = [_rec(0, 0.0, 1.0), _rec(1, 1.0, 2.0)]  # an end and a send at the same instant: 1, not 2
    assert in_flight(back_to_back, 2.0) == {"mean_in_flight_requests": 1.0, "max_in_flight_requests": 1}
    s = summarize(recs)
    assert (s["completed"], s["failed"], s["incomplete"], s["error_rate"]) == (2, 1, 1, pytest.approx(1 / 3))


def test_usage_check_counts_beyond_the_tolerance_and_warns_once() -> None:
    def rec(want: int, got: int) -> RequestRecord:
        return RequestRecord(0, 0.0, want, 8, 0.0, 1.0, [0.5], prompt_tokens=got, output_tokens=8)

    assert not prompt_mismatch(rec(64, 66), 2) and not prompt_mismatch(rec(64, 69), 2)  # 2 + 5 % of 64 = 5.2
    assert prompt_mismatch(rec(64, 70), 2) and prompt_mismatch(rec(64, 58), 2)
    levels = [("c=1", {**usage_summary([rec(64, 129)] * 3, 2), "completed": 3, "output_len_mismatches": 0}),
              ("c=4", {**usage_summary([rec(64, 129)] * 5, 2), "completed": 5, "output_len_mismatches": 0})]
    warnings = run_warnings(levels, None, True)
    assert warnings == ["64-token prompts arrived as 129 tokens (means; 3 of 3 requests at c=1 beyond ±2 tokens "
                        "+ 5 %): the server's tokenizer differs; pass --tokenizer"]
    assert "differs from /t/tokenizer.json" in run_warnings(levels, "/t/tokenizer.json", True)[0]


def test_extra_body_and_headers_parsing() -> None:
    assert parse_extra_body('{"top_k": 1, "chat_template_kwargs": {"x": true}}') == {
        "top_k": 1, "chat_template_kwargs": {"x": True}}
    assert parse_extra_body(None) == {}
    for bad, msg in (("{top_k: 1}", "not JSON"), ("[1]", "JSON object"), ('{"stream": false}', "may not set stream")):
        with pytest.raises(InputError, match=msg):
            parse_extra_body(bad)
    assert parse_headers(["X-Tenant: a", "X-Trace=b:c", "Authorization: Bearer t:k"]) == {
        "X-Tenant": "a", "X-Trace": "b:c", "Authorization": "Bearer t:k"}
    for bad in ("novalue", ": v", "X Y: z"):
        with pytest.raises(GpumatchError, match="is not NAME:VALUE"):
            parse_headers([bad])


def test_time_limited_supply_is_endless_unique_and_made_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    from gpumatch.loadgen.inputs import Inputs

    inputs = Inputs(12, 8, 4, 1.0, 0)
    closed = list(itertools.islice(inputs.level(Level(0, "concurrency", 2, duration_s=5.0)), 700))
    assert [s.index for s in closed] == list(range(700)) and len({s.prompt for s in closed}) == 700
    made: list[int] = []
    block = Inputs._block

    def spy(self: Inputs, n: int, *a: Any) -> Any:
        made.append(n)
        return block(self, n, *a)

    monkeypatch.setattr(Inputs, "_block", spy)
    rate = inputs.level(Level(1, "rate", 100.0, duration_s=10.0))
    assert made == [1266]  # 1.25 x 100/s x 10 s + 16, made before the level consumes any
    assert len(list(itertools.islice(rate, 1500))) == 1500 and made == [1266, 256]
    counted = inputs.level(Level(2, "concurrency", 2))
    assert isinstance(counted, list) and len(counted) == 12
