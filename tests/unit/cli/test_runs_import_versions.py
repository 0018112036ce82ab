"""Result files as the tools really write them, across versions (tests/data/imports/real/ and versions/, sources in
their SOURCES.md): each imported with ``gpumatch runs import`` into a real SQLite store and checked value by value
against the file (ms -> s, GB/s -> B/s, Unix s -> UTC); unknown versions refused in one line; an imported serving
level set beside a gpumatch ``bench serve`` run by ``bench compare`` and ``report``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpumatch.cli.app import main
from gpumatch.loadgen.runner import Level
from gpumatch.store import open_store

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
REAL_GUIDELLM_03 = DATA / "real" / "guidellm-0.3-benchmarks_stripped.json"
V = DATA / "versions"
VLLM_2024 = V / "vllm-benchmark-serving-2024.json"
VLLM_APPEND = V / "vllm-bench-serve-append-2026.jsonl"
GUIDELLM_07 = V / "guidellm-0.7-benchmarks.json"
GENAI_CONFIG = V / "genai-perf-config-profile_export_genai_perf.json"
GENAI_FLAT = V / "genai-perf-flat-args-profile_export_genai_perf.json"
NCCL_V1 = V / "nccl-tests-v1-all-reduce.json"
NCCL_V3 = V / "nccl-tests-v3-all-reduce-per-iter.json"
AIPERF = DATA / "aiperf-profile-export.json"
EVENTS: list[Any] = []


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _import(capsys: pytest.CaptureFixture[str], path: Path, store: str) -> str:
    """Import through the CLI (format detected from the content); the detected format."""
    code, out, err = _run(capsys, "runs", "import", str(path), "--store", store, "--format", "json")
    assert code == 0, err
    return str(json.loads(out)["format"])


def _only_run(store: str) -> tuple[Any, dict[tuple[str, str], Any]]:
    """The store's one run and its results by (metric, load) with load = the result config's level; the run's
    events are in ``EVENTS``."""
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        rows = s.results(run.run_id)
        events = s.events(run.run_id)
    by: dict[tuple[str, str], Any] = {}
    for r in rows:
        cfg = r.config or {}
        load = ",".join(f"{k}={cfg[k]}" for k in ("max_concurrency", "request_rate", "size_bytes", "placement")
                        if k in cfg)
        by[(r.metric, load)] = r
    EVENTS[:] = events
    return run, by


def test_real_guidellm_0_3_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vllm-project/guidellm's own test asset (a report GuideLLM 0.2/0.3 wrote, stripped of its samples)."""
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, REAL_GUIDELLM_03, store) == "guidellm"
    run, res = _only_run(store)
    lv = "max_concurrency=1"
    # metrics.time_to_first_token_ms.successful.mean = 16.792535781860348 ms
    assert res[("ttft_mean_s", lv)].value == pytest.approx(16.792535781860348e-3, rel=1e-12)
    assert res[("ttft_p50_s", lv)].value == pytest.approx(16.38054847717285e-3, rel=1e-12)  # .median
    assert res[("ttft_p99_s", lv)].value == pytest.approx(21.281957626342773e-3, rel=1e-12)  # .percentiles.p99
    assert res[("tpot_mean_s", lv)].value == pytest.approx(4.941609043733832e-3, rel=1e-12)  # inter_token_latency_ms
    assert res[("e2e_per_output_token_mean_s", lv)].value == pytest.approx(4.90300272307966e-3, rel=1e-12)
    assert res[("e2e_mean_s", lv)].value == pytest.approx(0.6444743664368339, rel=1e-12)  # request_latency, s
    assert res[("request_throughput_per_s", lv)].value == pytest.approx(1.5481806532737452, rel=1e-12)
    assert res[("output_tokens_per_s", lv)].value == pytest.approx(198.13346751788123, rel=1e-12)
    # this version keeps request_totals beside metrics, not in them
    assert [res[(m, lv)].value for m in ("completed_requests", "failed_requests", "incomplete_requests")] == [46, 0, 1]
    assert res[("completed_requests", lv)].extra["source_key"] == "benchmarks[0].request_totals.successful"
    assert res[("ttft_mean_s", lv)].config == {"case": "serve", "strategy": "synchronous", "max_concurrency": 1}
    assert (run.manifest["model"], run.manifest["target"], run.config["profile"]) == (
        "example_model", "example_target", "sweep")  # benchmarks[0].worker, benchmarks[0].args.profile
    assert run.started_at.startswith("2025-06-05T20:59:28.18")  # start_time 1749157168.1827004
    assert run.duration_s == pytest.approx(1749157198.1799018 - 1749157168.1827004)


def test_guidellm_0_7_report_reads_config_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, GUIDELLM_07, store) == "guidellm"
    run, res = _only_run(store)
    # level 8: TTFT samples 35 + 0.2k ms (k < 240) -> mean 35 + 0.2 x 119.5 = 58.9 ms; ITL 7.5 + 0.005k -> 8.0975 ms
    assert res[("ttft_mean_s", "max_concurrency=8")].value == pytest.approx(0.0589)
    assert res[("tpot_mean_s", "max_concurrency=8")].value == pytest.approx(0.0080975)
    assert res[("ttft_mean_s", "max_concurrency=1")].value == pytest.approx(0.02195)  # 20 + 0.1 x 19.5 ms
    assert res[("request_throughput_per_s", "max_concurrency=8")].value == pytest.approx(240 / 30)
    assert res[("completed_requests", "max_concurrency=8")].value == 240
    assert run.manifest["model"] == "Qwen/Qwen3-8B" and run.manifest["target"] == "http://localhost:8000"
    assert run.manifest["source"]["schema_version"] == 2 and run.manifest["source"]["tool_version"] == "0.7.3"
    assert run.config == {"case": "serve", "profile": "concurrent", "levels": 2}
    assert run.started_at.startswith("2026-07-16T08:20:00") and run.duration_s == pytest.approx(61.0)


def test_vllm_2024_benchmark_serving_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The 2024 script's misspelt ``request_inthroughput`` is still detected and stored as the request rate."""
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, VLLM_2024, store) == "vllm"
    run, res = _only_run(store)
    load = "request_rate=inf"  # every result of this file
    assert res[("request_throughput_per_s", load)].value == pytest.approx(1000 / 57.41)
    assert res[("request_throughput_per_s", load)].extra["source_key"] == "request_inthroughput"
    assert res[("input_tokens_per_s", load)].value == pytest.approx(215196 / 57.41)
    assert res[("ttft_mean_s", load)].value == pytest.approx(13.47186)
    assert res[("tpot_p99_s", load)].value == pytest.approx(0.24105)
    assert ("failed_requests", load) not in res and ("e2e_mean_s", load) not in res  # the script wrote neither
    assert run.started_at.startswith("2024-06-11T09:29:17.59")  # date 09:30:15 is the save time, minus 57.41 s


def test_vllm_append_result_file_is_one_run_with_a_level_per_line(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, VLLM_APPEND, store) == "vllm"
    code, _, err = _run(capsys, "runs", "import", str(VLLM_APPEND), "--store", store)
    assert code == 0 and "imported before: run 1" in err and "nothing written" in err
    run, res = _only_run(store)
    assert res[("ttft_mean_s", "max_concurrency=8,request_rate=inf")].value == pytest.approx(0.0384)
    assert res[("itl_p99_s", "max_concurrency=8,request_rate=inf")].value == pytest.approx(0.0113)
    assert res[("ttft_p50_s", "max_concurrency=1,request_rate=inf")].value == pytest.approx(0.0211)
    assert res[("output_tokens_per_s", "max_concurrency=1,request_rate=inf")].value == pytest.approx(128 * 8 / 7.2)
    assert not [m for m, _ in res if "queue" in m]  # client queue time has no gpumatch name
    assert [len(e.data["e2els_s"]) for e in EVENTS] == [8, 16]  # 'latencies', kept without --save-detailed
    assert run.manifest["source"]["appended_results"] == 2
    assert run.started_at.startswith("2026-07-16T10:14:54.8") and run.duration_s == pytest.approx(33.2)


@pytest.mark.parametrize(("path", "model", "load", "endpoint"), [
    (GENAI_CONFIG, "meta-llama/Llama-3.1-8B-Instruct", "request_rate=4.0", "chat"),
    (GENAI_FLAT, "gpt2", "max_concurrency=8", "kserve")])
def test_genai_perf_exports(tmp_path: Path, capsys: pytest.CaptureFixture[str], path: Path, model: str, load: str,
                            endpoint: str) -> None:
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, path, store) == "aiperf"
    run, res = _only_run(store)
    assert run.manifest["source"]["tool"] == "genai-perf profile" and run.manifest["model"] == model
    assert run.manifest["endpoint_type"] == endpoint and run.manifest["streaming"] is True
    assert res[("ttft_mean_s", load)].value == pytest.approx(0.05231)  # 52.31 ms
    assert res[("tpot_p99_s", load)].value == pytest.approx(0.0164)  # inter_token_latency.p99 16.4 ms
    assert res[("e2e_p50_s", load)].value == pytest.approx(2.038)
    assert res[("request_throughput_per_s", load)].value == pytest.approx(3.912)
    assert (("completed_requests", load) in res) is (path == GENAI_CONFIG)  # request_count: newer releases only


def test_aiperf_schema_1_1_keeps_version_and_reads_a_zoned_start(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """AIPerf 2026 exports carry ``schema_version``/``aiperf_version`` and ``count``/``sum`` in each record."""
    doc = json.loads(AIPERF.read_text())
    doc.update(schema_version="1.1", aiperf_version="0.9.0", start_time="2026-07-01T10:00:00+02:00")
    doc["time_to_first_token"].update(count=96, sum=4408.3)
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(doc))
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, path, store) == "aiperf"
    run, res = _only_run(store)
    assert run.manifest["source"]["schema_version"] == "1.1" and run.manifest["source"]["tool_version"] == "0.9.0"
    assert run.manifest["source"]["tool"] == "aiperf profile"
    assert run.started_at.startswith("2026-07-01T08:00:00")
    assert not [m for m, _ in res if m.endswith(("_count_s", "_sum_s"))]


def test_nccl_tests_v1_misspelt_average(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, NCCL_V1, store) == "nccl-tests"
    run, res = _only_run(store)
    avg = res[("nccl_avg_bus_bandwidth_bytes_per_s", "")]
    assert avg.value == pytest.approx(95.3009e9) and avg.extra["source_key"] == "average_bus_bandwidith.bandwidith"
    last = "size_bytes=8589934592,placement=in_place"
    assert res[("nccl_bus_bandwidth_bytes_per_s", last)].value == pytest.approx(94.80e9)
    assert res[("nccl_time_s", "size_bytes=536870912,placement=out_of_place")].value == pytest.approx(10052e-6)
    assert run.config["ranks"] == 8 and run.manifest["hosts"] == ["node-0", "node-1"]
    assert run.started_at.startswith("2025-11-20T14:03:11") and run.duration_s == 41.0


def test_nccl_tests_v3_per_iteration_statistics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, NCCL_V3, store) == "nccl-tests"
    run, res = _only_run(store)
    where = "size_bytes=536870912,placement=out_of_place"
    assert res[("nccl_iter_time_p50_s", where)].value == pytest.approx(1806.7e-6)
    assert res[("nccl_iter_time_min_s", where)].value == pytest.approx(1770.566e-6)
    assert res[("nccl_iter_time_p99_s", where)].extra["source_key"] == "out_of_place_per_iter.p99_us"
    assert res[("nccl_bus_bandwidth_bytes_per_s", where)].value == pytest.approx(586.06e9)
    assert res[("nccl_avg_bus_bandwidth_bytes_per_s", "")].value == pytest.approx(745.53e9)
    assert run.config["ranks"] == 72 and len(res) == 5 * 2 * (3 + 7) + 1


@pytest.mark.parametrize(("source", "edit", "message"), [
    (NCCL_V3, lambda d: {**d, "version": 4}, "nccl-tests JSON version 4 is not one gpumatch reads"),
    (GUIDELLM_07, lambda d: {**d, "metadata": {**d["metadata"], "version": 3}},
     "GuideLLM report schema version 3 is not one gpumatch reads"),
    (AIPERF, lambda d: {**d, "schema_version": "2.0"}, "AIPerf export schema_version '2.0' is not one gpumatch reads")])
def test_unknown_versions_are_one_line_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: Path,
                                                    edit: Any, message: str) -> None:
    bad = tmp_path / source.name
    bad.write_text(json.dumps(edit(json.loads(source.read_text()))))
    code, _, err = _run(capsys, "runs", "import", str(bad), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and message in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "s.sqlite").exists()


def test_truncated_nccl_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """nccl-tests before fdc6090f (2026-06) left the file unterminated when a run failed early."""
    bad = tmp_path / "ar.json"
    bad.write_text(NCCL_V1.read_text()[:1500])
    code, _, err = _run(capsys, "runs", "import", str(bad), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and "not valid JSON" in err and len(err.strip().splitlines()) <= 2


def _gpumatch_serve_run(store: str) -> None:
    """A gpumatch ``bench serve`` run as its levels are stored (config = ``Level.to_dict()``, no ``case``)."""
    with open_store(store) as s:
        rid = s.begin_run("bench", "serve qwen3-8b (gpumatch)", {"gpu.name": "NVIDIA H200"}, {"case": "serve"})
        for level, ttft in ((Level(0, "concurrency", 1), 0.020), (Level(1, "concurrency", 8), 0.040),
                            (Level(2, "rate", 4.0), 0.030)):
            s.add_result(rid, "ttft_p50_s", ttft, "s", config=level.to_dict())
            s.add_result(rid, "output_tokens_per_s", 900.0, "token/s", config=level.to_dict())
        s.end_run(rid, "completed")


@pytest.mark.parametrize(("source", "ttft_c8"), [(VLLM_APPEND, 0.035), (GUIDELLM_07, None)])
def test_imported_levels_beside_a_gpumatch_serve_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     source: Path, ttft_c8: float | None) -> None:
    store = str(tmp_path / "s.sqlite")
    _gpumatch_serve_run(store)
    _import(capsys, source, store)
    with open_store(store, mode="read") as s:
        imported = {json.dumps(r.config, sort_keys=True): r.value for r in s.results(2) if r.metric == "ttft_p50_s"}
    want_c8 = ttft_c8 if ttft_c8 is not None else next(v for k, v in imported.items() if '"max_concurrency": 8' in k)
    code, out, _ = _run(capsys, "bench", "compare", "1", "2", "--store", store, "--force", "--format", "json")
    assert code == 0
    paired = {(r["metric"], r["key"]): r for r in json.loads(out)["rows"] if r["a"] is not None and r["b"] is not None}
    row = paired[("ttft_p50_s", "serve ttft_p50_s max_concurrency=8")]
    assert row["a"] == 0.040 and row["b"] == pytest.approx(want_c8) and row["b_over_a"] == pytest.approx(want_c8 / 0.04)
    assert ("ttft_p50_s", "serve ttft_p50_s max_concurrency=1") in paired
    assert not [k for k in paired if "request_rate" in k[1]]  # nothing imported at 4 req/s
    # the report gives serving runs their own section, level by level, one column of levels per run
    code, out, _ = _run(capsys, "report", "--run", "1", "--run", "2", "--store", store, "--format", "json")
    assert code == 0
    runs = {r["run_id"]: r for r in json.loads(out)["serving"]["runs"]}
    c8 = {rid: next(lv for lv in r["levels"] if lv["label"] == "c=8") for rid, r in runs.items()}
    assert c8[1]["ttft_p50_s"] == 0.040 and c8[2]["ttft_p50_s"] == pytest.approx(want_c8)


def _first_vllm_level() -> dict[str, Any]:
    return dict(json.loads(VLLM_APPEND.read_text().splitlines()[0]))


def test_vllm_zero_means_are_not_measurements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM writes np.mean([] or 0): a non-streaming endpoint gives TTFT and ITL of 0 for every statistic."""
    doc = _first_vllm_level()
    doc.update({k: 0.0 for k in doc if k.endswith(("_ttft_ms", "_itl_ms"))})
    path = tmp_path / "nonstreaming.json"
    path.write_text(json.dumps(doc))
    store = str(tmp_path / "s.sqlite")
    assert _import(capsys, path, store) == "vllm"
    run, res = _only_run(store)
    assert not [m for m, _ in res if m.startswith(("ttft_", "itl_"))]
    assert res[("tpot_mean_s", "max_concurrency=1,request_rate=inf")].value == pytest.approx(0.0069)
    assert run.manifest["source"]["unmeasured"] == ["itl", "ttft"]


def test_vllm_run_where_every_request_failed_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _first_vllm_level()
    doc.update(completed=0, failed=8, **{k: 0.0 for k in doc if k.endswith("_ms")})
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(doc))
    code, _, err = _run(capsys, "runs", "import", str(path), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and "every request of this vLLM run failed" in err and len(err.strip().splitlines()) <= 2


def test_guidellm_summary_without_successful_requests_is_skipped(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """GuideLLM writes a zero summary (count 0) when no request of a status exists: no measurement."""
    doc = json.loads(REAL_GUIDELLM_03.read_text())
    doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["count"] = 0
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    store = str(tmp_path / "s.sqlite")
    _import(capsys, path, store)
    _, res = _only_run(store)
    assert not [m for m, _ in res if m.startswith("ttft_")] and ("tpot_mean_s", "max_concurrency=1") in res


@pytest.mark.parametrize(("name", "text", "message"), [
    ("run.pytorch.json", json.dumps([{"benchmark": {"name": "vLLM benchmark", "extra_info": {"args": {}}},
                                      "model": {"name": "m"}, "metric": {"name": "median_ttft_ms",
                                                                         "benchmark_values": [21.1]}}]),
     "vLLM's PyTorch-benchmark-format companion file"),
    ("profile_export.jsonl", "\n".join(json.dumps({"metadata": {"request_start_ns": 100 + i, "request_end_ns": 200},
                                                   "metrics": {"request_latency": {"value": 100, "unit": "ms"}}})
                                       for i in range(2)), "AIPerf per-request records")])
def test_companion_files_name_the_right_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str,
                                             message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = _run(capsys, "runs", "import", str(path), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and message in err and len(err.strip().splitlines()) <= 2


@pytest.mark.parametrize("path", [NCCL_V1, NCCL_V3])
def test_nccl_units_agree_with_the_published_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  path: Path) -> None:
    """The rows are real runs' console tables (versions/README.md): stored time (s) and algorithm bandwidth (B/s)
    satisfy algbw = size / time, which holds only with nccl-tests' time in us and GB = 1e9 B (not 2**30)."""
    store = str(tmp_path / "s.sqlite")
    _import(capsys, path, store)
    _, res = _only_run(store)
    sizes = {int(load.split(",")[0].split("=")[1]) for m, load in res if m == "nccl_time_s"}
    assert len(sizes) == 5
    for size in sizes:
        for placement in ("out_of_place", "in_place"):
            where = f"size_bytes={size},placement={placement}"
            t, alg = res[("nccl_time_s", where)].value, res[("nccl_alg_bandwidth_bytes_per_s", where)].value
            assert alg == pytest.approx(size / t, rel=0.01)
