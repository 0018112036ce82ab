"""``gpumatch estimate``: several --gpu side by side, one --model only, labelled throughputs, no speed when it
does not fit."""

from __future__ import annotations

import json

import pytest

from gpumatch.cli.app import main

SERVE = ("--model", "llama-3.1-70b", "--task", "serve", "--count", "4", "--tp", "4", "--batch", "32")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["estimate", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_several_gpus_are_compared_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, *SERVE, "--gpu", "H100 SXM", "--gpu", "H200 SXM", "--gpu", "RTX 4090",
                      "--format", "json")
    assert rc == 0
    rows = json.loads(out)
    assert [r["gpu"] for r in rows] == ["H100 SXM5 80GB", "H200 SXM 141GB", "GeForce RTX 4090"]
    single = json.loads(_run(capsys, *SERVE, "--gpu", "H200 SXM", "--format", "json")[1])
    assert rows[1]["tpot_s"] == single["tpot_s"] and rows[1]["memory"] == single["memory"]
    assert rows[2]["fits"] is False and rows[2]["tpot_s"] is None
    rc, table, _ = _run(capsys, *SERVE, "--gpu", "H100 SXM", "--gpu", "RTX 4090")
    assert rc == 0 and table.index("H100") < table.index("GeForce")  # a row per GPU, in the order given
    assert "GeForce RTX 4090: does not fit" in table  # its warning, with what would fit, under the table
    assert "does not" in table and "generated tokens per second over all replicas" in table
    rc, csv, _ = _run(capsys, *SERVE, "--gpu", "H100 SXM", "--gpu", "RTX 4090", "--format", "csv")
    assert rc == 0 and len(csv.strip().splitlines()) == 3  # header + one row per GPU


@pytest.mark.parametrize(("args", "says"), [
    (("--model", "llama-3.1-8b", "--model", "llama-3.1-70b", "--gpu", "H100 SXM"), "--model given 2 times"),
    (("--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--gpu", "H100 SXM5 80GB"), "a second time"),
    (("--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--gpu", "H200 SXM", "--curve"), "--curve"),
])
def test_repeated_model_or_same_gpu_is_refused(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                               says: str) -> None:
    rc, out, err = _run(capsys, *args)
    assert rc == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1


def test_table_labels_what_each_throughput_counts(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--model", "llama-3.1-8b", "--gpu", "H100 SXM", "--task", "serve", "--batch", "8",
                      "--dp", "2", "--count", "2", "--engine", "static")
    flat = " ".join(out.split())
    assert rc == 0
    assert "generated tokens/s (all 2 replicas, prefill time included)" in flat
    assert "generated tokens/s per replica" in flat and "in decode steps alone" in flat
    assert "(one prompt alone, no queueing)" in flat
    rc, out, _ = _run(capsys, "--model", "llama-3.2-1b", "--gpu", "H100 SXM", "--task", "train", "--batch", "2")
    assert rc == 0 and "trained tokens/s (one GPU)" in " ".join(out.split())


def test_not_fitting_table_prints_no_speed(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--model", "llama-3.1-8b", "--gpu", "RTX 4090", "--task", "lora", "--batch", "4",
                      "--seq", "2048")
    assert rc == 0
    assert "does not fit: no speed, power or cost" in " ".join(out.split())
    assert "step_s" not in out and "tokens_per_s" not in out and "usd_per_million_tokens" not in out
    assert "fits with --" in " ".join(out.split())
