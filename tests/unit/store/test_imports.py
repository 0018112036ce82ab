"""Other tools' result files imported as runs (vLLM bench serve, nccl-tests -J) and shown beside gpumatch runs;
``runs push|pull|merge`` from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.metric_names import si_name, vllm_key
from gpumatch.store import open_store
from gpumatch.store.imports import import_file

DATA = Path(__file__).resolve().parents[2] / "data" / "imports"
VLLM = DATA / "vllm-bench-serve.json"
NCCL = DATA / "nccl-tests-all-reduce.json"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_name_mapping_round_trips() -> None:
    for key in ("mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "std_e2el_ms", "p99.9_ttft_ms",
                "request_throughput", "output_throughput", "total_token_throughput"):
        mapped = si_name(key)
        assert mapped is not None and vllm_key(mapped[0]) == key
    assert si_name("median_e2el_ms") == ("e2e_p50_s", "s", 1e-3)
    assert si_name("generated_texts") is None


def test_vllm_file_becomes_a_run_in_si_units_once(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    out = import_file(VLLM, None, store)
    assert out.created and out.format == "vllm"
    again = import_file(VLLM, None, store)
    assert (again.created, again.run_id, again.run_uuid) == (False, out.run_id, out.run_uuid)
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        res = {r.metric: r for r in s.results(run.run_id)}
        assert run.status == "completed" and run.started_at.startswith("2026-12-04T10:15:28.16")  # date - duration
        assert run.duration_s == pytest.approx(1.84)
        assert run.manifest["source"]["format"] == "vllm"
        assert run.manifest["model"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert res["ttft_mean_s"].value == pytest.approx(0.0412) and res["ttft_mean_s"].unit == "s"
        assert res["ttft_mean_s"].extra == {"source_key": "mean_ttft_ms", "source_value": 41.2, "source_unit": "ms"}
        assert res["tpot_p50_s"].value == pytest.approx(0.01038) and res["e2e_p99_s"].value == pytest.approx(0.7123)
        assert res["output_tokens_per_s"].value == pytest.approx(556.52)
        assert res["failed_requests"].value == 0.0
        assert res["ttft_mean_s"].config == {"case": "serve", "burstiness": 1.0, "endpoint_type": "openai",
                                             "max_concurrency": 8, "num_prompts": 16, "request_rate": "inf"}
        (ev,) = s.events(run.run_id)
        assert ev.kind == "requests" and len(ev.data["ttfts_s"]) == 16 and "generated_texts" not in ev.data


def test_nccl_tests_file_in_bytes_per_second(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    out = import_file(NCCL, None, store)
    assert out.format == "nccl-tests" and out.results == 5 * 2 * 3 + 1
    with open_store(store, mode="read") as s:
        (run,) = s.runs()
        assert run.name == "nccl-tests all_reduce" and run.manifest["gpu.names"] == ["NVIDIA H200"]
        bus = [r for r in s.results(run.run_id) if r.metric == "nccl_bus_bandwidth_bytes_per_s"
               and r.config and r.config["placement"] == "out_of_place"]
        assert [r.config["size_bytes"] for r in bus if r.config][-1] == 134217728
        assert bus[-1].value == pytest.approx(141.83e9) and bus[-1].unit == "B/s"
        assert run.duration_s == 6.0


def test_unknown_file_is_a_clear_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    code, _, err = _run(capsys, "runs", "import", str(bad), "--store", str(tmp_path / "s.sqlite"))
    assert code == 2 and "not a result file gpumatch can import" in err and "--from" in err
    assert not (tmp_path / "s.sqlite").exists()


def test_imported_vllm_run_beside_a_gpumatch_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.sqlite")
    with open_store(store) as s:  # a gpumatch serve run, recorded under the same names
        rid = s.begin_run("bench", "serve llama-3.1-8b (gpumatch)", {"gpu.name": "H200"}, {"case": "serve"})
        cfg = {"case": "serve", "burstiness": 1.0, "endpoint_type": "openai", "max_concurrency": 8,
               "num_prompts": 16, "request_rate": "inf"}
        s.add_result(rid, "ttft_mean_s", 0.0398, "s", config=cfg)
        s.add_result(rid, "output_tokens_per_s", 570.0, "token/s", config=cfg)
        s.end_run(rid, "completed")
    code, out, err = _run(capsys, "runs", "import", str(VLLM), "--store", store, "--format", "json")
    assert code == 0 and "stored as serve run 2" in err and json.loads(out)["run_id"] == 2
    code, out, _ = _run(capsys, "bench", "compare", "1", "2", "--store", store, "--force", "--format", "json")
    assert code == 0
    rows = {r["metric"]: r for r in json.loads(out)["rows"]}
    assert rows["ttft_mean_s"]["a"] == 0.0398 and rows["ttft_mean_s"]["b"] == pytest.approx(0.0412)
    assert rows["output_tokens_per_s"]["b_over_a"] == pytest.approx(556.52 / 570.0)


def test_push_pull_merge_commands(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, pooled = (str(tmp_path / n) for n in ("a.sqlite", "b.sqlite", "pooled.sqlite"))
    import_file(VLLM, None, a)
    import_file(NCCL, None, b)
    code, _, err = _run(capsys, "runs", "push", "--store", a, "--to", pg_url)
    assert code == 0 and "1 run(s) copied" in err
    code, _, err = _run(capsys, "runs", "pull", "--from", pg_url, "--store", b)
    assert code == 0 and "1 run(s) copied" in err and "0 already there" in err
    code, out, _ = _run(capsys, "runs", "merge", a, b, pg_url, "--into", pooled, "--format", "json")
    assert code == 0 and [r["copied"] for r in json.loads(out)] == [1, 1, 0]
    code, out, _ = _run(capsys, "runs", "list", "--store", pg_url, "--format", "json")
    assert code == 0 and len(json.loads(out)) == 1
    shutil.copy(pooled, tmp_path / "copy.sqlite")
    code, out, _ = _run(capsys, "runs", "merge", str(tmp_path / "copy.sqlite"), "--into", pooled, "--format", "json")
    assert code == 0 and json.loads(out)[0]["already_there"] == 2


def test_export_runs_as_json_csv_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import csv

    import pyarrow.parquet as pq

    store = str(tmp_path / "s.sqlite")
    import_file(VLLM, None, store)
    import_file(NCCL, None, store)
    code, _, err = _run(capsys, "runs", "export", "1", "2", "--store", store, "--format", "json", "-o",
                        str(tmp_path / "r.json"))
    assert code == 0 and "2 run(s) written" in err
    runs = json.loads((tmp_path / "r.json").read_text())
    assert [r["run"]["manifest"]["source"]["format"] for r in runs] == ["vllm", "nccl-tests"]
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"r.{fmt}"
        assert _run(capsys, "runs", "export", "1", "2", "--store", store, "--format", fmt, "-o", str(out))[0] == 0
        rows = (list(csv.DictReader(out.open())) if fmt == "csv" else pq.read_table(out).to_pylist())
        assert len(rows) == 26 + 31 and {r["source_format"] for r in rows} == {"vllm", "nccl-tests"}
        ttft = next(r for r in rows if r["metric"] == "ttft_mean_s")
        assert float(ttft["value"]) == pytest.approx(0.0412) and ttft["unit"] == "s"
    code, _, err = _run(capsys, "runs", "export", "1", "--store", store, "--format", "csv", "-o",
                        str(tmp_path / "r.csv"))
    assert code == 2 and "already exists" in err
