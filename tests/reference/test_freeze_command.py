"""The command line ``benchmarks/freeze_engine_predictions.py`` predicts a published row with (the blind batches'
predictions are frozen with it, and ``benchmarks/serving_regime_table.py`` predicts the same rows again with it in
one process), and the regime a row is grouped under."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

ROW = {"id": "r", "model": "llama-3.1-8b", "gpu": "H100 SXM5 80GB", "tp": 2, "precision": "fp8", "engine": "vllm",
       "concurrency": 16, "prompt": 1024, "gen": 128, "num_prompts": 160, "length_low": 0.8, "kv_precision": "fp8",
       "loop": "closed", "request_rate": "inf"}
REPLY = {"gpu": "H100 SXM5 80GB", "fits": True, "ttft_s": 0.1, "tpot_s": 0.01, "output_tokens_per_s": 1.0,
         "serving": {}, "warnings": []}


@pytest.fixture
def scripts() -> Iterator[tuple[ModuleType, ModuleType]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import freeze_engine_predictions
        import serving_regime_table

        yield freeze_engine_predictions, serving_regime_table
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _argv(freeze: ModuleType, row: dict[str, Any], hit: float = 0.0) -> list[str]:
    seen: list[list[str]] = []

    def cli(args: list[str]) -> str:
        seen.append(args)
        return json.dumps(REPLY)

    out = freeze.predict(row, hit, cli=cli)
    assert out["ttft_s"] == 0.1 and out["kv_precision"] == "fp8" and out["prefix_hit_ratio"] == hit
    return seen[0]


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_a_closed_loop_row_replays_its_benchmark(scripts: tuple[ModuleType, ModuleType]) -> None:
    argv = _argv(scripts[0], ROW)
    assert argv[:1] == ["estimate"] and _flag(argv, "--task") == "serve" and _flag(argv, "--format") == "json"
    assert (_flag(argv, "--count"), _flag(argv, "--tp"), _flag(argv, "--engine")) == ("2", "2", "vllm")
    assert (_flag(argv, "--concurrency"), _flag(argv, "--num-prompts"), _flag(argv, "--length-low")) == (
        "16", "160", "0.8")
    assert _flag(argv, "--kv-precision") == "fp8" and "--request-rate" not in argv
    assert "--prefix-hit-ratio" not in argv


def test_an_open_loop_row_replays_its_arrivals_and_a_hit_ratio_reaches_the_command(
        scripts: tuple[ModuleType, ModuleType]) -> None:
    argv = _argv(scripts[0], {**ROW, "loop": "open-poisson", "request_rate": "4"}, hit=0.25)
    assert _flag(argv, "--request-rate") == "4" and "--concurrency" not in argv
    assert _flag(argv, "--num-prompts") == "160" and _flag(argv, "--prefix-hit-ratio") == "0.25"


def test_a_run_longer_than_a_replay_holds_is_its_steady_state(scripts: tuple[ModuleType, ModuleType]) -> None:
    argv = _argv(scripts[0], {**ROW, "loop": "open-poisson", "request_rate": "4", "num_prompts": 10**6})
    assert "--num-prompts" not in argv and _flag(argv, "--request-rate") == "4"


def test_regimes(scripts: tuple[ModuleType, ModuleType]) -> None:
    regime = scripts[1].regime
    assert regime(ROW) == ("vllm", "dense", "TP > 1", "closed")
    assert regime({**ROW, "model": "qwen3-30b-a3b", "tp": 1, "loop": "open-burst"}) == (
        "vllm", "MoE", "1 GPU", "open")
