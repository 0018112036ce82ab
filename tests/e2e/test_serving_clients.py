"""The files GuideLLM 0.8.1 and AIPerf 0.13.0 wrote against ``gpumatch serve`` (tests/data/clients/README.md)
import into a real SQLite store with ``runs import --from guidellm|aiperf``, and ``bench compare`` pairs each with
a ``gpumatch bench serve`` run recorded here against a loopback ``gpumatch serve`` of a model of the same name
(the folder ``tiny-bpe``) at the same load (2 concurrent clients, 32 prompt and 16 output tokens)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("tokenizers")

from tests.unit.lab.test_inputs_weights import make_folder

from gpumatch.cli.app import main
from gpumatch.lab.serve import ServeOptions, ServerThread
from gpumatch.loadgen.bench import ServeRequest, run_serve_bench
from gpumatch.store import open_store

CLIENTS = Path(__file__).resolve().parents[1] / "data" / "clients"
GUIDELLM = CLIENTS / "guidellm-0.8.1-gpumatch-serve.json"
AIPERF = CLIENTS / "aiperf-0.13.0-profile_export_aiperf.json"
AIPERF_CSV = CLIENTS / "aiperf-0.13.0-profile_export_aiperf.csv"
MODEL = "tiny-bpe"
"""The served name in both files (the weights folder's name)."""


def _folder(root: Path) -> Path:
    """A tiny Llama folder (``test_inputs_weights.make_folder``) whose WordLevel tokenizer names every id of the
    model's vocabulary (64), so every generated token has text, as a load generator needs."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    folder = make_folder(root)
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(f"w{i}" for i in range(100))],
                            trainers.WordLevelTrainer(vocab_size=64, special_tokens=["[UNK]"]))
    tok.save(str(folder / "tokenizer.json"))
    assert tok.get_vocab_size() == 64
    return folder


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Run 1: gpumatch bench serve (chat, c=2, 20 requests) against gpumatch serve of a folder named tiny-bpe."""
    root = tmp_path_factory.mktemp("clients")
    path = str(root / "s.sqlite")
    opts = ServeOptions(weights=_folder(root / MODEL), port=0, max_num_seqs=4, max_model_len=128,
                        max_num_batched_tokens=64, dtype="fp32", device="cpu")
    with ServerThread(opts) as server:
        run = run_serve_bench(ServeRequest(server.url, MODEL, api="chat", concurrency=(2,), num_prompts=20,
                                           prompt_tokens=32, output_tokens=16, store=path, selftest=False))
    assert run.run_id == 1 and run.levels[0].summary["completed"] == 20
    return path


def _import(capsys: pytest.CaptureFixture[str], store: str, fmt: str, file: Path) -> dict[str, object]:
    code, out, err = _cli(capsys, "runs", "import", str(file), "--from", fmt, "--store", store, "--format", "json")
    assert code == 0, err
    return dict(json.loads(out))


def _result(store: str, run_id: int, metric: str) -> tuple[float, dict[str, object]]:
    with open_store(store, mode="read") as s:
        r = next(r for r in s.results(run_id) if r.metric == metric)
    return r.value, r.config


def test_guidellm_file_imports_with_its_model_and_level(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """0.8.1 leaves ``config.spec.backend.model`` empty (it asked /v1/models) and keeps the model it sent in the
    benchmark's ``config.backend``: the import takes it from there instead of calling the model unknown."""
    got = _import(capsys, store, "guidellm", GUIDELLM)
    assert got["name"] == f"serve {MODEL} (guidellm)" and got["missing"] == [] and got["kind"] == "serve"
    doc = json.loads(GUIDELLM.read_text())
    ttft_ms = doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["mean"]
    value, config = _result(store, int(str(got["run_id"])), "ttft_mean_s")
    assert value == pytest.approx(ttft_ms / 1000) and config["max_concurrency"] == 2
    assert _result(store, int(str(got["run_id"])), "completed_requests")[0] == 20
    assert _result(store, int(str(got["run_id"])), "failed_requests")[0] == 0
    with open_store(store, mode="read") as s:
        source = s.run(int(str(got["run_id"]))).manifest["source"]
    assert source["tool_version"] == "0.8.1" and source["schema_version"] == 2


def test_aiperf_file_imports_with_its_model_and_level(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = _import(capsys, store, "aiperf", AIPERF)
    assert got["name"] == f"serve {MODEL} (aiperf)" and got["missing"] == []
    doc = json.loads(AIPERF.read_text())
    value, config = _result(store, int(str(got["run_id"])), "ttft_mean_s")
    assert doc["time_to_first_token"]["unit"] == "ms"
    assert value == pytest.approx(doc["time_to_first_token"]["avg"] / 1000) and config["max_concurrency"] == 2
    assert _result(store, int(str(got["run_id"])), "completed_requests")[0] == 20


@pytest.mark.parametrize(("fmt", "file", "tool"), [("guidellm", GUIDELLM, "guidellm benchmark"),
                                                   ("aiperf", AIPERF, "aiperf profile")])
def test_bench_compare_pairs_the_client_run_with_bench_serve(store: str, capsys: pytest.CaptureFixture[str],
                                                            fmt: str, file: Path, tool: str) -> None:
    """Same model name, same load: no ``--force``; the c=2 level pairs TTFT, TPOT, E2E and the counts."""
    run_id = int(str(_import(capsys, store, fmt, file)["run_id"]))
    code, out, err = _cli(capsys, "bench", "compare", "1", str(run_id), "--store", store, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "serve" and not doc["forced"] and (doc["source_a"], doc["source_b"]) == (
        "gpumatch bench serve", tool)
    paired = {r["metric"]: r for r in doc["rows"] if r["a"] is not None and r["b"] is not None}
    assert {r["level"] for r in paired.values()} == {"c=2"}
    assert {"ttft_mean_s", "ttft_p50_s", "tpot_mean_s", "e2e_mean_s", "completed_requests"} <= set(paired)
    assert paired["completed_requests"]["a"] == paired["completed_requests"]["b"] == 20
    code, out, _ = _cli(capsys, "bench", "compare", "1", str(run_id), "--store", store)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80 and "_s " not in out


def test_the_aiperf_csv_is_refused_in_one_line(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``runs import`` reads AIPerf's JSON export; its CSV (the same figures as a table) is refused, nothing
    stored."""
    with open_store(store, mode="read") as s:
        before = len(s.runs())
    code, out, err = _cli(capsys, "runs", "import", str(AIPERF_CSV), "--from", "aiperf", "--store", store)
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    with open_store(store, mode="read") as s:
        assert len(s.runs()) == before
