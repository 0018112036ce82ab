"""Serving runs of every tool land as one kind (``serve``) under one naming, older stores still read, AIPerf 0.13
keeps its model and load, and ``runs import`` / ``bench import`` say which command and option to use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.loadgen.bench import stored_figures
from gpumatch.metric_names import SERVE_KIND, canonical_metric, si_name, source_tool
from gpumatch.store import open_store
from gpumatch.store.imports import import_file
from gpumatch.usecases.stored_serving import is_serving_run, load_serve_run, serving_run

DATA = Path(__file__).resolve().parents[2] / "data"
OLD_STORE = DATA / "stores" / "serve-names-v1.sqlite"
VLLM = DATA / "imports" / "vllm-bench-serve.json"
GUIDELLM = DATA / "imports" / "guidellm-benchmarks.json"
AIPERF = DATA / "imports" / "aiperf-profile-export.json"
AIPERF_013 = DATA / "imports" / "versions" / "aiperf-0.13-profile_export_aiperf.json"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def old_store(tmp_path: Path) -> str:
    """A copy of the store the code before one naming wrote (tests/data/stores/README.md)."""
    path = tmp_path / "old.sqlite"
    shutil.copy(OLD_STORE, path)
    return str(path)


def test_bench_serve_writes_the_names_imports_write() -> None:
    """Every figure bench serve stores has the name the vLLM importer gives the same vLLM key."""
    for key, metric, unit, factor in stored_figures():
        mapped = si_name(key)
        if mapped is not None:
            assert (metric, unit, factor) == mapped, key
    names = {m for _, m, _, _ in stored_figures()}
    assert {"ttft_p50_s", "e2e_p99_s", "request_throughput_per_s", "output_tokens_per_s", "error_fraction",
            "completed_requests"} <= names
    assert not names & {"ttft_median_s", "e2el_p99_s", "request_throughput", "output_throughput", "error_rate"}


def test_old_names_read_as_the_canonical_ones(old_store: str) -> None:
    with open_store(old_store, mode="read") as s:
        stored = {r.metric for r in s.results(1)}
    assert "ttft_median_s" in stored and "e2el_p90_s" in stored  # what the old code wrote
    got = {r["metric"] for r in serving_run(old_store, 1)["results"]}
    assert {canonical_metric(m) for m in stored} == got
    assert {"ttft_p50_s", "e2e_p90_s", "request_throughput_per_s", "output_tokens_per_s", "error_fraction"} <= got
    assert not got & {"ttft_median_s", "e2el_p90_s", "request_throughput", "output_throughput", "error_rate"}
    # the alias map and the write side agree: every old name maps onto a name bench serve stores now
    now = {m for _, m, _, _ in stored_figures()}
    assert got <= now


def test_old_bench_kind_imports_are_serving_runs(old_store: str) -> None:
    with open_store(old_store, mode="read") as s:
        assert [r.kind for r in sorted(s.runs(), key=lambda r: r.run_id)] == ["serve", "bench", "bench", "bench"]
    assert all(is_serving_run(old_store, r) for r in (1, 2, 3, 4))
    assert serving_run(old_store, 3)["source"] == "guidellm benchmark"
    assert serving_run(old_store, 1)["source"] == "gpumatch bench serve"


@pytest.mark.parametrize(("source", "tool"), [(VLLM, "vllm bench serve"), (GUIDELLM, "guidellm benchmark"),
                                              (AIPERF, "aiperf profile")])
def test_imports_land_as_serve_runs(tmp_path: Path, source: Path, tool: str) -> None:
    store = str(tmp_path / "s.sqlite")
    out = import_file(source, None, store)
    assert out.kind == SERVE_KIND and out.missing == ()
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        assert run.kind == SERVE_KIND and source_tool(run.manifest) == tool
        assert s.runs(SERVE_KIND)[0].run_id == out.run_id


def test_nccl_tests_stays_a_bench_run(tmp_path: Path) -> None:
    assert import_file(DATA / "imports" / "nccl-tests-all-reduce.json", None, str(tmp_path / "s.sqlite")).kind \
        == "bench"


def test_imported_run_shows_its_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    rid = import_file(GUIDELLM, None, store).run_id
    doc = load_serve_run(store, rid)
    by_label = {lv["label"]: lv for lv in doc["levels"]}
    assert set(by_label) == {"c=1", "4/s"} and doc["source"] == "guidellm benchmark"
    assert by_label["4/s"]["mean_ttft_ms"] == pytest.approx(41.3) and by_label["c=1"]["completed"] == 23
    code, out, _ = _run(capsys, "bench", "show", str(rid), "--store", store)
    assert code == 0 and "4/s" in out and "c=1" in out and "measured by guidellm benchmark" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_aiperf_013_keeps_model_and_concurrency(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    out = import_file(AIPERF_013, None, store)
    assert out.format == "aiperf" and out.missing == ()
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        assert run.manifest["model"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert run.manifest["source"]["tool_version"] == "0.13.0"
        assert "--concurrency 8" in run.manifest["source"]["cli_command"]  # from run_info
        ttft = [r for r in s.results(run.run_id) if r.metric == "ttft_p90_s"]
    assert ttft[0].config == {"case": "serve", "max_concurrency": 8}  # the profiling phase, not the warm-up


def test_missing_model_and_load_are_stated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(AIPERF_013.read_text())
    doc["input_config"] = {"endpoint": {"urls": ["http://localhost:8000"]}, "phases": [{"name": "profiling"}]}
    bare = tmp_path / "profile_export_aiperf.json"
    bare.write_text(json.dumps(doc))
    store = str(tmp_path / "s.sqlite")
    code, out, err = _run(capsys, "runs", "import", str(bare), "--store", store, "--format", "json")
    assert code == 0 and json.loads(out)["missing"] == ["model", "load (concurrency or request rate)"]
    assert "does not say its model or its load (concurrency or request rate)" in err
    with open_store(store, mode="read") as s:
        assert s.runs()[0].manifest["source"]["missing"] == ["model", "load (concurrency or request rate)"]


def test_runs_import_takes_the_file_format_from_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    code, out, err = _run(capsys, "runs", "import", str(VLLM), "--store", str(store), "--format", "vllm")
    assert code == 2 and "--from vllm" in err and len(err.strip().splitlines()) == 1 and not out
    assert not store.exists()
    code, out, _ = _run(capsys, "runs", "import", str(VLLM), "--store", str(store), "--from", "vllm",
                        "--format", "json")
    assert code == 0 and json.loads(out)["format"] == "vllm"
    code, _, err = _run(capsys, "runs", "import", str(GUIDELLM), "--store", str(store), "--source-format",
                        "guidellm", "--format", "csv")
    assert code == 0 and "guidellm file stored as serve run 2" in err
    code, _, err = _run(capsys, "runs", "import", str(AIPERF), "--store", str(store), "--from", "vllm")
    assert code == 2 and "without latency metrics" in err  # --from forces the format


@pytest.mark.parametrize("source", [VLLM, GUIDELLM, AIPERF, DATA / "imports" / "versions" /
                                    "vllm-bench-serve-append-2026.jsonl"])
def test_bench_import_points_tool_files_to_runs_import(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       source: Path) -> None:
    store = tmp_path / "s.sqlite"
    code, out, err = _run(capsys, "bench", "import", str(source), "--store", str(store))
    assert code == 2 and f"gpumatch runs import {source}" in err and len(err.strip().splitlines()) == 1
    assert not out and not store.exists()


def test_vllm_appended_levels_keep_their_own_samples(tmp_path: Path) -> None:
    """Each line of an --append-result file is a level; its per-request latencies stay with its load."""
    source = DATA / "imports" / "versions" / "vllm-bench-serve-append-2026.jsonl"
    lines = [json.loads(x) for x in source.read_text().splitlines() if x.strip()]
    store = str(tmp_path / "s.sqlite")
    run = serving_run(store, import_file(source, None, store).run_id)
    for line in lines:
        load = f"max_concurrency={line['max_concurrency']}"
        assert sorted(run["samples"][load]["e2e"]) == sorted(x for x in line["latencies"] if x > 0)
