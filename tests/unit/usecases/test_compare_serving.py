"""``bench compare A B`` of any two serving runs: a gpumatch ``bench serve`` run (against the loopback server)
against imported vLLM and GuideLLM files and against an older store's runs; levels pair by load, intervals come
from raw per-request samples where both runs keep them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpumatch.cli.app import main
from gpumatch.loadgen.bench import ServeRequest, run_serve_bench
from gpumatch.loadgen.loopback import Loopback, LoopbackConfig
from gpumatch.store import open_store
from gpumatch.store.imports import import_file
from gpumatch.usecases.compare_serving import compare_serving, enough_samples, ratio_interval, statistic_of

DATA = Path(__file__).resolve().parents[2] / "data"
VLLM = DATA / "imports" / "vllm-bench-serve.json"  # max_concurrency 8, 16 prompts with per-request arrays
GUIDELLM = DATA / "imports" / "guidellm-benchmarks.json"  # synchronous (c=1) and 4 req/s
OLD_STORE = DATA / "stores" / "serve-names-v1.sqlite"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Run 1: gpumatch bench serve at c=1 and c=8 (40 requests each); run 2: the vLLM file; run 3: GuideLLM."""
    path = str(tmp_path_factory.mktemp("cmp") / "s.sqlite")
    with Loopback(LoopbackConfig(itl_s=0.002, ttft_s=0.01)) as url:
        run = run_serve_bench(ServeRequest(url, "meta-llama/Llama-3.1-8B-Instruct", concurrency=(1, 8),
                                           num_prompts=40, prompt_tokens=16, output_tokens=8, store=path,
                                           selftest=False))
    assert run.run_id == 1
    assert import_file(VLLM, None, path).run_id == 2 and import_file(GUIDELLM, None, path).run_id == 3
    return path


def test_gpumatch_run_against_vllm_pairs_by_load_with_intervals(store: str) -> None:
    cmp = compare_serving(store, 1, 2)
    assert (cmp["source_a"], cmp["source_b"]) == ("gpumatch bench serve", "vllm bench serve")
    paired = {(r["level"], r["metric"]): r for r in cmp["rows"] if r["a"] is not None and r["b"] is not None}
    assert {lv for lv, _ in paired} == {"c=8"} and cmp["levels_only_in_a"] == ["c=1"]
    ttft = paired[("c=8", "ttft_mean_s")]
    with open_store(store, mode="read") as s:
        b = next(r.value for r in s.results(2) if r.metric == "ttft_mean_s")
        a = next(r.value for r in s.results(1) if r.metric == "ttft_mean_s" and r.config.get("max_concurrency") == 8)
    assert ttft["a"] == pytest.approx(a) and ttft["b"] == pytest.approx(b) and ttft["b_over_a"] == pytest.approx(b / a)
    # both keep raw samples: 40 gpumatch requests, 16 vLLM requests; the interval holds the ratio of the samples'
    # means (the fixture's arrays are not the ones behind its summary: their mean is 36.1 ms, the summary 41.2)
    assert (ttft["samples_a"], ttft["samples_b"]) == (40, 16)
    from_samples = float(np.mean(json.loads(VLLM.read_text())["ttfts"])) / a
    assert ttft["b_over_a_low"] < from_samples < ttft["b_over_a_high"]
    # vLLM's 41 ms TTFT against the loopback's ~10 ms: clearly different
    assert ttft["significant"] is True and ttft["b_over_a_low"] > 1.0
    # the median has an interval too; p99 is not paired (the gpumatch level has 40 requests, under the 100 a p99
    # needs, so bench serve stored none)
    assert paired[("c=8", "ttft_p50_s")]["b_over_a_low"] is not None and ("c=8", "ttft_p99_s") not in paired
    rate = paired[("c=8", "output_tokens_per_s")]
    assert rate["b_over_a"] is not None and rate["b_over_a_low"] is None  # a rate has no per-request samples


def test_gpumatch_run_against_guidellm_has_values_but_no_intervals(store: str) -> None:
    cmp = compare_serving(store, 1, 3)
    paired = [r for r in cmp["rows"] if r["a"] is not None and r["b"] is not None]
    assert {r["level"] for r in paired} == {"c=1"} and cmp["levels_only_in_b"] == ["4/s"]
    assert {"ttft_mean_s", "ttft_p50_s", "tpot_p90_s", "e2e_mean_s", "completed_requests"} <= {
        r["metric"] for r in paired}
    assert all(r["b_over_a_low"] is None for r in paired)  # GuideLLM's summary keeps no per-request samples


def test_cli_compare_table_json_csv(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "bench", "compare", "1", "2", "--store", store)
    assert code == 0 and "A: run 1, gpumatch bench serve" in out and "B: run 2, vllm bench serve" in out
    assert "c=8" in out and "TTFT mean" in out and "levels only in A: c=1" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, _ = _run(capsys, "bench", "compare", "1", "2", "--store", store, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["kind"] == "serve" and any(r["b_over_a_low"] is not None for r in doc["rows"])
    code, out, _ = _run(capsys, "bench", "compare", "1", "3", "--store", store, "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("load,level,metric,unit,a,b,b_over_a")


def test_serving_run_against_a_bench_run_is_refused(store: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    mine = str(tmp_path / "m.sqlite")
    shutil.copy(store, mine)
    with open_store(mine) as s:
        rid = s.begin_run("bench", "quick", {"gpu.name": "H200"}, {})
        s.add_result(rid, "decode_step_s", 0.01, "s", config={"case": "decode"})
        s.end_run(rid, "completed")
    code, out, err = _run(capsys, "bench", "compare", "1", str(rid), "--store", mine)
    assert code == 2 and "serving run" in err and len(err.strip().splitlines()) == 1 and not out


def test_a_model_recorded_in_both_and_different_needs_force(store: str, capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    old = str(tmp_path / "old.sqlite")
    shutil.copy(OLD_STORE, old)  # run 1 served 'test-model', run 2 (vLLM file) Llama-3.1-8B
    code, _, err = _run(capsys, "bench", "compare", "1", "2", "--store", old)
    assert code == 2 and "differ in model" in err and "--force" in err
    code, out, _ = _run(capsys, "bench", "compare", "1", "2", "--store", old, "--force", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["forced"] and doc["differing_fields"] == ["model"]
    assert doc["levels_only_in_a"] == ["c=1", "c=4"] and doc["levels_only_in_b"] == ["c=8"]


def test_older_store_runs_compare_under_canonical_names(tmp_path: Path) -> None:
    old = str(tmp_path / "old.sqlite")
    shutil.copy(OLD_STORE, old)
    cmp = compare_serving(old, 3, 4)  # GuideLLM and AIPerf imported as kind bench by the old code
    metrics = {r["metric"] for r in cmp["rows"]}
    assert "ttft_p50_s" in metrics and not any("median" in m or "e2el" in m for m in metrics)
    assert cmp["levels_only_in_b"] == ["c=8"]


def test_statistics_and_sample_rule() -> None:
    assert statistic_of("ttft_p99_9_s") == ("percentile", 99.9) and statistic_of("e2e_mean_s") == ("mean", 0.0)
    assert statistic_of("request_throughput_per_s") is None and statistic_of("tpot_std_s") is None
    assert enough_samples(100, "ttft_p99_s") and not enough_samples(99, "ttft_p99_s")
    assert enough_samples(10, "ttft_p90_s") and not enough_samples(4, "ttft_mean_s")


def test_interval_brackets_a_known_ratio() -> None:
    rng = np.random.default_rng(7)
    a = list(rng.lognormal(np.log(0.05), 0.2, 400))
    twice = [2.0 * x for x in rng.lognormal(np.log(0.05), 0.2, 400)]
    low, high = ratio_interval(a, twice, "ttft_p50_s") or (0.0, 0.0)
    assert low < 2.0 < high and low > 1.5
    same = list(rng.lognormal(np.log(0.05), 0.2, 400))
    low, high = ratio_interval(a, same, "ttft_mean_s") or (0.0, 0.0)
    assert low < 1.0 < high
    assert ratio_interval(a[:50], twice[:50], "ttft_p99_s") is None  # p99 from 50 samples: no interval
