"""`gpumatch gpus list|show` tables (issue 10, items 1 and 17): they fit the width, show human units and the
source of each number, say which usable-memory rule applied; CSV and JSON keep the SI figures."""

from __future__ import annotations

import csv
import io
import json

import pytest

from gpumatch.catalog import load_catalog
from gpumatch.cli.app import main
from gpumatch.report.render import text_width

NAMES = [g.name for g in load_catalog().gpus]


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int, *argv: str) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("width", [60, 80])
def test_list_fits_the_width(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    out = run(capsys, monkeypatch, width, "gpus", "list")
    assert max(text_width(line) for line in out.splitlines()) <= width
    for name in ("H100 PCIe 80GB", "Instinct MI300X", "Gaudi 3", "T4"):
        assert name in out


@pytest.mark.parametrize("name", NAMES)
def test_show_fits_80_columns_and_names_every_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    out = run(capsys, monkeypatch, 80, "gpus", "show", name, "--quotes")
    assert max(text_width(line) for line in out.splitlines()) <= 80, name
    g = load_catalog().get(name)
    for s in g.sources:
        assert f"[{s['id']}]" in out
    assert "memory, usable" in out and "GiB" in out and "TFLOP/s" in out and " W " in out + " "


def test_show_says_which_memory_rule_applied(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sxm = run(capsys, monkeypatch, 120, "gpus", "show", "H100 SXM")
    assert "79.2 GiB (CUDA deviceQuery 81105 MiB, driver 565.57.01;" in sxm and "rule: process-side reading" in sxm
    assert "the driver's total (nvidia-smi) is 81559 MiB: 454 MiB of it is held back" in sxm
    pcie = run(capsys, monkeypatch, 120, "gpus", "show", "H100 PCIe")
    assert "79.1 GiB (datasheet 80 GB as 81920 MiB - driver reserve 361 - process reserve 593 MiB)" in pcie
    assert "rule: datasheet rule" in pcie
    a6000 = run(capsys, monkeypatch, 120, "gpus", "show", "RTX A6000")
    assert "ECC off by default" in a6000 and "47.5 GiB" in a6000


def test_list_csv_and_json_carry_the_usable_bytes_rule_and_source(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = run(capsys, monkeypatch, 80, "gpus", "list", "-f", "csv")
    rows = {r["name"]: r for r in csv.DictReader(io.StringIO(text))}
    assert rows["H100 SXM5 80GB"]["memory_usable_bytes"] == str(81105 * 2**20)
    assert rows["H100 SXM5 80GB"]["memory_rule"] == "process"
    assert rows["L20"]["memory_rule"] == "process" and rows["L20"]["memory_usable_bytes"] == str(45599 * 2**20)
    assert rows["H100 PCIe 80GB"]["memory_rule"] == "datasheet"
    obj = json.loads(run(capsys, monkeypatch, 80, "gpus", "show", "RTX A6000", "-f", "json"))
    assert obj["memory_usable"]["rule"] == "datasheet"
    assert obj["memory_usable_bytes"] == (49152 - 12 - 490) * 2**20
    assert obj["memory_usable"]["ecc_bytes"] == 0 and obj["memory_usable"]["source_url"].startswith("http")


def test_show_csv_keeps_si_digits(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rows = {r["field"]: r for r in csv.DictReader(io.StringIO(run(capsys, monkeypatch, 80, "gpus", "show", "A40",
                                                                     "-f", "csv")))}
    assert rows["memory.reported_bytes"]["value"] == "48305799168"
    assert rows["memory.usable_bytes"]["note"].startswith("process: CUDA deviceQuery")
    assert rows["name"]["value"] == "A40"
