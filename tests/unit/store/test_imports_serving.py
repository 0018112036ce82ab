"""GuideLLM benchmarks.json and AIPerf profile_export_aiperf.json imported as runs under vLLM's SI names, once per
file, detected by content, refused with one line when damaged, and compared with a gpumatch run at the same load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.errors import InputError
from gpumatch.files import parse_json_object
from gpumatch.store import open_store
from gpumatch.store.formats import detect
from gpumatch.store.imports import import_file

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
GUIDELLM = DATA / "guidellm-benchmarks.json"
AIPERF = DATA / "aiperf-profile-export.json"
VLLM = DATA / "vllm-bench-serve.json"
RATE4 = {"case": "serve", "strategy": "constant", "request_rate": 4.0}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_guidellm_report_becomes_one_run_with_a_level_per_benchmark(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    out = import_file(GUIDELLM, None, store)
    assert out.created and out.format == "guidellm" and out.results == 2 * 59
    again = import_file(GUIDELLM, None, store)
    assert (again.created, again.run_id, again.run_uuid) == (False, out.run_id, out.run_uuid)
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        assert run.status == "completed" and run.started_at.startswith("2025-12-05T10:15:30.25")
        assert run.duration_s == pytest.approx(61.5)
        assert run.manifest["source"]["tool_version"] == "0.4.0"
        assert run.manifest["model"] == "meta-llama/Llama-3.1-8B-Instruct"
        res = {(r.metric, json.dumps(r.config, sort_keys=True)): r for r in s.results(run.run_id)}
    sync = json.dumps({"case": "serve", "strategy": "synchronous", "max_concurrency": 1}, sort_keys=True)
    rate = json.dumps(RATE4, sort_keys=True)
    ttft = res[("ttft_mean_s", rate)]
    assert ttft.value == pytest.approx(0.0413) and ttft.unit == "s"
    assert ttft.extra == {"source_key": "benchmarks[1].metrics.time_to_first_token_ms.successful.mean",
                          "source_value": 41.3, "source_unit": "ms"}
    # GuideLLM's inter-token latency is vLLM's TPOT; its TPOT (TTFT included) has a name of its own
    assert res[("tpot_p99_s", rate)].value == pytest.approx(0.01492)
    assert res[("e2e_per_output_token_mean_s", rate)].value == pytest.approx(0.01309)
    assert res[("e2e_p99_9_s", sync)].value == pytest.approx(1.2801)  # request_latency: seconds already
    assert res[("ttft_p50_s", sync)].value == pytest.approx(0.0245)  # median, not percentiles.p50 twice
    assert res[("output_tokens_per_s", rate)].value == pytest.approx(511.1)
    assert res[("completed_requests", sync)].value == 23.0 and res[("failed_requests", rate)].value == 0.0


def test_aiperf_export_becomes_a_run_in_seconds_once(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    out = import_file(AIPERF, None, store)
    assert out.created and out.format == "aiperf" and out.results == 3 * 11 + 7
    assert not import_file(AIPERF, None, store).created
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        res = {r.metric: r for r in s.results(run.run_id)}
        assert run.started_at.startswith("2026-12-04T11:02:40.118204") and run.duration_s == pytest.approx(16.3095)
        assert run.manifest["model"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert "--concurrency 8" in run.manifest["source"]["cli_command"]
    assert res["ttft_p90_s"].value == pytest.approx(0.0607) and res["ttft_p90_s"].config == {
        "case": "serve", "max_concurrency": 8}
    assert res["tpot_mean_s"].extra == {"source_key": "inter_token_latency.avg", "source_value": 10.29,
                                        "source_unit": "ms"}
    assert res["e2e_std_s"].value == pytest.approx(0.07831)
    assert res["request_throughput_per_s"].value == pytest.approx(5.8861)
    assert res["duration_s"].value == pytest.approx(16.3095) and res["failed_requests"].value == 0.0


def test_formats_are_detected_by_content_and_can_be_forced(tmp_path: Path) -> None:
    found = [detect(parse_json_object(p.read_text(), p.name)) for p in (GUIDELLM, AIPERF, VLLM)]
    assert found == ["guidellm", "aiperf", "vllm"]
    with pytest.raises(InputError, match="without benchmarks"):
        import_file(VLLM, "guidellm", str(tmp_path / "s.sqlite"))
    with pytest.raises(InputError, match="without latency records"):
        import_file(GUIDELLM, "aiperf", str(tmp_path / "s.sqlite"))


@pytest.mark.parametrize(("name", "text", "message"), [
    ("cut.json", GUIDELLM.read_text()[:5000], "cut.json"),
    ("nometrics.json", '{"benchmarks": [{"metrics": {}}]}', "without latency metrics"),
    ("bench.json", '{"benchmarks": [{"metrics": {"request_latency": 3}}, 7]}', "benchmark 1 has no metrics"),
    ("unit.json", '{"time_to_first_token": {"unit": "fortnights", "avg": 1.0}}', "unknown time unit"),
])
def test_damaged_files_are_one_line_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                 text: str, message: str) -> None:
    bad = tmp_path / name
    bad.write_text(text)
    code, _, err = _run(capsys, "runs", "import", str(bad), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and message in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize(("source", "config", "ttft"), [(GUIDELLM, RATE4, 0.0413),
                                                         (AIPERF, {"case": "serve", "max_concurrency": 8}, 0.04592)])
def test_imported_run_beside_a_gpumatch_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: Path,
                                            config: dict[str, object], ttft: float) -> None:
    store = str(tmp_path / "s.sqlite")
    with open_store(store) as s:
        rid = s.begin_run("bench", "serve llama-3.1-8b (gpumatch)", {"gpu.name": "H200"}, {"case": "serve"})
        s.add_result(rid, "ttft_mean_s", 0.040, "s", config=config)
        s.end_run(rid, "completed")
    code, out, err = _run(capsys, "runs", "import", str(source), "--store", store, "--format", "json")
    assert code == 0 and "stored as serve run 2" in err
    code, out, _ = _run(capsys, "bench", "compare", "1", "2", "--store", store, "--force", "--format", "json")
    assert code == 0
    (paired,) = [r for r in json.loads(out)["rows"] if r["a"] is not None and r["b"] is not None]
    assert paired["metric"] == "ttft_mean_s" and paired["b"] == pytest.approx(ttft)
    assert paired["b_over_a"] == pytest.approx(ttft / 0.040)


def test_imports_into_postgresql_once(pg_url: str) -> None:
    first = [import_file(p, None, pg_url) for p in (GUIDELLM, AIPERF)]
    again = [import_file(p, None, pg_url) for p in (GUIDELLM, AIPERF)]
    assert [o.created for o in first + again] == [True, True, False, False]
    with open_store(pg_url, mode="read") as s:
        runs = s.runs()
        assert sorted(r.manifest["source"]["format"] for r in runs) == ["aiperf", "guidellm"]
        guidellm = next(r for r in runs if r.manifest["source"]["format"] == "guidellm")
        rate = [r for r in s.results(guidellm.run_id) if r.metric == "ttft_p99_s" and r.config == RATE4]
        assert len(rate) == 1 and rate[0].value == pytest.approx(0.0684)
