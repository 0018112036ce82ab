"""``gpumatch models list|show`` through the CLI entry point (exit codes, JSON contract, one-line errors)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from gpumatch.cli.app import main

HF = Path(__file__).resolve().parents[2] / "data" / "hf_configs"
CONTRACT = (
    "name", "params_total", "params_active", "layers", "hidden_size", "heads", "kv_heads", "head_dim", "ffn_size",
    "vocab_size", "tied_embeddings", "experts", "experts_per_token",
)  # fmt: skip


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_is_a_list_with_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "models", "list", "--format", "json")
    rows = json.loads(out)
    assert code == 0 and isinstance(rows, list) and len(rows) >= 18
    assert all(all(k in r for k in CONTRACT) for r in rows)
    assert {r["name"] for r in rows} >= {"llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "phi-3-mini"}


def test_list_table_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "models", "list")
    assert code == 0 and "llama-3.1-405b" in out and "params_B" in out
    code, out, _ = _run(capsys, "models", "list", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and next(r for r in rows if r["name"] == "mixtral-8x7b")["active_B"] == "12.88"


def test_show_json_by_alias(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "models", "show", "meta-llama/Llama-3.1-8B", "--format", "json")
    d = json.loads(out)
    assert code == 0 and d["name"] == "llama-3.1-8b" and d["params_total"] == 8_030_261_248
    assert (d["kv_heads"], d["head_dim"], d["tied_embeddings"], d["experts"]) == (8, 128, False, 0)


def test_show_hf_config_file_and_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "models", "show", "--hf-config", str(HF / "mixtral-8x7b" / "config.json"), "-f", "json")
    d = json.loads(out)
    assert code == 0 and (d["experts"], d["experts_per_token"], d["params_total"]) == (8, 2, 46_702_792_704)
    code, out, _ = _run(capsys, "models", "show", "--hf-config", str(HF / "gemma-2-9b"))
    assert code == 0 and "9241705984" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["models", "show", "llama-9000"], "unknown model"),
        (["models", "show", "qwen2.5"], "ambiguous"),
        (["models", "show"], "either a model NAME or --hf-config"),
        (["models", "show", "x", "--hf-config", "y.json"], "either a model NAME or --hf-config"),
        (["models", "show", "--hf-config", "/nonexistent/config.json"], "cannot read"),
    ],
)
def test_bad_input_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == ""
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_hostile_hf_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama", "hidden_size": -1}))
    code, _, err = _run(capsys, "models", "show", "--hf-config", str(p))
    assert code == 2 and "hidden_size" in err and str(p) in err and err.count("\n") == 1
