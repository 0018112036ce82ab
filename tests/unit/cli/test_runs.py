"""`gpumatch runs list|show` over a store with a completed, a failed and an interrupted run."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from gpumatch.cli.app import main
from gpumatch.store import open_store


@pytest.fixture
def filled(store_path: Path) -> dict[str, int]:
    with open_store(store_path) as s:
        ok = s.begin_run("bench", "gemm-bf16", {"gpu": "H200"}, {"m": 8192})
        s.add_result(ok, "gemm_flops_per_s", 6.1e14, "flop/s", config={"m": 8192})
        s.add_samples(ok, [{"t_s": 0.0, "power_instant_w": 690.0}, {"t_s": 0.1, "power_instant_w": 700.0}])
        s.end_run(ok, "completed")
        bad = s.begin_run("bench", "decode-70b", {"gpu": "L40S"}, {})
        s.add_failure(bad, {"batch": 64}, "OutOfMemoryError", "CUDA out of memory")
        s.end_run(bad, "failed")
        mon = s.begin_run("monitor", "python train.py", {"gpu": "H200"}, {})
    return {"ok": ok, "bad": bad, "mon": mon}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_table_json_csv(filled: dict[str, int], store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store_path))
    assert code == 0 and "gemm-bf16" in out and "decode-70b" in out and "completed" in out and "failed" in out
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store_path), "--format", "json")
    rows = json.loads(out)
    assert [r["run_id"] for r in rows] == [filled["mon"], filled["bad"], filled["ok"]]
    assert rows[2]["n_samples"] == 2 and rows[2]["manifest"] == {"gpu": "H200"}
    assert rows[0]["status"] == "interrupted"  # its writer (the fixture's Store) closed it on exit
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store_path), "--kind", "monitor", "-f", "csv")
    parsed = list(csv.DictReader(io.StringIO(out)))
    assert [r["name"] for r in parsed] == ["python train.py"]


def test_show(filled: dict[str, int], store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "runs", "show", str(filled["ok"]), "--store", str(store_path), "--format", "json", "--samples"
    )
    data = json.loads(out)
    assert code == 0 and data["run"]["name"] == "gemm-bf16" and data["results"][0]["value"] == 6.1e14
    assert [s["power_instant_w"] for s in data["samples"]] == [690.0, 700.0]
    code, out, _ = _run(capsys, "runs", "show", str(filled["bad"]), "--store", str(store_path))
    assert code == 0 and "OutOfMemoryError" in out and "Failures" in out
    code, out, _ = _run(capsys, "runs", "show", str(filled["ok"]), "--store", str(store_path), "-f", "csv")
    assert next(csv.DictReader(io.StringIO(out)))["metric"] == "gemm_flops_per_s"


def test_errors_are_one_line(
    filled: dict[str, int], store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "runs", "show", "999", "--store", str(store_path))
    assert code == 2 and out == "" and err.count("\n") == 1 and "no run 999" in err
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 100)
    code, _, err = _run(capsys, "runs", "list", "--store", str(notes))
    assert code == 2 and err.count("\n") == 1 and "not a readable gpumatch results store" in err


def test_default_store_not_created_yet_lists_nothing_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _run(capsys, "runs", "list", "--format", "json")
    assert code == 0 and json.loads(out) == [] and "no runs yet" in err
    assert not (tmp_path / "gpumatch-home" / "results.sqlite").exists()
    code, out, err = _run(capsys, "runs", "show", "1")
    assert code == 2 and out == "" and "no results store at" in err
    assert not (tmp_path / "gpumatch-home" / "results.sqlite").exists()


def test_default_store_from_environment(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with open_store():
        pass
    code, out, _ = _run(capsys, "runs", "list", "--format", "json")
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize("cmd", [["list"], ["show", "1"], ["export", "1", "-o", "x.csv"]])
def test_read_only_commands_do_not_create_a_named_store(
    cmd: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "nonexist.sqlite"
    code, out, err = _run(capsys, "runs", *cmd, "--store", str(missing))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"no results store at {missing}" in err and "gpumatch monitor" in err
    assert not missing.exists() and not (tmp_path / "x.csv").exists()


def test_gpumatch_store_env_naming_a_missing_file_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "typo.sqlite"
    monkeypatch.setenv("GPUMATCH_STORE", str(missing))
    code, _, err = _run(capsys, "runs", "list")
    assert code == 2 and "no results store at" in err and not missing.exists()


def test_list_table_keeps_a_multiline_command_on_one_row(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = "python3 -c \nimport torch\n" + "x = torch.zeros(1)\n" * 10
    with open_store(store_path) as s:
        s.end_run(s.begin_run("monitor", script, {}, {}), "completed")
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store_path))
    row = [line for line in out.splitlines() if "python3 -c" in line]
    assert code == 0 and len(row) == 1 and "import torch x = torch" in row[0] and "…" in row[0]
    code, out, _ = _run(capsys, "runs", "list", "--store", str(store_path), "--format", "csv")
    assert code == 0 and next(iter(csv.DictReader(io.StringIO(out))))["name"] == script


def test_show_table_keeps_a_large_manifest_to_one_short_line(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = {"gpu": "H200", "packages": {f"pkg{i}": "1.0.0" for i in range(200)}}
    with open_store(store_path) as s:
        run = s.begin_run("monitor", "sleep 30", manifest, {"interval_s": 0.05})
        s.end_run(run, "completed")
    code, out, _ = _run(capsys, "runs", "show", str(run), "--store", str(store_path))
    line = next(ln for ln in out.splitlines() if ln.startswith("manifest "))
    assert code == 0 and len(line) < 160 and "--format json" in line
    assert '{"interval_s": 0.05}' in out  # a short object stays whole
    code, out, _ = _run(capsys, "runs", "show", str(run), "--store", str(store_path), "--format", "json")
    assert json.loads(out)["run"]["manifest"] == manifest  # JSON keeps everything
