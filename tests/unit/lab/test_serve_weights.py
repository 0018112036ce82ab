"""``gpumatch serve --weights DIR``: a tiny Hugging Face folder (config.json, safetensors, WordLevel tokenizer.json)
served over real HTTP on loopback (CPU). The prompt is counted with the folder's tokenizer, the completion is the
greedy continuation of the plain bench model loaded with the same weights, text rendered by the same tokenizer
(incrementally, as vLLM);
the config's EOS id ends a request unless ``ignore_eos``; bad combinations exit 2 with one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
aiohttp = pytest.importorskip("aiohttp")
tokenizers = pytest.importorskip("tokenizers")

from tests.unit.lab.test_inputs_weights import make_folder  # noqa: E402

from gpumatch.bench.llama import build_model, rope_tables  # noqa: E402
from gpumatch.bench.shapes import LlamaShape  # noqa: E402
from gpumatch.bench.weights import load_weights  # noqa: E402
from gpumatch.cli.app import main  # noqa: E402
from gpumatch.lab.inputs import load_weights_folder  # noqa: E402
from gpumatch.lab.serve import ServeOptions, ServerThread  # noqa: E402

PROMPT = "the quick brown fox jumps over the lazy dog"


def _greedy(folder: Path, ids: list[int], n: int) -> list[int]:
    """Greedy ids from full causal passes of the bench model with the folder's weights (float32, no cache)."""
    w = load_weights_folder(folder)
    model = build_model(LlamaShape.from_dict(w.shape), torch.device("cpu"), torch.float32).eval()
    load_weights(model, w.params["weights"], w.params["files"])
    toks = list(ids)
    for _ in range(n):
        t = torch.tensor([toks])
        with torch.no_grad():
            toks.append(int(model.prefill_logits(t, rope_tables(model.s, len(toks), t.device, torch.float32))
                            .argmax(-1)))
    return toks[len(ids):]


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with aiohttp.ClientSession() as s, s.post(url + "/v1/completions", json=body) as r:
            assert r.status == 200, await r.text()
            return dict(await r.json())

    return asyncio.run(go())


def test_serves_the_folders_weights_and_tokenizer(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "tiny-llama")
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ids = tok.encode(PROMPT).ids
    want = _greedy(folder, ids, 6)
    opts = ServeOptions(weights=folder, port=0, max_num_seqs=2, max_model_len=64, max_num_batched_tokens=16,
                        dtype="fp32")
    with ServerThread(opts) as s:
        assert s.listening is not None
        assert s.listening.info["tokens"] == "tokenizer.json" and s.listening.info["weights"] == str(folder)
        got = _post(s.url, {"model": "tiny-llama", "prompt": PROMPT, "max_tokens": 6, "ignore_eos": True})
    assert got["usage"]["prompt_tokens"] == len(ids) and got["usage"]["completion_tokens"] == 6
    # incremental detokenization (vLLM's): the text the tokenizer gives the whole sequence after the prompt's
    # (this WordLevel tokenizer joins tokens with spaces; one id at a time would lose them)
    whole = tok.decode(ids + want)  # special tokens skipped, vLLM's default
    assert got["choices"][0]["text"] == whole[len(tok.decode(ids)):]
    assert got["choices"][0]["text"].startswith(" ") and " " in got["choices"][0]["text"].strip()


def test_the_configs_eos_id_ends_a_request(tmp_path: Path) -> None:
    plain = make_folder(tmp_path / "a")
    tok = tokenizers.Tokenizer.from_file(str(plain / "tokenizer.json"))
    first = _greedy(plain, tok.encode(PROMPT).ids, 1)[0]
    folder = make_folder(tmp_path / "b", config={"eos_token_id": [first, 0]})  # a list: the first one counts
    opts = ServeOptions(weights=folder, port=0, max_num_seqs=2, max_model_len=64, max_num_batched_tokens=16,
                        dtype="fp32")
    with ServerThread(opts) as s:
        stopped = _post(s.url, {"model": "b", "prompt": PROMPT, "max_tokens": 5})
        ignored = _post(s.url, {"model": "b", "prompt": PROMPT, "max_tokens": 5, "ignore_eos": True})
    assert stopped["choices"][0]["finish_reason"] == "stop" and stopped["usage"]["completion_tokens"] == 1
    assert ignored["choices"][0]["finish_reason"] == "length" and ignored["usage"]["completion_tokens"] == 5


def test_bad_weights_options_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_folder(tmp_path / "tiny-llama")
    assert main(["serve", "--weights", str(folder), "--model", "llama-3.1-8b"]) == 2
    assert main(["serve", "--weights", str(folder), "--tiny"]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["serve", "--weights", str(tmp_path / "empty")]) == 2
    bad = make_folder(tmp_path / "bad", config={"vocab_size": 32})
    assert main(["serve", "--weights", str(bad)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("gpumatch: error: ") for line in lines), lines
    assert "one of --model, --hf-config and --weights" in lines[0] and "--tiny" in lines[1]
    assert json.loads((folder / "config.json").read_text())["vocab_size"] == 64  # nothing changed
