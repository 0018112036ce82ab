"""Incremental detokenization of ``gpumatch serve`` with a real tokenizer (vLLM's rule, ``tokens.IncrementalText``):
the streamed pieces join to the text the tokenizer gives the whole output after its prompt, for a tokenizer that
joins tokens with spaces (WordLevel), one whose lone tokens lose their leading space (SentencePiece's Metaspace,
Llama 2 / Mistral) and a byte-level one whose character spans two tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")

from gpumatch.bench.server.tokens import IncrementalText, TokenizerCodec  # noqa: E402

WORDS = "the quick brown fox jumps over the lazy dog and runs far away"


def _save(tok: object, tmp_path: Path) -> TokenizerCodec:
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))  # type: ignore[attr-defined]
    return TokenizerCodec(path, 4096)


def _wordlevel(tmp_path: Path) -> TokenizerCodec:
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.train_from_iterator([WORDS], tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    return _save(tok, tmp_path)


def _metaspace(tmp_path: Path) -> TokenizerCodec:
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace()
    tok.decoder = tokenizers.decoders.Metaspace()
    tok.train_from_iterator([WORDS], tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    return _save(tok, tmp_path)


def _pieces(codec: TokenizerCodec, prompt: list[int], out: list[int]) -> list[str]:
    stream = codec.stream(prompt)
    return [stream.add(t) for t in out]


@pytest.mark.parametrize("make", [_wordlevel, _metaspace])
def test_pieces_join_to_the_whole_texts_tail(tmp_path: Path, make: object) -> None:
    codec = make(tmp_path)  # type: ignore[operator]
    prompt, out = codec.encode("the quick brown fox jumps"), codec.encode("over the lazy dog")
    pieces = _pieces(codec, prompt, out)
    whole = codec.decode(prompt + out)
    assert "".join(pieces) == whole[len(codec.decode(prompt)):] == " over the lazy dog"
    assert all(p.startswith(" ") for p in pieces)
    # one id at a time loses the spaces: what the server sent before
    assert "".join(codec.decode_one(t) for t in out) == "overthelazydog"


def test_a_character_split_over_two_tokens_comes_whole_with_the_second(tmp_path: Path) -> None:
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.train_from_iterator(["plain ascii text"], tokenizers.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet()))
    codec = _save(tok, tmp_path)
    out = codec.encode(" é!")
    assert len(out) == 4  # space, two bytes of é, "!"
    assert _pieces(codec, codec.encode("plain"), out) == [" ", "", "é", "!"]


def test_the_stream_starts_from_the_prompts_last_tokens_only() -> None:
    seen: list[list[int]] = []

    def decode(ids: list[int]) -> str:
        seen.append(list(ids))
        return "".join(f"<{i}>" for i in ids)

    stream = IncrementalText(decode, list(range(100)))
    assert stream.add(7) == "<7>" and stream.add(8) == "<8>"
    assert max(len(ids) for ids in seen) <= 7  # 5 prompt ids of context, then the window moves on


def test_the_client_check_folder_gives_whole_text_for_every_id(tmp_path: Path) -> None:
    """``benchmarks/gpu/make_hf_folder.py --shape tiny --tokenizer bpe`` (the folder of the GuideLLM / AIPerf check,
    tests/data/clients/README.md): ASCII text round-trips, every id of the model's vocabulary decodes to text
    without U+FFFD (a random model's tokens are never held back), and transformers' AutoTokenizer reads it as a
    fast tokenizer."""
    import importlib.util

    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    script = Path(__file__).resolve().parents[4] / "benchmarks" / "gpu" / "make_hf_folder.py"
    spec = importlib.util.spec_from_file_location("make_hf_folder", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = "the server streams one token per chunk, and the client counts them; ümlauts are dropped. " * 40
    folder = mod.make_folder(tmp_path / "tiny-bpe", text, mod.SHAPES["tiny"], "bpe")
    codec = TokenizerCodec(folder / "tokenizer.json", 512)
    sentence = "the client streams the server's tokens"
    assert codec.decode(codec.encode(sentence)) == sentence
    vocab = codec._tok.get_vocab_size()
    assert all("\ufffd" not in codec.decode_one(i) for i in range(vocab))
    assert json.loads((folder / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_special_tokens_add_no_text_unless_asked(tmp_path: Path) -> None:
    """vLLM's ``skip_special_tokens`` (default true): a special token the model picks adds no output text."""
    from gpumatch.bench.server.protocol import BadRequest, parse

    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.train_from_iterator([WORDS], tokenizers.trainers.WordLevelTrainer(special_tokens=["[UNK]", "</s>"]))
    codec = _save(tok, tmp_path)
    eos, fox = codec.encode("</s>")[0], codec.encode("fox")[0]
    prompt = codec.encode("the quick brown")
    skipped = codec.stream(prompt)
    assert [skipped.add(t) for t in (fox, eos)] == [" fox", ""]
    kept = codec.stream(prompt, skip_special_tokens=False)
    assert [kept.add(t) for t in (fox, eos)] == [" fox", " </s>"]
    body = {"prompt": "a b", "max_tokens": 2}
    assert parse(body, False, 64, 32, "m").skip_special_tokens is True
    assert parse({**body, "skip_special_tokens": False}, False, 64, 32, "m").skip_special_tokens is False
    with pytest.raises(BadRequest, match="skip_special_tokens"):
        parse({**body, "skip_special_tokens": "no"}, False, 64, 32, "m")
