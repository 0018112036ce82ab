"""``gpumatch bench run --weights DIR --text FILE`` and ``--workload``: a tiny Llama-shaped Hugging Face folder
(config.json, random weights saved with safetensors, a WordLevel tokenizer.json trained here) run end to end into a
real SQLite store; bad folders refused with one line; the workload's configuration mapped onto cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

import torch

from gpumatch.bench.hfweights import expected_tensors
from gpumatch.cli.app import main
from gpumatch.lab.run import BenchRequest, run_bench
from gpumatch.store import open_store

TEXT = ("the quick brown fox jumps over the lazy dog while the small cat sleeps on the warm mat and the "
        "old man reads a long book about the sea the fox and the cat are friends ") * 6
SHAPE = {"name": "tiny-hf", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "ffn": 128,
         "vocab": 64, "tied": False}


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([TEXT], trainers.WordLevelTrainer(vocab_size=SHAPE["vocab"], special_tokens=["[UNK]"]))
    tok.save(str(path))


def make_folder(root: Path, bad: dict[str, tuple[int, ...]] | None = None, drop: str | None = None,
                sharded: bool = False, config: dict[str, Any] | None = None) -> Path:
    """A tiny Llama folder: config.json, weights (one file, or two shards and an index), tokenizer.json."""
    from safetensors.torch import save_file

    root.mkdir(parents=True, exist_ok=True)
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": SHAPE["vocab"],
           "tie_word_embeddings": False, "max_position_embeddings": 256, "rope_theta": 10000.0,
           "rms_norm_eps": 1e-5, **(config or {})}
    (root / "config.json").write_text(json.dumps(cfg))
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for name, shape in expected_tensors(SHAPE).items():
        shape = (bad or {}).get(name, shape)
        t = torch.ones(shape) if len(shape) == 1 else torch.randn(shape, generator=gen) * 0.2
        tensors[name] = t.to(torch.bfloat16)
    tensors.pop(drop or "", None)
    if sharded:
        names = sorted(tensors)
        half = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
                "model-00002-of-00002.safetensors": names[len(names) // 2:]}
        for file, part in half.items():
            save_file({n: tensors[n] for n in part}, str(root / file))
        (root / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {n: f for f, part in half.items() for n in part}}))
    else:
        save_file(tensors, str(root / "model.safetensors"))
    _tokenizer(root / "tokenizer.json")
    return root


@pytest.fixture(scope="module")
def quality_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    tmp = tmp_path_factory.mktemp("weights")
    folder = make_folder(tmp / "tiny-llama", sharded=True)
    text = tmp / "sample.txt"
    text.write_text(TEXT, encoding="utf-8")
    store = tmp / "results.sqlite"
    code = main(["bench", "run", "--tiny", "--weights", str(folder), "--text", str(text), "--case", "quality",
                 "--case", "prefill", "--window", "16", "--stride", "8", "--store", str(store)])
    return store, code


def test_quality_case_end_to_end(quality_run: tuple[Path, Any]) -> None:
    store, code = quality_run
    assert code == 0
    with open_store(store, mode="read") as st:
        run = st.run(1)
        rows = {(r.metric, (r.config or {}).get("variant")): r for r in st.results(1)}
        failures = st.failures(1)
    assert failures == []
    assert run.manifest["model.weights"]["tensors"] == len(expected_tensors(SHAPE))
    assert run.manifest["model.name"] == "tiny-llama" and run.manifest["quality.window"] == 16
    n = rows[("quality_tokens", "bf16")].value
    assert n == run.manifest["quality.tokens"] - 1  # stride < window: every token but the first scored once
    assert rows[("quality_top1_agreement", "bf16")].value == 1.0
    assert rows[("quality_kl_nat", "bf16")].value == pytest.approx(0.0, abs=1e-6)
    for variant in ("int8", "fp8"):
        ppl = rows[("quality_perplexity", variant)].value
        assert 1.0 < ppl < 1e6
        assert 0.8 <= rows[("quality_top1_agreement", variant)].value <= 1.0
        assert rows[("quality_kl_nat", variant)].value > 0.0
        assert rows[("quality_perplexity", variant)].extra["quantized_tensors"] == 14  # 7 Linear weights × 2 layers
    assert rows[("quality_perplexity", "int8")].extra["weight_rel_error"] < 0.02
    assert rows[("quality_perplexity", "bf16")].unit == "1" and rows[("quality_kl_nat", "int8")].unit == "nat"
    assert ("prefill_s", None) in rows  # prefill ran on the loaded weights


def test_show_prints_quality(quality_run: tuple[Path, Any], capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = quality_run
    capsys.readouterr()
    assert main(["bench", "show", "1", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "quality_perplexity" in out and "int8 w16/8" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_loaded_weights_match_the_files(tmp_path: Path) -> None:
    """The loader puts q/k/v and gate/up into the fused matrices' rows in order (values compared exactly)."""
    from safetensors.torch import load_file

    from gpumatch.bench.llama import build_model
    from gpumatch.bench.weights import load_weights
    from gpumatch.lab.inputs import load_weights_folder

    folder = make_folder(tmp_path / "m")
    w = load_weights_folder(folder)
    model = build_model(w.shape, torch.device("cpu"), torch.bfloat16, init=False)
    assert load_weights(model, folder, w.params["files"]) == len(expected_tensors(SHAPE))
    src = load_file(str(folder / "model.safetensors"))
    wqkv = model.layers[1].attn.wqkv.weight
    assert torch.equal(wqkv[64:96], src["model.layers.1.self_attn.k_proj.weight"])
    assert torch.equal(model.layers[0].mlp.w13.weight[128:], src["model.layers.0.mlp.up_proj.weight"])
    assert torch.equal(model.lm_head.weight, src["lm_head.weight"])


@pytest.mark.parametrize(("kind", "words"), [
    ("shape", "model.layers.1.mlp.up_proj.weight has shape [100, 64]"),
    ("missing", "model.layers.0.self_attn.k_proj.weight is missing"),
    ("noconfig", "has no config.json"),
    ("nofolder", "does not exist"),
    ("moe", "not a dense Llama-style decoder"),
    ("bias", "attention_bias"),
])
def test_bad_folders_are_one_line_exit_2(kind: str, words: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "m"
    if kind == "shape":
        make_folder(folder, bad={"model.layers.1.mlp.up_proj.weight": (100, 64)})
    elif kind == "missing":
        make_folder(folder, drop="model.layers.0.self_attn.k_proj.weight")
    elif kind == "noconfig":
        make_folder(folder)
        (folder / "config.json").unlink()
    elif kind == "moe":
        make_folder(folder, config={"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2})
    elif kind == "bias":
        make_folder(folder, config={"attention_bias": True})
    code = main(["bench", "run", "--tiny", "--weights", str(folder), "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("gpumatch: error:") and words in err, err


def test_text_needs_weights_and_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "t.txt"
    text.write_bytes(b"caf\xe9 latin-1")
    assert main(["bench", "run", "--tiny", "--text", str(text)]) == 2
    assert "--text needs --weights" in capsys.readouterr().err
    from gpumatch.errors import InputError
    from gpumatch.lab.inputs import load_weights_folder, quality_params

    w = load_weights_folder(make_folder(tmp_path / "m"))
    with pytest.raises(InputError, match="not UTF-8"):
        quality_params(w, text, True, None, None, None)
    with pytest.raises(InputError, match="max_position_embeddings"):
        quality_params(w, text, True, 1024, None, None)


def test_windows_score_each_target_once() -> None:
    from gpumatch.bench.textdata import windows

    spans = windows(10, 4, 2)
    assert spans[0] == (0, 4, 1) and sum(e - f for _, e, f in spans) == 9
    assert sum(e - f for _, e, f in windows(10, 4, 4)) == 7  # no overlap: each later window's first token unscored


def test_quantizers() -> None:
    from gpumatch.bench.weights import quantize_dequantize

    w = torch.randn(8, 256, generator=torch.Generator().manual_seed(1))
    q = quantize_dequantize(w, "int8")
    s = w.abs().amax(1, keepdim=True) / 127
    assert torch.allclose(q / s, torch.round(q / s), atol=1e-4)  # on the int8 grid of its row
    assert float((q - w).abs().max()) <= float(s.max()) / 2 + 1e-6
    f = quantize_dequantize(w, "fp8")
    assert torch.equal(f.abs().amax(1), w.abs().amax(1))  # the row's max maps to 448 exactly
    assert 0 < float((f - w).norm() / w.norm()) < 0.05


WORKLOAD = """name = "tiny-serve"
task = "serve"
model = "llama-3.2-1b"
[precision]
weights = "bf16"
[shape]
prompt_tokens = 40
output_tokens = 8
concurrency = 3
"""


def test_workload_maps_onto_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = tmp_path / "w.toml"
    wl.write_text(WORKLOAD)
    store = tmp_path / "w.sqlite"
    run = run_bench(BenchRequest(tiny=True, store=store, workload=wl, only=("workload-decode", "workload-prefill")))
    assert [c.status for c in run.cases] == ["ok", "ok"]
    with open_store(store, mode="read") as st:
        rec = st.run(1)
        rows = {r.metric: r for r in st.results(1)}
    assert rec.manifest["workload.name"] == "tiny-serve" and rec.manifest["run.precisions"] == ["bf16"]
    assert rows["decode_step_s"].config["batch"] == 3 and rows["decode_step_s"].config["context"] == 48
    assert rows["prefill_s"].config["seq"] == 40
    run = run_bench(BenchRequest(tiny=True, store=store, workload=wl, precisions=("fp32",), decode_batches=(2,),
                                 only=("workload-decode",)))
    assert any("--precision fp32 wins" in n for n in run.notes)
    assert any("--decode-batch 2 wins" in n for n in run.notes)
    with open_store(store, mode="read") as st:
        assert st.results(2)[0].config["batch"] == 2
        assert any("wins" in n for n in st.run(2).manifest["run.notes"])


def test_training_workload_and_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpumatch.lab.suites import SuiteSpec
    from gpumatch.lab.workload import load_plan, workload_cases

    root = Path(__file__).resolve().parents[3]
    plan = load_plan(root / "examples" / "lora-8b-workstation.toml")
    assert plan.train == {"batch": 4, "seq": 2048, "master": "fp32"}  # bf16 weights keep an fp32 master copy
    spec = SuiteSpec("quick", SHAPE, SHAPE, ("bf16",), tiny=False)
    cases, _ = workload_cases(plan, spec, (), {"kernelpath-bf16"})
    assert [(c.case_id, c.params["batch"], c.params["seq"]) for c in cases] == [("workload-train", 4, 2048)]
    bad = tmp_path / "bad.toml"
    bad.write_text('task = "serve"\nmodel = "llama-3.2-1b"\n[shape]\nconcurency = 3\n')
    assert main(["bench", "run", "--tiny", "--workload", str(bad), "--store", str(tmp_path / "s.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "concurency" in err


def test_llama3_rope_scaling() -> None:
    """Llama 3.1's recipe: short wavelengths kept, long ones divided by the factor, the band between blended."""
    import math

    from gpumatch.bench.llama import rope_inv_freq
    from gpumatch.bench.shapes import LlamaShape

    sc = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
    plain = LlamaShape.from_dict({**SHAPE, "head_dim": 128, "rope_theta": 500000.0})
    scaled = LlamaShape.from_dict({**SHAPE, "head_dim": 128, "rope_theta": 500000.0, "rope_scaling": sc})
    a, b = rope_inv_freq(plain, torch.device("cpu")), rope_inv_freq(scaled, torch.device("cpu"))
    wavelen = 2 * math.pi / a
    assert torch.equal(b[wavelen < 8192 / 4], a[wavelen < 8192 / 4])
    assert torch.allclose(b[wavelen > 8192], a[wavelen > 8192] / 8)
    mid = (wavelen >= 2048) & (wavelen <= 8192)
    assert mid.any() and bool(((b[mid] <= a[mid]) & (b[mid] >= a[mid] / 8)).all())
