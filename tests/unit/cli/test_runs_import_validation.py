"""``gpumatch runs import`` refuses values no benchmark can have measured (issue 25, "Data"): negative,
non-finite, implausibly large, or a string where a number belongs. A file with some of them: the rest is stored,
one warning line names what was refused, the run's manifest keeps the list. A file with nothing else: exit 2,
nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.store import open_store
from gpumatch.store.validate import refusal

VLLM = Path(__file__).resolve().parents[2] / "data" / "imports" / "vllm-bench-serve.json"


def _edited(tmp_path: Path, **changes: object) -> Path:
    data = {**json.loads(VLLM.read_text()), **changes}
    f = tmp_path / "edited.json"
    f.write_text(json.dumps(data))
    return f


def test_refusal_by_unit() -> None:
    assert refusal("ttft_mean_s", 0.05, "s") is None
    assert refusal("request_throughput_per_s", -3.0, "1/s") == "negative (-3 1/s)"
    assert "implausibly large" in str(refusal("completed_requests", 1e30, "1"))
    assert "implausibly large" in str(refusal("ttft_mean_s", 1e308 * 1e-3, "s"))
    assert refusal("x", float("inf"), "s") == "not finite"
    assert refusal("x", "12", "s") == "a str, not a number"
    assert refusal("x", True, "1") == "a bool, not a number"


def test_bad_values_are_refused_named_and_the_rest_stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    f = _edited(tmp_path, request_throughput=-2.5, completed=1e30, mean_ttft_ms=1e308, median_tpot_ms="12.5")
    assert main(["runs", "import", str(f), "--store", str(store), "--format", "json"]) == 0
    out = capsys.readouterr()
    refused = {r["source_key"]: r["why"] for r in json.loads(out.out)["refused"]}
    assert set(refused) == {"request_throughput", "completed", "mean_ttft_ms", "median_tpot_ms"}
    assert refused["median_tpot_ms"] == "a str, not a number"
    warning = [ln for ln in out.err.splitlines() if "warning" in ln]
    assert len(warning) == 1 and "4 value(s) refused" in warning[0] and "request_throughput (negative" in warning[0]
    with open_store(store, mode="read") as st:
        run = st.runs()[0]
        metrics = {r.metric for r in st.results(run.run_id)}
        assert {"request_throughput_per_s", "completed_requests", "ttft_mean_s", "tpot_p50_s"}.isdisjoint(metrics)
        assert "ttft_p99_s" in metrics and "tpot_mean_s" in metrics
        assert {r["source_key"] for r in run.manifest["source"]["refused"]} == set(refused)


def test_a_file_with_nothing_storable_is_refused_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(VLLM.read_text())
    bad = {k: (-1.0 if isinstance(v, int | float) and not isinstance(v, bool) else v) for k, v in data.items()}
    bad["completed"] = 5
    f = tmp_path / "all-bad.json"
    f.write_text(json.dumps(bad))
    store = tmp_path / "s.sqlite"
    assert main(["runs", "import", str(f), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no value in it can be stored" in err and "negative" in err
    assert not store.exists()  # nothing was created either


def test_a_sound_file_refuses_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "import", str(VLLM), "--store", str(tmp_path / "s.sqlite"), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["refused"] == [] and "warning" not in out.err
