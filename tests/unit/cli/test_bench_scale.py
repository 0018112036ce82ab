"""``gpumatch bench scale`` for real: torchrun with gloo on CPU processes, 1 -> 2 -> 4, into a SQLite store."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumatch.cli.app import app
from gpumatch.store import open_existing_store

pytest.importorskip("torch", reason="bench scale launches torchrun (the bench extra)")


def _invoke(*args: str) -> str:
    got = CliRunner().invoke(app, list(args))
    assert got.exit_code == 0, got.output
    return got.stdout


def test_collectives_ladder_1_2_4_into_sqlite(tmp_path: Path) -> None:
    db = str(tmp_path / "scale.sqlite")
    out = _invoke("bench", "scale", "--workload", "collectives", "--ops", "all_reduce,all_gather", "--gpus", "1,2,4",
                  "--cpu", "--sizes", "4KiB,64KiB", "--iters", "2", "--warmup", "1", "--store", db, "-f", "json")
    doc = json.loads(out)
    assert doc["status"] == "completed" and doc["device"] == "cpu" and not doc["failures"]
    rows = {(r["n_gpus"], r["op"], r["size_bytes"]): r for r in doc["collectives"]}
    assert set(rows) == {(n, op, s) for n in (1, 2, 4) for op in ("all_reduce", "all_gather") for s in (4096, 65536)}
    four = rows[(4, "all_reduce", 65536)]
    assert four["busbw_bytes_per_s"] == pytest.approx(four["algbw_bytes_per_s"] * 1.5)
    assert four["algbw_bytes_per_s"] == pytest.approx(65536 / four["time_s"])
    assert four["predicted"] is None and "CPU" in " ".join(doc["notes"])
    with open_existing_store(db) as st:
        (run,) = st.runs("scale")
        data = st.export_run(run.run_id)
    ranks = {(r["config"]["n_gpus"], r["config"]["rank"]) for r in data["results"]
             if r["metric"] == "collective_time_s"}
    assert ranks == {(1, 0), (2, 0), (2, 1), (4, 0), (4, 1), (4, 2), (4, 3)}
    raw = next(r for r in data["results"] if r["metric"] == "collective_time_s")
    assert len(raw["extra"]["time_s"]) == 2
    manifest = run.manifest
    assert manifest["scale.nvls_off"] == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                          "NVSHMEM_DISABLE_NVLS": "1"}
    assert manifest["scale.backend"] == "gloo" and manifest["scale.nproc_per_node"] == [1, 2, 4]
    table = _invoke("bench", "show", str(run.run_id), "--store", db)
    assert "all_reduce" in table and max(map(len, table.splitlines())) <= 80
    rows_csv = list(csv.DictReader(io.StringIO(_invoke("bench", "show", str(run.run_id), "--store", db, "-f", "csv"))))
    assert len(rows_csv) == 12 and {"busbw_bytes_per_s", "predicted", "ratio"} <= set(rows_csv[0])


def test_ddp_ladder_1_2_into_sqlite(tmp_path: Path) -> None:
    db = str(tmp_path / "scale.sqlite")
    _invoke("bench", "scale", "--workload", "ddp", "--gpus", "1,2", "--cpu", "--steps", "2", "--warmup", "0",
            "--seq", "8", "--store", db)
    with open_existing_store(db) as st:
        (run,) = st.runs("scale")
    table = _invoke("bench", "show", str(run.run_id), "--store", db)
    assert "scaling ladder" in table and "delivers k" in table and max(map(len, table.splitlines())) <= 80
    doc = json.loads(_invoke("bench", "show", str(run.run_id), "--store", db, "-f", "json"))
    assert not doc["failures"], doc["failures"]
    one, two = doc["ladder"]
    assert two["scaling_efficiency"] == pytest.approx(two["tokens_per_s"] / (2 * one["tokens_per_s"]))
    assert two["delivers_gpus"] == pytest.approx(two["tokens_per_s"] / one["tokens_per_s"])
    assert two["exposed_comm_s"] is not None and two["exposed_comm_s"] >= 0
    steps = [r for r in doc["ranks"] if r["metric"] == "step_time_s"]
    assert {(r["n_gpus"], r["rank"]) for r in steps} == {(1, 0), (2, 0), (2, 1)}
    assert all(len(r["extra"]["step_time_s"]) == 2 for r in steps)
    page = tmp_path / "report.html"
    _invoke("report", "--run", str(run.run_id), "--store", db, "--html", str(page))
    text = page.read_text(encoding="utf-8")
    assert f"Run {run.run_id}: scaling ladder (ddp)" in text and "efficiency X_n / (n X_1)" in text


def test_bad_sizes_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from gpumatch.cli.app import main

    assert main(["bench", "scale", "--workload", "collectives", "--sizes", "9KiB..1KiB", "--cpu"]) == 2
    err = capsys.readouterr().err
    assert "bad --sizes" in err and len(err.strip().splitlines()) <= 2
