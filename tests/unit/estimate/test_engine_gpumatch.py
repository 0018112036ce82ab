"""The ``gpumatch`` engine profile: it describes ``gpumatch serve``'s defaults, and the estimator (steady state,
benchmark replay, CLI) predicts it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpumatch.cli.app import app
from gpumatch.estimate import Request, estimate
from gpumatch.estimate.engine_profiles import engine_profile
from gpumatch.lab.serve import ServeOptions

SERVE = {"task": "serve", "prompt": 1024, "gen": 256}


def test_profile_matches_the_server_defaults() -> None:
    pytest.importorskip("prometheus_client")
    from gpumatch.bench.server.engine import MEMORY_FRACTION

    p = engine_profile("gpumatch")
    tier = p.tier("H200 SXM", 141e9)
    o = ServeOptions()
    assert (tier.token_budget, tier.max_seqs) == (o.max_num_batched_tokens, o.max_num_seqs)
    assert p.schedule == "mixed" and p.kv_admission == "reserve" and p.memory_fraction == MEMORY_FRACTION
    assert p.memory_fraction_of == "total" and 0 < p.host_pass_s < 1e-2 and 0 < p.host_seq_s < 1e-4


def test_replay_and_steady_state_accept_gpumatch() -> None:
    replayed = estimate(
        "llama-3.1-8b",
        "H200 SXM",
        Request(engine="gpumatch", num_prompts=320, **SERVE, concurrency=32),
        with_scaling=False,
    )
    steady = estimate(
        "llama-3.1-8b",
        "H200 SXM",
        Request(engine="gpumatch", num_prompts=0, **SERVE, concurrency=32),
        with_scaling=False,
    )
    vllm = estimate(
        "llama-3.1-8b", "H200 SXM", Request(engine="vllm", num_prompts=320, **SERVE, concurrency=32), with_scaling=False
    )
    s = replayed.serving
    assert s is not None and s["engine"] == "gpumatch" and s["model"] == "benchmark-replay"
    assert s["token_budget"] == 8192 and s["max_seqs"] == 256 and s["replay"]["num_prompts"] == 320
    assert steady.serving is not None and steady.serving["model"] == "steady-state"
    # the same mixed schedule and budget as vLLM on an H200, but unsplit SDPA decode attention and a larger host
    # cost per running sequence (12.1 us measured on a GPU host against vLLM's 2 us): a longer TPOT at 32 in flight
    assert replayed.metrics["tpot_s"] > vllm.metrics["tpot_s"]


def test_cli_estimate_with_engine_gpumatch() -> None:
    r = CliRunner().invoke(
        app,
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "H200 SXM",
            "--task",
            "serve",
            "--engine",
            "gpumatch",
            "--concurrency",
            "16",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["serving"]["engine"] == "gpumatch"
