"""The serving part of ``gpumatch report``: a ``bench serve`` run measured over loopback HTTP (with replayed GPU
telemetry and gpumatch's prediction per level) and imported vLLM and GuideLLM runs, in one real SQLite store
(:mod:`tests.browser.serve_runs`); the data, the page and the 80-column text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from tests.browser.serve_runs import SLO_TPOT_S, SLO_TTFT_S, build_serve_store

from gpumatch.cli.app import main
from gpumatch.report.bench import config_text, value_text
from gpumatch.store import open_existing_store
from gpumatch.usecases.report import ReportQuery, build_report
from gpumatch.usecases.report_serving import DEFAULT_SLO, level_value, load_of


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "s.sqlite"
    build_serve_store(path)
    return path


def _serving(store: Path, runs: tuple[int, ...] = (1, 2, 3), **kw: Any) -> dict[str, Any]:
    data = build_report(ReportQuery(run_ids=runs, store=store, **kw))
    assert data["side_by_side"] is None  # serve runs are not bench cases side by side
    return data["serving"]


def test_levels_carry_measurement_prediction_energy_and_the_slo(store: Path) -> None:
    sv = _serving(store)
    assert sv["modes"] == ["concurrency", "rate"] and sv["energy"]
    assert sv["slo"]["ttft_p99_s"] == SLO_TTFT_S and "run 1's settings" in sv["slo"]["source"]
    ours, vllm, guidellm = sv["runs"]
    assert ours["card"] == "H200 SXM 141GB" and ours["tool"] == "gpumatch bench serve"
    assert vllm["card"] == guidellm["card"] == "unknown card" and guidellm["tool"].startswith("guidellm")
    assert [(lv["mode"], lv["load"]) for lv in ours["levels"]] == [
        ("concurrency", 1), ("concurrency", 4), ("concurrency", 16), ("rate", 25), ("rate", 100)]
    with open_existing_store(store) as st:
        stored = st.export_run(1)["results"]
    for lv in ours["levels"]:
        assert lv["completed_requests"] == 100 and lv["failed_requests"] == 0
        assert lv["ttft_p99_s"] >= lv["ttft_p50_s"] > 0 and lv["tpot_p99_s"] >= lv["tpot_p50_s"] > 0
        assert lv["energy_per_output_token_j"] > lv["energy_net_per_output_token_j"] > 0
        assert set(lv["predicted"]) == {"ttft_mean_s", "tpot_mean_s", "output_tokens_per_s",
                                        "request_throughput_per_s"}
        row = next(r for r in stored if r["metric"] == "output_tokens_per_s" and r["config"]["label"] == lv["label"])
        assert lv["predicted"]["output_tokens_per_s"] == row["extra"]["predicted"]
        want = (row["extra"]["predicted"] - row["value"]) / row["value"] * 100
        assert lv["error_pct"]["output_tokens_per_s"] == pytest.approx(want)
        ok = lv["ttft_p99_s"] <= SLO_TTFT_S and lv["tpot_p99_s"] <= SLO_TPOT_S
        assert lv["meets_slo"] is ok
    assert [lv["meets_slo"] for lv in guidellm["levels"]] == [True, False]  # 4/s: p99 TTFT 68.4 ms > 50 ms
    assert guidellm["levels"][1]["mean_concurrent_requests"] == pytest.approx(6.6912)
    assert vllm["levels"][0]["label"] == "c=8" and vllm["levels"][0]["peak_concurrent_requests"] == 8
    assert not vllm["levels"][0]["predicted"]


def test_slo_from_flags_else_documented_defaults(store: Path) -> None:
    default = _serving(store, (2, 3))["slo"]
    assert {k: default[k] for k in DEFAULT_SLO} == DEFAULT_SLO and "MLPerf" in default["source"]
    given = _serving(store, (2, 3), slo_ttft_ms=80.0, slo_tpot_ms=20.0)
    assert given["slo"]["ttft_p99_s"] == pytest.approx(0.08) and "--slo-ttft-ms" in given["slo"]["source"]
    assert all(lv["meets_slo"] for r in given["runs"] for lv in r["levels"])


def test_page_has_the_serving_plots_tables_and_no_none(store: Path, tmp_path: Path) -> None:
    page = tmp_path / "serve.html"
    assert main(["report", "--run", "1", "--run", "2", "--run", "3", "--store", str(store), "--html",
                 str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert re.findall(r'<figure class="plot" id="(serve-[^"]+)"', text) == [
        "serve-load-concurrency", "serve-energy-concurrency", "serve-load-rate", "serve-energy-rate", "serve-slo"]
    headings = re.findall(r"<(?:h[1-4]|th)[^>]*>(.*?)</(?:h[1-4]|th)>", text)
    assert headings and not [h for h in headings if "None" in h]
    assert "Run 3: unknown card, meta-llama/Llama-3.1-8B-Instruct, guidellm benchmark 0.4.0" in headings
    assert "SLO: p99 TTFT ≤ 50 ms and p99 TPOT ≤ 12 ms" in text
    # counts are integers, never a percentage; a serve result's configuration is its load, never empty
    counts = re.findall(r"<td>completed_requests</td><td>([^<]*)</td><td class=\"num\">([^<]*)</td>", text)
    assert ("c=8", "16") in counts and ("4/s", "120") in counts
    configs = re.findall(r"<td>serve</td><td>[a-z0-9_]+</td><td>([^<]*)</td>", text)
    assert configs and all(configs) and "c=16" in configs and "100/s poisson" in configs


def test_text_view_fits_80_columns_without_none(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["report", "--run", "1", "--run", "2", "--run", "3", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "None" not in out
    assert "Run 1: H200 SXM 141GB, llama-3.1-8b, gpumatch bench serve" in out
    assert re.search(r"^c=16 +100/0 ", out, re.M) and re.search(r"^4/s +120/0 .* misses$", out, re.M)
    assert "pred tok/s" in out  # the prediction is kept before in-flight and req/s


def test_a_bad_slo_flag_is_one_line_and_exit_2(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--run", "2", "--store", str(store), "--slo-ttft-ms", "-5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--slo-ttft-ms must be a positive number" in err


def test_one_accessor_reads_every_stored_name() -> None:
    assert level_value({"ttft_median_s": 0.02}, "ttft_p50_s") == 0.02  # bench serve's name
    assert level_value({"ttft_p50_s": 0.03, "ttft_median_s": 0.02}, "ttft_p50_s") == 0.03  # canonical first
    assert level_value({"output_throughput": 900.0}, "output_tokens_per_s") == 900.0
    assert level_value({"ttft_p99_s": None, "x": 1}, "ttft_p99_s") is None
    assert level_value({"ttft_p99_s": float("nan")}, "ttft_p99_s") is None


def test_load_of_each_tool() -> None:
    assert load_of({"mode": "rate", "request_rate": 25.0, "label": "25/s poisson"}) == ("rate", 25.0, "25/s poisson")
    assert load_of({"case": "serve", "request_rate": "inf", "max_concurrency": 8}) == ("concurrency", 8.0, "c=8")
    assert load_of({"case": "serve", "strategy": "constant", "request_rate": 4.0}) == ("rate", 4.0, "4/s")
    assert load_of({"case": "serve", "strategy": "throughput"}) == ("other", None, "throughput")


def test_counts_and_serve_configs_in_the_shared_value_texts() -> None:
    assert value_text(1600.0, "1", "completed_requests") == "1,600"
    assert value_text(6.6912, "1", "mean_concurrent_requests") == "6.69"
    assert value_text(0.05, "1", "error_rate") == "5 %"
    assert value_text(23.67, "1/s", "request_throughput") == "23.7 /s"
    assert config_text({"case": "serve", "request_rate": "inf", "max_concurrency": 8}) == "c=8"
    assert config_text({"case": "serve", "strategy": "constant", "request_rate": 4.0}) == "4/s"


def test_levels_without_a_p99_have_no_frontier_and_say_why(store: Path) -> None:
    from gpumatch.report.serve_page import serving_html

    sv = _serving(store, (2,))
    assert sv["tails"]
    for lv in sv["runs"][0]["levels"]:  # as a run of fewer than 100 requests stores them
        lv["ttft_p99_s"] = lv["tpot_p99_s"] = None
    page = serving_html({**sv, "tails": False})
    assert 'id="serve-slo"' not in page and "No SLO frontier" in page and 'id="serve-load-concurrency"' in page


def test_csv_of_serve_runs_is_one_row_per_level(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import csv
    import io

    capsys.readouterr()
    assert main(["report", "--run", "1", "--run", "3", "--store", str(store), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["run_id"], r["label"]) for r in rows] == [
        ("1", "c=1"), ("1", "c=4"), ("1", "c=16"), ("1", "25/s poisson"), ("1", "100/s poisson"), ("3", "c=1"),
        ("3", "4/s")]
    assert float(rows[0]["predicted_output_tokens_per_s"]) > 0 and rows[-1]["predicted_output_tokens_per_s"] == ""
    assert rows[-1]["meets_slo"] in ("False", "false") and float(rows[-1]["ttft_p99_s"]) == pytest.approx(0.0684)
