"""``gpumatch plan``: file or flags, three formats, one-line errors with exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpumatch.cli.app import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_plan_file_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLES / "chat-70b-serving.toml"), "--format", "json", "--top", "2"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["shortlist"]) == {"low-power-inference", "latency-serving", "throughput-serving"}
    assert all(len(v) <= 2 for v in d["shortlist"].values())
    assert d["candidates_evaluated"] > 1000 and d["elapsed_s"] > 0
    fits = [r for r in d["rejected"] if r["rule"] == "memory" and r["count"] == 1 and r["precision"] == "bf16"]
    assert any(r["gpu"] == "H100 SXM5 80GB" for r in fits)


def test_plan_flags_table_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "--model", "llama-3.2-3b", "--task", "serve", "--batch", "8", "--max-gpus", "2"]
    assert main([*args, "--role", "low-power-inference"]) == 0
    out = capsys.readouterr().out
    assert "low-power inference card" in out and "Failed:" in out and "verify:" not in out
    assert main([*args, "--role", "low-power-inference", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "Failed:" in out and "verify:" in out and "cost:" in out and "flip:" in out
    assert main([*args, "--role", "low-power-inference", "--explain"]) == 0  # the alias
    elapsed = re.compile(r"in \d+\.\d+ s")
    assert elapsed.sub("", capsys.readouterr().out) == elapsed.sub("", out)
    assert main([*args, "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("kind,role,rank,gpu") and any(x.startswith("rejected,") for x in lines)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["plan"], "a model is needed"),
        (["plan", "--model", "llama-3.1-8b", "--task", "cook"], "unknown task 'cook'"),
        (["plan", "--model", "llama-3.1-8b", "--precision", "fp9"], "unknown precision"),
        (["plan", "--model", "llama-3.1-8b", "--batch", "0"], "--batch must be at least 1"),
        (["plan", "--model", "llama-3.1-8b", "--top", "0"], "--top must be at least 1"),
        (["plan", "--model", "llama-3.1-8b", "--role", "cluster-training"], "does not apply to task"),
        (["plan", "--model", "llama-3.1-8b", "--gpu", "H1000"], "H1000"),
        (["plan", "--model", "gpt-17"], "gpt-17"),
        (["plan", "no/such/file.toml"], "no/such/file.toml"),
        *[(["plan", "--model", "llama-3.1-8b", "--task", "serve", flag, value], says)
          for flag, value, says in [
              ("--budget-usd", "-5", "--budget-usd -5: input should be greater than 0"),
              ("--budget-usd", "nan", "--budget-usd must be a finite number"),
              ("--budget-usd", "inf", "--budget-usd must be a finite number"),
              ("--psu-w", "-1", "--psu-w -1: input should be greater than 0"),
              ("--psu-w", "0", "--psu-w 0: input should be greater than 0"),
              ("--tpot-s", "-1", "--tpot-s -1"),
              ("--tokens-per-s", "inf", "--tokens-per-s must be a finite number"),
              ("--power-w-per-node", "0", "--power-w-per-node 0"),
              ("--power-w-per-node", "nan", "--power-w-per-node must be a finite number"),
              ("--ttft-s", "0", "--ttft-s 0"),
              ("--ttft-s", "nan", "--ttft-s must be a finite number"),
              ("--micro-batch", "2", "--micro-batch is for training"),
              ("--seq", "100", "--seq is for training"),
          ]],
        *[(["plan", "--model", "llama-3.1-8b", "--task", "lora", flag, value], f"{flag} is for inference")
          for flag, value in [("--kv-precision", "fp8"), ("--prompt", "10"), ("--gen", "5"), ("--ttft-s", "1")]],
        (["plan", "--model", "llama-3.1-8b", "--task", "serve", "--seq", "100", "--prompt", "50"], "--seq is for"),
        (["plan", "--model", "llama-3.1-8b", "--gpu", "L4", "--exclude", "L4"], "L4 is both allowed and denied"),
        (["plan", "--model", "llama-3.1-8b", "--task", "serve", "--tp", "3"], "--tp 3 does not divide the 32"),
        (["plan", "--model", "llama-3.1-8b", "--task", "serve", "--prompt", "200000"],
         "--prompt + --gen: a 200256-token context exceeds llama-3.1-8b's 131072 positions"),
        (["plan", "--model", "llama-3.1-8b", "--task", "lora", "--seq", "200000"], "--seq: a 200000-token context"),
        (["plan", "--model", "llama-3.1-8b", "--batch", "100000000"], "--batch 1e+08 is beyond any real workload"),
    ],
)
def test_bad_input_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "text",
    ['task = "serve"\nmodel = "llama-3.1-8b"\n[limits]\nmax_gpu = 2\n', "task = \n", "",
     'task = "serve"\nmodel = "llama-3.1-8b"\n[role_weights.latency]\ncost = 1\n'],
)
def test_bad_workload_file_one_line_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> None:
    p = tmp_path / "w.toml"
    p.write_text(text)
    assert main(["plan", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpumatch: error:") and err.count("\n") == 1 and "w.toml" in err
