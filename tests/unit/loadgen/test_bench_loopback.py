"""``gpumatch bench serve``: the load generator against a real aiohttp server (the loopback, in its own process).

No test asserts a speed: timing figures are checked only against the loopback's own fixed schedule, with bounds
that hold on a slow machine (a 5 ms interval is checked to be at least 5 ms, never at most)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("aiohttp")

from gpumatch.loadgen.bench import ServeRequest, run_serve_bench
from gpumatch.loadgen.client import Target, target_url
from gpumatch.loadgen.loopback import Loopback, LoopbackConfig
from gpumatch.loadgen.metrics import RequestRecord, Slo
from gpumatch.loadgen.runner import Level, run_level
from gpumatch.loadgen.workload import arrivals, synthetic
from gpumatch.usecases.stored_serving import load_serve_run

SRC = str(Path(__file__).resolve().parents[3] / "src")


@pytest.fixture(scope="module")
def loopback() -> str:
    with Loopback(LoopbackConfig(itl_s=0.002, ttft_s=0.01)) as url:
        yield url


def _req(url: str, store: Path, **kw: object) -> ServeRequest:
    base = {"num_prompts": 24, "prompt_tokens": 16, "output_tokens": 8, "store": store, "selftest": False}
    return ServeRequest(url, "test-model", **{**base, **kw})  # type: ignore[arg-type]


def test_closed_loop_ladder_measures_the_loopback_schedule(loopback: str, tmp_path: Path) -> None:
    run = run_serve_bench(_req(loopback, tmp_path / "s.sqlite", concurrency=(1, 4)))
    assert run.status == "completed" and [lv.level.label for lv in run.levels] == ["c=1", "c=4"]
    for lv in run.levels:
        s = lv.summary
        assert s["completed"] == 24 and s["failed"] == 0
        assert s["total_output_tokens"] == 24 * 8 and s["output_len_mismatches"] == 0
        assert s["mean_ttft_ms"] >= 10.0 and s["mean_e2el_ms"] >= 10.0 + 7 * 2.0  # the loopback schedule: a floor
        assert s["p99_ttft_ms"] is None and s["n_ttft"] == 24 and s["p90_ttft_ms"] is not None
    # closed loop: at most C requests in flight at any time
    recs = run.levels[1].records
    for r in recs:
        assert sum(1 for o in recs if o.sent_s <= r.sent_s < o.end_s) <= 4


def test_poisson_arrivals_are_seeded_and_scheduled_not_sent() -> None:
    a, b = arrivals(200, 50.0, "poisson", 7), arrivals(200, 50.0, "poisson", 7)
    assert a == b and a != arrivals(200, 50.0, "poisson", 8) and a[0] == 0.0
    assert 200 / a[-1] == pytest.approx(50.0, rel=0.25)
    assert arrivals(3, 2.0, "constant", 0) == [0.0, 0.5, 1.0]


def test_open_loop_latency_counts_from_the_scheduled_time(loopback: str) -> None:
    t = Target(target_url(loopback, "chat"), "m", api="chat")
    specs = synthetic(30, 8, 4, 1.0, 3)
    run = run_level(t, Level(0, "rate", 40.0, "poisson"), specs, 3, 0)
    want = arrivals(30, 40.0, "poisson", 3)
    assert sorted(r.scheduled_s for r in run.records) == pytest.approx(want)
    for r in run.records:
        assert r.ok and r.sent_s >= r.scheduled_s - 1e-3
        assert r.e2el_s == pytest.approx(r.end_s - r.scheduled_s)


def test_output_length_mismatch_is_detected(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001, usage_delta=-3)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(2,), num_prompts=6))
    s = run.levels[0].summary
    assert s["output_len_mismatches"] == 6 and s["total_output_tokens"] == 6 * 5
    assert all(r.length_mismatch for r in run.levels[0].records)


def test_http_errors_are_counted_and_stored(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.001, error_every=3)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(1,), num_prompts=9))
    s = run.levels[0].summary
    assert (s["completed"], s["failed"]) == (6, 3) and s["error_rate"] == pytest.approx(1 / 3)
    stored = load_serve_run(tmp_path / "s.sqlite", run.run_id or 0, raw=True)
    assert [f["error_class"] for f in stored["failures"]] == ["http_500"]
    assert sum(r["status"] == "error" for r in stored["levels"][0]["requests"]) == 3


def test_percentiles_recomputed_from_stored_raw_records(loopback: str, tmp_path: Path) -> None:
    run = run_serve_bench(_req(loopback, tmp_path / "s.sqlite", concurrency=(8,), num_prompts=120,
                               slo=Slo(ttft_s=0.5)))
    stored = load_serve_run(tmp_path / "s.sqlite", run.run_id or 0, raw=True)
    lv = stored["levels"][0]
    recs = [RequestRecord.from_dict(r) for r in lv["requests"]]
    assert len(recs) == 120
    ttft = [(r.chunk_s[0] - r.scheduled_s) * 1000 for r in recs]
    itl = [(b - a) * 1000 for r in recs for a, b in zip(r.chunk_s, r.chunk_s[1:], strict=False)]
    tpot = [((r.end_s - r.scheduled_s) - (r.chunk_s[0] - r.scheduled_s)) * 1000 / (r.output_tokens - 1)
            for r in recs]
    assert lv["p99_ttft_ms"] == pytest.approx(float(np.percentile(ttft, 99)))
    assert lv["median_ttft_ms"] == pytest.approx(float(np.median(ttft)))
    assert lv["p99_itl_ms"] == pytest.approx(float(np.percentile(itl, 99)))
    assert lv["mean_tpot_ms"] == pytest.approx(float(np.mean(tpot)))
    assert lv["request_throughput"] == pytest.approx(120 / max(r.end_s for r in recs))
    assert lv["request_goodput"] == pytest.approx(sum(t <= 500 for t in ttft) / max(r.end_s for r in recs))


def test_multi_token_chunks_keep_tpot_per_token(tmp_path: Path) -> None:
    with Loopback(LoopbackConfig(itl_s=0.002, tokens_per_chunk=4)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", concurrency=(2,), num_prompts=4, output_tokens=16))
    s = run.levels[0].summary
    assert s["tokens_per_chunk"] == pytest.approx(15 / 3)
    assert s["mean_itl_ms"] > 3 * s["mean_tpot_ms"]  # ITL is per chunk of 4 tokens, TPOT per token


def test_self_test_flags_an_impossible_lag_bound(loopback: str, tmp_path: Path) -> None:
    from gpumatch.loadgen.selftest import Limits

    ok = run_serve_bench(_req(loopback, tmp_path / "a.sqlite", rates=(20.0,), selftest=True, selftest_itl_s=0.002))
    assert ok.levels[0].check is not None and ok.levels[0].check.requests == 24
    bound = run_serve_bench(_req(loopback, tmp_path / "b.sqlite", rates=(200.0,), selftest=True,
                                 selftest_itl_s=0.002, limits=Limits(max_lag_s=-1.0)))
    lv = bound.levels[0]
    assert lv.client_bound and lv.check is not None and lv.check.reasons[0].startswith("lag")
    assert lv.to_dict()["client_bound"] is True


def test_json_uses_vllm_field_names(loopback: str, tmp_path: Path) -> None:
    from gpumatch.loadgen.bench import write_json

    run = run_serve_bench(_req(loopback, tmp_path / "s.sqlite", concurrency=(2,), gpu="h200-sxm",
                               arch="llama-3.1-8b"))
    path = write_json(run, tmp_path / "r.json")
    doc = json.loads(path.read_text())
    lv = doc["levels"][0]
    for key in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_throughput", "output_throughput", "total_token_throughput", "request_goodput",
                "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
                "max_concurrency"):
        assert key in lv, key
    assert doc["backend"] == "openai" and doc["model_id"] == "test-model" and "ttft" in doc["definitions"]
    assert lv["predicted"]["mean_tpot_ms"] > 0 and lv["ratio"]["output_throughput"] > 0
    assert len(lv["requests"]) == 24


def _cli(args: list[str], env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "80", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "gpumatch", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def test_server_killed_mid_run_saves_the_run_and_exits_1(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    with Loopback(LoopbackConfig(itl_s=0.002, die_after=10)) as url:
        got = _cli(["bench", "serve", "--endpoint", url, "--model", "m", "-c", "2", "-c", "4", "-n", "40",
                    "--prompt-tokens", "8", "--output-tokens", "20", "--no-selftest", "--warmup", "0", "--store",
                    str(store)])
    assert got.returncode == 1, got.stderr
    errors = [ln for ln in got.stderr.splitlines() if "error" in ln]
    assert len(errors) == 1 and "server went away" in errors[0] and "run 1 saved as failed" in errors[0]
    stored = load_serve_run(store, 1, raw=True)
    assert stored["run"]["status"] == "failed" and len(stored["levels"]) == 1
    lv = stored["levels"][0]
    assert lv["failed"] >= 1 and lv["completed"] >= 8 and "connection_refused" in lv["errors"]
    assert lv["completed"] + lv["failed"] + lv["not_sent"] == 40
    assert {f["error_class"] for f in stored["failures"]} >= {"connection_refused", "not_sent"}


def test_cli_refuses_bad_input_and_a_dead_endpoint(tmp_path: Path) -> None:
    got = _cli(["bench", "serve", "--endpoint", "localhost:1", "--model", "m"])
    assert got.returncode == 2 and "not an http(s) URL" in got.stderr
    got = _cli(["bench", "serve", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--store",
                str(tmp_path / "s.sqlite")])
    assert got.returncode == 2 and "no server answers" in got.stderr
    got = _cli(["bench", "serve", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--search"])
    assert got.returncode == 2 and "--search needs an SLO" in got.stderr


def test_cli_run_then_show_and_list(loopback: str, tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    got = _cli(["bench", "serve", "--endpoint", loopback, "--model", "m", "--rate", "30", "-n", "12",
                "--prompt-tokens", "8", "--output-tokens", "4", "--no-selftest", "--store", store])
    assert got.returncode == 0, got.stderr
    assert "30/s poisson" in got.stdout and all(len(ln) <= 80 for ln in got.stdout.splitlines())
    shown = _cli(["bench", "show", "1", "--store", store, "--format", "json"])
    doc = json.loads(shown.stdout)
    assert doc["levels"][0]["request_rate"] == 30.0 and len(doc["levels"][0]["requests"]) == 12
    listed = _cli(["bench", "list", "--store", store, "--format", "json"])
    assert json.loads(listed.stdout)[0]["kind"] == "serve"


def test_search_says_when_no_rate_meets_the_slo(tmp_path: Path) -> None:
    """A loopback whose TTFT grows with load does not exist; instead an SLO no request can meet (TTFT below the
    loopback's fixed 10 ms) makes every probe fail, and the search says no rate met it."""
    with Loopback(LoopbackConfig(itl_s=0.001, ttft_s=0.01)) as url:
        run = run_serve_bench(_req(url, tmp_path / "s.sqlite", rates=(80.0,), num_prompts=6, output_tokens=2,
                                   slo=Slo(ttft_s=0.001), search=True, search_steps=1))
    assert run.max_rate_meeting_slo is None
    rates = [lv.level.value for lv in run.levels]
    assert rates == [80.0, 40.0, 20.0, 10.0, 5.0] and all(lv.level.phase == "search" for lv in run.levels[1:])
    assert not math.isnan(run.levels[0].summary["mean_ttft_ms"])
