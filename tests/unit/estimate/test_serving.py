"""Serving engines at steady state (gpumatch.estimate.serving): profiles, the fixed point, admission, the surface."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpumatch.cli.app import app, main
from gpumatch.errors import InputError
from gpumatch.estimate import Request, estimate
from gpumatch.estimate import engine_profiles as profiles_module
from gpumatch.estimate.engine_profiles import engine_profiles, prefill_dispatch_s
from gpumatch.vocab import ENGINES

SERVE = {"task": "serve", "prompt": 1024, "gen": 512}


def test_every_engine_has_a_validated_sourced_profile() -> None:
    profiles = engine_profiles()
    assert set(profiles) == set(ENGINES)
    for name, p in profiles.items():
        assert p.sources and all(s.url and s.says for s in p.sources), name
    vllm = profiles["vllm"]
    assert vllm.memory_fraction == 0.9 and vllm.schedule == "mixed"
    assert vllm.tier("H100 SXM5 80GB", 80e9).token_budget == 8192
    assert vllm.tier("A100 SXM4 80GB", 80e9).token_budget == 2048  # vLLM keeps A100s on the small budget
    assert profiles["sglang"].schedule == "alternate" and profiles["trtllm"].kv_admission == "reserve"


def test_static_engine_keeps_the_static_batch_numbers() -> None:
    a = estimate("llama-3.1-8b", "H100 SXM", Request(engine="static", **SERVE, concurrency=16), with_scaling=False)
    assert a.serving is None
    infer = estimate(
        "llama-3.1-8b", "H100 SXM", Request(task="infer", prompt=1024, gen=512, concurrency=16), with_scaling=False
    )
    assert infer.to_dict()["serving"] == {"engine": "static"}
    assert a.metrics["ttft_s"] < a.metrics["prefill_s"]  # one prompt alone, not the batch


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "gpumatch"])
def test_closed_loop_steady_state(engine: str) -> None:
    runs = [
        estimate(
            "llama-3.1-8b",
            "H100 SXM",
            Request(engine=engine, num_prompts=0, **SERVE, concurrency=c),
            with_scaling=False,
        )
        for c in (1, 8, 64)
    ]
    tpot = [r.metrics["tpot_s"] for r in runs]
    ttft = [r.metrics["ttft_s"] for r in runs]
    assert tpot[0] < tpot[1] < tpot[2] and ttft[0] < ttft[2]
    for r, c in zip(runs, (1, 8, 64), strict=True):
        s = r.serving
        assert s is not None and s["engine"] == engine and s["mode"] == "closed-loop"
        assert s["mean_decode_batch"] < c  # requests spend part of their life in prefill
        # Little's law closes: C = rate x (TTFT + (O - 1) TPOT)
        life = r.metrics["ttft_s"] + (512 - 1) * r.metrics["tpot_s"]
        assert r.metrics["requests_per_s"] * life == pytest.approx(c, rel=1e-6)
        assert r.metrics["output_tokens_per_s"] == pytest.approx(r.metrics["requests_per_s"] * 512)
        assert r.metrics["itl_s"] == r.metrics["tpot_s"]


def test_one_request_alone_decodes_at_the_static_step_plus_host_cost() -> None:
    # the static model with the engine's kernels (split-KV decode, fused elementwise work): only the host cost differs
    static = estimate("llama-3.1-8b", "H100 SXM", Request(engine="static", fused_kernels=True, **SERVE, concurrency=1),
                      with_scaling=False)
    vllm = estimate("llama-3.1-8b", "H100 SXM", Request(engine="vllm", **SERVE, concurrency=1), with_scaling=False)
    plain = estimate("llama-3.1-8b", "H100 SXM", Request(engine="static", **SERVE, concurrency=1), with_scaling=False)
    assert plain.metrics["tpot_s"] > static.metrics["tpot_s"]  # PyTorch's SDPA: 8 blocks stream the cache
    host = engine_profiles()["vllm"].host_pass_s
    assert vllm.metrics["tpot_s"] == pytest.approx(static.metrics["tpot_s"] + host, rel=0.02)


def test_kv_admission_limits_the_running_batch_and_queues_the_rest() -> None:
    few = estimate(
        "llama-3.1-70b",
        "H100 SXM",
        Request(count=4, tp=4, engine="vllm", task="serve", prompt=8192, gen=1024, concurrency=64),
        with_scaling=False,
    )
    many = estimate(
        "llama-3.1-70b",
        "H100 SXM",
        Request(count=4, tp=4, engine="vllm", task="serve", prompt=8192, gen=1024, concurrency=2000),
        with_scaling=False,
    )
    s = many.serving
    assert s is not None and s["admission_limited"] and s["running_requests"] < 2000
    assert many.fits  # the excess waits in the queue instead of holding KV cache
    assert many.metrics["ttft_s"] > 10 * few.metrics["ttft_s"]
    assert many.layout["seqs_per_replica"] == 2000


def test_open_loop_rate_and_goodput() -> None:
    closed = estimate("llama-3.1-8b", "H100 SXM", Request(engine="vllm", **SERVE, concurrency=64), with_scaling=False)
    sat = closed.serving["saturated_requests_per_s"]  # type: ignore[index]
    low = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine="vllm", request_rate=0.2 * sat, **SERVE, concurrency=1024),
        with_scaling=False,
    )
    high = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine="vllm", request_rate=0.9 * sat, **SERVE, concurrency=1024),
        with_scaling=False,
    )
    assert low.serving["mode"] == "open-loop" and low.serving["stable"]  # type: ignore[index]
    assert low.metrics["requests_per_s"] == pytest.approx(0.2 * sat)
    assert low.metrics["ttft_s"] < high.metrics["ttft_s"] and low.metrics["tpot_s"] < high.metrics["tpot_s"]
    g = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine="vllm", slo_ttft_s=0.5, slo_tpot_s=0.02, **SERVE, concurrency=64),
        with_scaling=False,
    )
    good = g.serving["goodput_requests_per_s"]  # type: ignore[index]
    assert 0 < good < sat
    at = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine="vllm", request_rate=good * 0.999, **SERVE, concurrency=1024),
        with_scaling=False,
    )
    assert at.metrics["tpot_s"] <= 0.02 and at.metrics["ttft_s"] <= 0.5


def test_prefix_cache_hits_shorten_the_first_token() -> None:
    cold = estimate("llama-3.1-8b", "H100 SXM", Request(engine="vllm", **SERVE, concurrency=32), with_scaling=False)
    warm = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine="vllm", prefix_hit_ratio=0.75, **SERVE, concurrency=32),
        with_scaling=False,
    )
    assert warm.metrics["ttft_s"] < cold.metrics["ttft_s"]


def test_engine_options_are_refused_where_they_do_not_apply() -> None:
    with pytest.raises(InputError, match="applies to task 'serve'"):
        estimate("llama-3.1-8b", "H100 SXM", Request(task="infer", engine="vllm"))
    with pytest.raises(InputError, match="unknown engine"):
        estimate("llama-3.1-8b", "H100 SXM", Request(task="serve", engine="tgi"))
    with pytest.raises(InputError, match="needs a serving engine"):
        estimate("llama-3.1-8b", "H100 SXM", Request(task="serve", engine="static", request_rate=3.0))


def test_weights_that_leave_no_kv_room_fall_back_to_the_static_check() -> None:
    e = estimate("llama-3.1-70b", "H100 SXM", Request(engine="vllm", task="serve", concurrency=8), with_scaling=False)
    assert not e.fits and e.serving is None
    assert any("keeps no room" in w for w in e.warnings)


def test_cli_engine_flag_and_json_surface() -> None:
    r = CliRunner().invoke(
        app,
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "H100 SXM",
            "--task",
            "serve",
            "--engine",
            "sglang",
            "--concurrency",
            "32",
            "--format",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "requests_per_s", "output_tokens_per_s"):
        assert isinstance(d[k], float), k
    s = d["serving"]
    for k in (
        "engine",
        "token_budget",
        "mean_decode_batch",
        "prefill_tokens_per_pass",
        "kv_slots",
        "admission_limited",
    ):
        assert k in s, k
    assert s["engine"] == "sglang"
    table = CliRunner().invoke(
        app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "serve", "--concurrency", "32"]
    )
    flat = " ".join(table.stdout.split())
    assert "vllm (benchmark of 320 requests" in flat and "requests/s" in flat and "tpot_s" in flat
    assert "steady state" in flat and "p99" in flat


def test_workload_serving_section_sets_the_engine(tmp_path: Path) -> None:
    wl = tmp_path / "w.toml"
    wl.write_text(
        'task = "serve"\nmodel = "llama-3.1-8b"\n[shape]\nconcurrency = 16\n[serving]\nengine = "trtllm"\n'
        "prefix_hit_ratio = 0.5\n[targets]\nttft_p50_s = 0.3\ntpot_p50_s = 0.03\n"
    )
    r = CliRunner().invoke(app, ["estimate", "--workload", str(wl), "--gpu", "H200 SXM", "--format", "json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)["serving"]
    assert s["engine"] == "trtllm" and s["prefix_hit_ratio"] == 0.5 and s["goodput_requests_per_s"] > 0
    flag = CliRunner().invoke(
        app, ["estimate", "--workload", str(wl), "--gpu", "H200 SXM", "--engine", "vllm", "--format", "json"]
    )
    assert json.loads(flag.stdout)["serving"]["engine"] == "vllm"  # the flag overrides the file
    bad = tmp_path / "b.toml"
    bad.write_text('task = "train"\nmodel = "llama-3.2-1b"\n[serving]\nengine = "vllm"\n')
    r = CliRunner().invoke(app, ["estimate", "--workload", str(bad), "--gpu", "H200 SXM"])
    assert r.exit_code != 0 and "[serving] section is set" in r.output + str(r.exception)


def test_memory_is_what_the_running_requests_hold() -> None:
    # on-demand KV blocks: a running request holds its prompt and, on average, half its output
    e = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine="vllm", task="serve", prompt=128, gen=4096, concurrency=200),
        with_scaling=False,
    )
    s = e.serving
    assert s is not None and e.fits
    assert e.memory.kv_cache_bytes <= s["kv_pool_bytes"] + 1.0
    # open loop: the memory is that of the requests the rate keeps in flight, not of --concurrency's default 1
    closed = estimate("llama-3.1-8b", "H100 SXM", Request(engine="vllm", **SERVE, concurrency=64), with_scaling=False)
    rate = 0.5 * closed.serving["saturated_requests_per_s"]  # type: ignore[index]
    opened = estimate(
        "llama-3.1-8b", "H100 SXM", Request(engine="vllm", request_rate=rate, **SERVE), with_scaling=False
    )
    assert opened.layout["seqs_per_replica"] == 1 and opened.serving["running_requests"] > 10  # type: ignore[index]
    assert (
        opened.memory.kv_cache_bytes
        > 10
        * estimate(
            "llama-3.1-8b", "H100 SXM", Request(engine="vllm", **SERVE, concurrency=1), with_scaling=False
        ).memory.kv_cache_bytes
    )


def test_an_open_loop_rate_above_saturation_is_unstable_and_says_so() -> None:
    e = estimate("llama-3.1-8b", "H100 SXM", Request(engine="vllm", request_rate=1000.0, **SERVE), with_scaling=False)
    s = e.serving
    assert s is not None and not s["stable"]
    assert e.metrics["requests_per_s"] == pytest.approx(s["saturated_requests_per_s"])  # served, not offered
    assert e.to_dict()["ttft_s"] is None and any("grows without bound" in w for w in e.warnings)


@pytest.mark.parametrize(
    ("engine", "precision", "kv", "why"),
    [
        ("trtllm", "fp8", "fp8", "kv_cache_quant_algo"),
        ("trtllm", "nvfp4", "fp8", "kv_cache_quant_algo"),
        ("trtllm", "bf16", "bf16", "activations"),
        ("vllm", "fp8", "bf16", "--kv-cache-dtype auto"),
        ("sglang", "fp8", "bf16", "--kv-cache-dtype auto"),
    ],
)
def test_every_serve_estimate_states_its_kv_precision_and_why(engine: str, precision: str, kv: str, why: str) -> None:
    # TensorRT-LLM's KvCacheConfig.dtype 'auto' follows a ModelOpt checkpoint's FP8 KV; vLLM/SGLang 'auto' is
    # the model's dtype (docs: estimators.md, "KV-cache precision")

    gpu = "B200" if precision == "nvfp4" else "H200 SXM"
    e = estimate(
        "llama-3.1-8b", gpu, Request(task="serve", engine=engine, precision=precision, num_prompts=0, concurrency=8)
    )
    assert e.precision["kv"] == kv and why in e.precision["kv_basis"]
    assert e.precision["kv_bytes"] == (1.0 if kv == "fp8" else 2.0)
    asked = estimate(
        "llama-3.1-8b",
        gpu,
        Request(task="serve", engine=engine, precision=precision, num_prompts=0, kv_precision="fp8", concurrency=8),
    )
    assert asked.precision["kv"] == "fp8" and asked.precision["kv_basis"] == "--kv-precision"


@pytest.mark.parametrize("extra", [[], ["--num-prompts", "0"]])
def test_a_serve_estimate_says_what_its_ttft_counts(extra: list[str]) -> None:
    # published TTFTs at one to four clients exceed the engine's passes by a front-end cost per request (HTTP,
    # tokenization, hand-over, streaming; docs/estimators.md): the engine profile's frontend_s is in every TTFT, and
    # the estimate says so and names what it still leaves out
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "serve", "--concurrency", "4",
            *extra]
    runner = CliRunner()
    table = runner.invoke(app, args)
    front = engine_profiles()["vllm"].frontend_s
    assert table.exit_code == 0 and "engine passes + front end 10 ms" in " ".join(table.output.split())
    doc = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)
    assert doc["serving"]["frontend_s"] == front
    assert "client's own network path" in doc["serving"]["ttft_leaves_out"]


@pytest.mark.parametrize("num_prompts", [None, 0])
def test_the_front_end_cost_adds_to_ttft_and_latency_only(monkeypatch: pytest.MonkeyPatch,
                                                          num_prompts: int | None) -> None:
    """The front end's cost per request (engines.toml ``frontend_s``) lies outside the engine's passes: at one
    client it adds itself to the TTFT and the end-to-end latency of the replayed benchmark and of the steady state
    alike, and leaves the passes (TPOT) as they were."""
    req = Request(engine="vllm", num_prompts=num_prompts, **SERVE, concurrency=1)
    with_front = estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False)
    bare = {**engine_profiles(), "vllm": engine_profiles()["vllm"].model_copy(update={"frontend_s": 0.0})}
    monkeypatch.setattr(profiles_module, "engine_profiles", lambda: bare)
    without = estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False)
    front = engine_profiles()["vllm"].frontend_s
    assert front == pytest.approx(0.010)
    assert with_front.metrics["ttft_s"] - without.metrics["ttft_s"] == pytest.approx(front, rel=1e-3)
    assert with_front.metrics["e2e_s"] - without.metrics["e2e_s"] == pytest.approx(front, rel=1e-3)
    assert with_front.metrics["tpot_s"] == pytest.approx(without.metrics["tpot_s"], rel=1e-6)


def test_the_engine_memory_fraction_sizes_the_kv_pool() -> None:
    """vLLM's --gpu-memory-utilization (the engine's share of the card) sets the KV pool: weights, activations
    and overhead come off it (engine_profiles.kv_pool), so a quarter of an 80 GB card leaves a 7B model a small
    pool."""
    def pool(frac: float | None) -> float:
        est = estimate("qwen2.5-7b", "A100 SXM4 80GB",
                       Request(**SERVE, concurrency=64, num_prompts=0, memory_fraction=frac), with_scaling=False)
        assert est.serving is not None
        return float(est.serving["kv_pool_bytes"])

    default, half, quarter = pool(None), pool(0.5), pool(0.25)
    assert default == pytest.approx(pool(0.9))  # vLLM's profile default
    # the share moves the pool by the card's capacity × the difference (the rest is fixed)
    capacity = default - half
    assert half - quarter == pytest.approx(capacity * 0.25 / 0.4, rel=1e-6)
    assert 0 < quarter < half < default


def test_the_memory_fraction_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match="memory-fraction"):
        Request(**SERVE, memory_fraction=1.5)
    with pytest.raises(InputError, match="static"):
        Request(**SERVE, engine="static", memory_fraction=0.5)
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "serve", "--concurrency", "8",
            "--num-prompts", "0", "--format", "json"]
    r = CliRunner().invoke(app, [*args, "--memory-fraction", "0.3"])
    assert r.exit_code == 0, r.output
    small = json.loads(r.stdout)["serving"]["kv_pool_bytes"]
    assert small < json.loads(CliRunner().invoke(app, args).stdout)["serving"]["kv_pool_bytes"]
    assert main([*args, "--memory-fraction", "0"]) == 2
    assert "--memory-fraction must be in (0, 1]" in capsys.readouterr().err


def test_a_burst_larger_than_the_kv_pool_runs_in_it_and_fits() -> None:
    """1000 requests sent at once to one A100 40GB (Mistral-7B, prompts and outputs up to 256 / 4096 tokens): the
    engine admits what its KV pool holds and queues the rest, so the estimate fits, its KV cache is at most the pool,
    and the replayed TTFT carries the queue. Before 2026-12-07 the replay's mean running count (more requests than
    the slots at the mean occupancy, since requests early in their output hold less) times the mean KV per request
    overshot the pool and the estimate said it did not fit."""
    e = estimate("mistral-7b", "A100 PCIe 40GB", Request(task="serve", engine="sglang", prompt=256, gen=4096,
                                                         concurrency=1000, num_prompts=1000, length_low=1 / 256))
    assert e.fits
    assert e.serving is not None and e.metrics["kv_cache_bytes"] <= e.serving["kv_pool_bytes"] + 1.0
    assert e.metrics["ttft_s"] > 1.0  # most of the burst waits for the pool


def _burst(engine: str, gen: int) -> dict[str, Any]:
    e = estimate("mistral-7b", "A100 PCIe 40GB", Request(task="serve", engine=engine, prompt=256, gen=gen,
                                                         concurrency=1000, num_prompts=1000, length_low=1 / 256))
    assert e.serving is not None
    return dict(e.serving["replay"])


def test_sglang_admits_a_burst_only_as_far_as_its_reserve_allows() -> None:
    """SGLang reserves new_token_ratio of every running request's output left before it admits another (its
    PrefillAdder): a burst of 1000 with outputs up to 4096 tokens queues for admission, so fewer run at once and
    the median TTFT grows with the output length, where on-demand admission (vLLM) lets them all in and retracts.
    Mistral-7B v0.1 also checks the KV pool in tokens with sliding-window layers (window 4096): taken per token at a
    million tokens it looked unlimited, and every request ran at once (before 2026-12-07)."""
    short, long_ = _burst("sglang", 256), _burst("sglang", 4096)
    assert long_["mean_running"] < short["mean_running"] / 2
    assert long_["ttft_p50_s"] > 10 * short["ttft_p50_s"]
    vllm = _burst("vllm", 4096)
    assert vllm["mean_running"] > long_["mean_running"]  # on demand: more at once, and preempted
    assert vllm["preemptions"] > long_["preemptions"]


def test_sglang_pays_its_eager_prefill_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang dispatches its prefill passes without a CUDA graph, ``prefill_dispatch_s`` of CPU per engine kernel
    (engines.toml): a one-client TTFT of a 16-token prompt on Llama-3.1-8B (32 layers of 13 kernels) is at least
    that floor plus the front end, and without the engine's figure (a bare eager op's 14 µs) it falls below it."""
    req = Request(engine="sglang", task="serve", prompt=16, gen=64, concurrency=1, num_prompts=0)
    profile = engine_profiles()["sglang"]
    assert profile.prefill_dispatch_s == pytest.approx(70e-6)
    floor = 32 * 13 * profile.prefill_dispatch_s
    sglang = estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False)
    assert sglang.metrics["ttft_s"] >= floor + profile.frontend_s
    bare = {**engine_profiles(), "sglang": profile.model_copy(update={"prefill_dispatch_s": None})}
    monkeypatch.setattr(profiles_module, "engine_profiles", lambda: bare)
    without = estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False)
    assert without.metrics["ttft_s"] < floor
    assert without.metrics["tpot_s"] == pytest.approx(sglang.metrics["tpot_s"], rel=0.05)  # decode runs in a graph


def test_an_eager_prefill_pass_waits_for_what_the_pass_before_does_not_hide() -> None:
    """passes.pass_cost: a pass with a prompt chunk and an engine dispatch D pays max(0, D - its GPU work - the GPU
    time of the pass before); on an idle engine (nothing before) all that exceeds its own GPU work, behind a long
    enough pass nothing; a decode-only pass never."""
    from gpumatch.estimate.api import model_arch, resolve_gpu
    from gpumatch.estimate.calibration import DEFAULT_CALIBRATION
    from gpumatch.estimate.case import model_nums
    from gpumatch.estimate.options import build_case
    from gpumatch.estimate.passes import Scheduler, pass_cost, pass_tables

    arch = model_arch("llama-3.1-8b")
    case, _ = build_case(arch, resolve_gpu("h100-sxm"), Request(task="serve", engine="sglang"))
    m = model_nums(arch)
    dispatch = prefill_dispatch_s(m, case, engine_profiles()["sglang"])
    assert dispatch == pytest.approx(32 * 13 * 70e-6)
    k = pass_tables(m, case, DEFAULT_CALIBRATION, 16, 2048.0, 8192.0, dispatch)
    s = Scheduler("alternate", 8192, math.inf, math.inf, False, 0.0, 0.0)
    idle = pass_cost(k, s, 0, 0.0, [(0.0, 16.0)], hidden_s=0.0)
    gpu = idle.decode_s + idle.linear_s + idle.attention_s
    assert idle.dispatch_s == pytest.approx(dispatch - gpu) and idle.total_s == pytest.approx(dispatch)
    assert pass_cost(k, s, 0, 0.0, [(0.0, 16.0)], hidden_s=0.01).dispatch_s == pytest.approx(dispatch - gpu - 0.01)
    assert pass_cost(k, s, 0, 0.0, [(0.0, 16.0)], hidden_s=dispatch).dispatch_s == 0.0
    assert pass_cost(k, s, 8, 500.0, [], hidden_s=0.0).dispatch_s == 0.0
    assert engine_profiles()["vllm"].prefill_dispatch_s is None
    assert prefill_dispatch_s(m, case, engine_profiles()["vllm"]) == 0.0


def test_the_front_end_leaves_the_engines_saturated_rate_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A queue in front of a saturated engine keeps it fed whatever the front end takes per request: the open-loop
    saturated rate (short requests, where 10 ms is a large part of a request's life) is the same with and without
    ``frontend_s``; the TTFT at a rate below it is not."""
    req = Request(engine="vllm", task="serve", prompt=32, gen=8, request_rate=50.0)
    with_front = estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False)
    bare = {**engine_profiles(), "vllm": engine_profiles()["vllm"].model_copy(update={"frontend_s": 0.0})}
    monkeypatch.setattr(profiles_module, "engine_profiles", lambda: bare)
    without = estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False)
    assert with_front.serving is not None and without.serving is not None
    assert with_front.serving["saturated_requests_per_s"] == pytest.approx(
        without.serving["saturated_requests_per_s"], rel=1e-9)
    assert with_front.metrics["ttft_s"] - without.metrics["ttft_s"] == pytest.approx(0.010, rel=1e-3)
