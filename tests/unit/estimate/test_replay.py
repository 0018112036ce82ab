"""The closed-loop benchmark replay (gpumatch.estimate.replay): scheduler rules checked by hand on synthetic
pass costs, and the replay of real estimates against the steady state and Little's law."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from gpumatch.cli.app import app, main
from gpumatch.errors import InputError
from gpumatch.estimate import Request, estimate
from gpumatch.estimate.passes import PassTables, Scheduler
from gpumatch.estimate.replay import Benchmark, Stalled, _Loop, request_lengths, run

D, A, F = 0.010, 1e-5, 0.004
"""Synthetic costs: a decode step of any batch takes D s, a prompt token A s, a pass without decodes F s."""


def flat_costs(max_batch: int = 256) -> PassTables:
    return PassTables(decode_table=np.full((max_batch, 2), D), contexts=np.array([0.0, 1e7]),
                  prefill_x=np.array([0.0, 1e7]), attention_s=np.array([0.0, 0.0]),
                  linear_x=np.array([1.0, 1e7 + 1.0]), linear_s=np.array([0.0, 1e7 * A]), prefill_fixed_s=F,
                  micro_batches=lambda seqs: 1.0)


def sched(schedule: str = "mixed", budget: float = 2048, kv: float = 1e9, reserve: bool = False,
          max_seqs: float = math.inf, prefix_cache: bool = False) -> Scheduler:
    return Scheduler(schedule=schedule, token_budget=budget, max_seqs=max_seqs, kv_tokens=kv, reserve=reserve,
                     host_pass_s=0.0, host_seq_s=0.0, prefix_cache=prefix_cache)


def test_first_burst_queues_behind_the_token_budget() -> None:
    # 4 prompts of 1000 tokens at t = 0, budget 2048: pass 1 = two whole prompts + 48 tokens of the third (no
    # decodes: the weights' one-token prefill F); pass 2 = the two decodes + 952 + 1000 prompt tokens.
    r = run(flat_costs(), sched(), 4, Benchmark(4), 1000, 2)
    p1 = F + 2048 * A
    p2 = D + 1952 * A
    assert r.ttft_s == pytest.approx((2 * p1 + 2 * (p1 + p2)) / 4)
    assert r.first_wave_ttft_s == pytest.approx(r.ttft_s)
    assert r.passes == 3 and r.prefill_tokens_per_pass == pytest.approx(4000 / 3)


def test_tpot_is_the_mean_gap_after_the_first_token() -> None:
    # one client, prompt 100, 11 tokens: 1 prefill pass (F + 100 A) then 10 decode passes of D
    r = run(flat_costs(), sched(), 1, Benchmark(3), 100, 11)
    assert r.tpot_s == pytest.approx(D)
    assert r.ttft_s == pytest.approx(F + 100 * A)
    assert r.e2e_s == pytest.approx(F + 100 * A + 10 * D)
    assert r.requests_per_s == pytest.approx(1 / r.e2e_s)


def test_a_request_that_replaces_a_finished_one_waits_for_the_pass_in_flight() -> None:
    # two clients: request 0 (prompt 100, 3 tokens) ends while request 1 (prompt 100, 20 tokens) still decodes;
    # the client's next request (2) reaches the scheduler after the engine started the next pass with request 1
    # alone, so it joins the pass after: it waits one decode pass D, then its own mixed pass D + 100 A.
    prompts, outs = np.array([100, 100, 100]), np.array([3, 20, 3])
    loop = _Loop(flat_costs(), sched(), 2, prompts, outs)
    while loop.done < loop.n:
        loop.step()
    assert loop.ttft[0] == pytest.approx(F + 200 * A)  # the first burst: the engine was idle
    assert loop.ttft[2] == pytest.approx(D + (D + 100 * A))
    # with one client the engine is idle when the next request comes: it starts at once
    solo = _Loop(flat_costs(), sched(), 1, prompts, outs)
    while solo.done < solo.n:
        solo.step()
    assert solo.ttft[1] == pytest.approx(F + 100 * A) and solo.ttft[2] == pytest.approx(F + 100 * A)


def test_alternating_prefill_passes_pause_decoding() -> None:
    # SGLang: a new prompt gets its own pass (decodes wait), so a running request's TPOT carries the prefill
    # passes of the others; in vLLM's mixed passes the prompt rides along with the decodes.
    mixed = run(flat_costs(), sched("mixed"), 8, Benchmark(400, 0.5), 512, 64)
    alt = run(flat_costs(), sched("alternate"), 8, Benchmark(400, 0.5), 512, 64)
    assert alt.tpot_s > mixed.tpot_s
    assert alt.ttft_s < mixed.ttft_s * 1.5


def test_on_demand_kv_preempts_and_reserve_admits_fewer() -> None:
    # 16 clients of 1000 + 1000 tokens; the pool holds 8000 tokens: 4 whole requests
    demand = run(flat_costs(), sched(kv=8000), 16, Benchmark(64), 1000, 1000)
    reserve = run(flat_costs(), sched(kv=8000, reserve=True), 16, Benchmark(64), 1000, 1000)
    assert demand.preemptions > 0 and reserve.preemptions == 0
    assert reserve.mean_running <= 4 + 1e-9
    assert demand.mean_running > reserve.mean_running
    with pytest.raises(Stalled):
        run(flat_costs(), sched(kv=1500), 1, Benchmark(2), 1000, 1000)


def test_a_prefix_cache_spares_the_recompute_of_preempted_requests() -> None:
    # the same overloaded pool as above: with the engine's prefix cache (vLLM V1, SGLang) a preempted request
    # finds the part of its KV that later allocations have not evicted, so fewer prompt tokens are computed and
    # the benchmark ends sooner; never fewer than the prompts themselves
    wiped = run(flat_costs(), sched(kv=8000), 16, Benchmark(64), 1000, 1000)
    cached = run(flat_costs(), sched(kv=8000, prefix_cache=True), 16, Benchmark(64), 1000, 1000)
    assert wiped.preemptions > 0 and cached.preemptions > 0
    computed = (cached.prefill_tokens_per_pass * cached.passes, wiped.prefill_tokens_per_pass * wiped.passes)
    assert 64 * 1000 <= computed[0] < computed[1]
    assert cached.duration_s < wiped.duration_s and cached.ttft_s < wiped.ttft_s
    # a pool that never overflows preempts nothing: the cache changes nothing
    roomy = [run(flat_costs(), sched(prefix_cache=p), 8, Benchmark(32), 1000, 100) for p in (False, True)]
    assert roomy[0] == roomy[1]


def test_lengths_are_seeded_and_in_range() -> None:
    p, o = request_lengths(1024, 1024, Benchmark(5000, 0.8))
    assert p.min() >= 820 and p.max() <= 1024 and o.min() >= 820
    assert float(np.mean(p)) == pytest.approx(922, rel=0.01)
    again, _ = request_lengths(1024, 1024, Benchmark(5000, 0.8))
    assert (p == again).all()
    fixed, _ = request_lengths(1024, 1024, Benchmark(10))
    assert (fixed == 1024).all()


SERVE = {"task": "serve", "prompt": 1024, "gen": 512}


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "gpumatch"])
def test_long_replay_with_spread_lengths_approaches_the_steady_state(engine: str) -> None:
    # with many requests the first burst weighs little and spread lengths break the convoys: the replay's
    # TPOT comes to the steady state's (the same pass equations seen request by request)
    r = estimate(
        "llama-3.1-8b",
        "H100 SXM",
        Request(engine=engine, num_prompts=4000, length_low=0.5, **SERVE, concurrency=32),
        with_scaling=False,
    )
    s = r.serving
    assert s is not None and s["model"] == "benchmark-replay"
    assert r.metrics["tpot_s"] == pytest.approx(s["steady_state_tpot_s"], rel=0.10)


def test_little_law_over_the_replay() -> None:
    # C clients are busy until the last wave drains: sum of e2e over requests <= C x duration, and close to it
    r = estimate(
        "llama-3.1-8b",
        "H200 SXM",
        Request(num_prompts=800, length_low=0.8, **SERVE, concurrency=16),
        with_scaling=False,
    )
    rp = r.serving["replay"] if r.serving else {}
    busy = rp["e2e_s"] * rp["num_prompts"] / rp["duration_s"]
    assert 16 * (1 - 16 / 800) * 0.95 <= busy <= 16 + 1e-6


def test_the_first_burst_raises_the_mean_ttft_of_short_benchmarks() -> None:
    short = estimate(
        "llama-3.1-70b",
        "H200 SXM",
        Request(count=8, tp=8, num_prompts=64 * 10, length_low=0.8, **SERVE, concurrency=64),
        with_scaling=False,
    )
    steady = estimate(
        "llama-3.1-70b", "H200 SXM", Request(count=8, tp=8, num_prompts=0, **SERVE, concurrency=64), with_scaling=False
    )
    rp = short.serving["replay"] if short.serving else {}
    assert rp["first_wave_ttft_s"] > 5 * steady.metrics["ttft_s"]  # 64 prompts queue behind an 8192 budget
    assert short.metrics["ttft_s"] > steady.metrics["ttft_s"]
    assert steady.serving is not None and steady.serving["replay"] is None


def test_replay_options_are_checked() -> None:
    with pytest.raises(InputError, match="length-low"):
        estimate("llama-3.1-8b", "H100 SXM", Request(length_low=0.0, **SERVE, concurrency=8), with_scaling=False)
    with pytest.raises(InputError, match="serving engine"):
        estimate("llama-3.1-8b", "H100 SXM", Request(engine="static", num_prompts=100, **SERVE, concurrency=8),
                 with_scaling=False)


def test_an_open_loop_at_a_low_rate_finds_the_engine_idle() -> None:
    """Open loop (Benchmark.request_rate): 20 requests 100 s apart on average (a seeded Poisson process, the first
    at 0) never meet: each is prefilled alone at once (no wait) and decodes alone."""
    r = run(flat_costs(), sched(), 20, Benchmark(20, request_rate=0.01), 100, 11)
    assert r.ttft_s == pytest.approx(F + 100 * A) and r.tpot_s == pytest.approx(D)
    assert r.duration_s > 100.0 and r.mean_running < 0.01


def test_a_finite_open_loop_above_the_engines_rate_queues_and_drains() -> None:
    """Requests arrive faster than the engine ends them (one sequence at a time): the queue grows for the whole run,
    so the mean TTFT grows with the number of arrivals, and the run ends when the queue has drained."""
    one = sched(max_seqs=1)
    short = run(flat_costs(), one, 50, Benchmark(50, request_rate=100.0), 100, 11)
    long = run(flat_costs(), one, 200, Benchmark(200, request_rate=100.0), 100, 11)
    assert long.ttft_s > 3 * short.ttft_s
    per_request = F + 100 * A + 10 * D  # served one after the other
    assert long.duration_s == pytest.approx(200 * per_request, rel=0.02)


def test_an_estimate_replays_a_finite_open_loop_run() -> None:
    """--request-rate with --num-prompts replays the run's arrivals (the steady state without): at a rate above
    what one H100 serves, the steady state has no TTFT, the finite run has one that grows with its length."""
    def est(n: int | None) -> dict[str, float]:
        req = Request(task="serve", prompt=1024, gen=256, request_rate=300.0, num_prompts=n)
        return estimate("llama-3.1-8b", "H100 SXM", req, with_scaling=False).metrics

    assert not math.isfinite(est(None)["ttft_s"])
    assert 0 < est(100)["ttft_s"] < est(400)["ttft_s"] < math.inf


def test_cli_replay_flags_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "H100 SXM",
        "--task",
        "serve",
        "--concurrency",
        "16",
        "--num-prompts",
        "200",
        "--length-low",
        "0.8",
        "--format",
        "json",
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    rp = json.loads(r.stdout)["serving"]["replay"]
    assert rp["num_prompts"] == 200 and rp["length_low"] == 0.8
    assert rp["ttft_p99_s"] >= rp["ttft_p50_s"] > 0
    assert main([*args[:-4], "--length-low", "1.5"]) == 2
    assert "--length-low must be in (0, 1]" in capsys.readouterr().err


def test_the_replay_is_bounded_in_requests_and_steps() -> None:
    from gpumatch.estimate.replay import MAX_NUM_PROMPTS, MAX_PASSES, TooLarge

    with pytest.raises(TooLarge, match="requests"):
        run(flat_costs(), sched(), 4, Benchmark(MAX_NUM_PROMPTS + 1), 100, 10)
    # one client, a pass per request's prefill and one decode stretch each: 2 steps a request
    with pytest.raises(TooLarge, match="scheduling steps"):
        run(flat_costs(), sched(), 1, Benchmark(MAX_PASSES), 100, 10)


def test_huge_concurrency_falls_back_to_the_steady_state_and_says_so() -> None:
    # documented bound: batches up to 1e7 (README); 10 x C prompts are more than a replay holds
    e = estimate("llama-3.1-8b", "H100 SXM", Request(task="serve", prompt=1024, gen=256, concurrency=100_000))
    sv = e.serving
    assert sv is not None and sv["model"] == "steady-state" and "replay skipped" in sv["replay_skipped"]
    assert any("replay skipped" in w for w in e.warnings)
    assert math.isfinite(e.metrics["ttft_s"]) and math.isfinite(e.metrics["tpot_s"])


def test_an_overloaded_open_loop_runs_saturated_and_renders() -> None:
    # the queue grows (no TTFT) but the engine runs at its saturated pass: TPOT and rates stay finite
    e = estimate("llama-3.1-8b", "H100 SXM", Request(task="serve", request_rate=3000.0))
    assert e.serving is not None and e.serving["stable"] is False and not math.isfinite(e.metrics["ttft_s"])
    assert 0 < e.metrics["tpot_s"] < 1 and e.metrics["decode_tokens_per_s"] > 0
    res = CliRunner().invoke(
        app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "serve", "--request-rate", "3000"]
    )
    assert res.exit_code == 0, res.output
    assert "unbounded" in res.output and "Traceback" not in res.output


def test_a_burst_of_short_prompts_pays_their_flops_once_the_pass_is_compute_bound() -> None:
    """250 prompts of 200 tokens arriving together (NIM's published Llama-3.1-8B FP8 sweep on one H100 has this
    shape) hold 50,000 prompt tokens: 2 x 8.0e9 FLOPs each, 0.8 PFLOP, at least 0.40 s at the H100's dense FP8
    peak (1,979 TFLOP/s, NVIDIA H100 datasheet), so the first wave's mean TTFT is at least half of that (FCFS
    prefill, the n-th prompt done after n/250 of the work). A pass of many short prompts reads the weights once;
    charging each prompt its own marginal prefill over a one-token forward gave every prompt the weight-read slack
    again and the whole burst 37 ms."""
    d = json.loads(CliRunner().invoke(app, [
        "estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM5 80GB", "--precision", "fp8", "--task", "serve",
        "--engine", "trtllm", "--concurrency", "250", "--prompt", "200", "--gen", "200", "--num-prompts", "500",
        "--format", "json"]).stdout)
    bound_s = 250 * 200 * 2 * 8.03e9 / 1979e12 / 2
    assert d["serving"]["replay"]["first_wave_ttft_s"] >= bound_s


def test_the_table_of_a_finite_open_loop_run_names_its_arrivals() -> None:
    """The estimate table of ``--request-rate R --num-prompts N`` says the N arrivals were replayed and names no
    first burst (an open loop has none); the steady state beside it is unstable in the long run."""
    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "serve", "--prompt", "1024",
            "--gen", "256", "--request-rate", "300", "--num-prompts", "200"]
    out = " ".join(CliRunner().invoke(app, args, env={"COLUMNS": "80"}).output.split())
    assert "open loop, 300 requests/s, 200 arrivals replayed pass by pass" in out
    assert "unstable in the long run" in out and "first burst" not in out
