"""`gpumatch gpus list|show`: the JSON contract, csv/table output, and one-line errors with exit code 2.

Runs the real console entry point (``gpumatch.cli.app.main``) in-process and reads stdout/stderr
through capsys. GPUMATCH_HOME is a fresh temporary folder per test (tests/conftest.py).
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from gpumatch.catalog import load_catalog
from gpumatch.cli.app import main
from gpumatch.errors import DataFileError
from gpumatch.settings import load_settings

CONTRACT_KEYS = {
    "name",
    "aliases",
    "vendor",
    "segment",
    "form_factor",
    "memory_bytes",
    "memory_bandwidth_bytes_per_s",
    "tdp_w",
    "peak_flops_per_s",
    "nvlink_bytes_per_s",
    "pcie_gen",
    "pcie_lanes",
    "compute_capability",
    "sources",
}
PRECISION_KEYS = {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gpumatch: error: ")
    assert "Traceback" not in err
    return lines[0]


# --- list --------------------------------------------------------------------------------------------


def test_list_json_is_a_list_with_the_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "gpus", "list", "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    assert isinstance(rows, list)
    assert len(rows) == len(load_catalog().gpus)
    for row in rows:
        assert set(row) >= CONTRACT_KEYS, row["name"]
        assert set(row["peak_flops_per_s"]) == PRECISION_KEYS
        assert all(v is None or v > 0 for v in row["peak_flops_per_s"].values())
        assert isinstance(row["memory_bytes"], int) and row["memory_bytes"] > 1e9
        assert row["memory_bandwidth_bytes_per_s"] > 1e11
        assert row["nvlink_bytes_per_s"] >= 0
        assert isinstance(row["pcie_gen"], int) and isinstance(row["pcie_lanes"], int)
        assert row["vendor"] in {"nvidia", "amd", "intel"}
        assert row["segment"] in {"datacenter", "workstation", "consumer"}
        assert row["sources"] and all(s["url"].startswith("http") for s in row["sources"])
        if row["vendor"] == "nvidia":
            assert isinstance(row["compute_capability"], str)
        else:
            assert row["compute_capability"] is None


def test_list_json_carries_the_geforce_accumulate_rates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gpus", "list", "--format", "json", "--segment", "consumer")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    rtx4090 = rows["GeForce RTX 4090"]
    # NVIDIA rounds each row to 0.1 TFLOPS (165.2 x 2 = 330.4 vs 330.3), hence rel=1e-3
    assert rtx4090["peak_flops_per_s"]["fp16"] * 2 == pytest.approx(rtx4090["fp16_acc16_flops_per_s"], rel=1e-3)
    assert rtx4090["peak_flops_per_s"]["fp8"] * 2 == pytest.approx(rtx4090["fp8_acc16_flops_per_s"], rel=1e-3)
    assert all(r["segment"] == "consumer" for r in rows.values())


def test_list_vendor_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gpus", "list", "--format", "json", "--vendor", "AMD")
    assert code == 0
    names = {r["name"] for r in json.loads(out)}
    assert {"Instinct MI300X", "Instinct MI325X", "Instinct MI250X"} <= names
    assert all(r["vendor"] == "amd" for r in json.loads(out))


def test_list_csv_has_a_header_and_one_row_per_sku(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gpus", "list", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(load_catalog().gpus)
    assert "name" in rows[0]
    assert "GeForce RTX 4090" in {r["name"] for r in rows}


def test_list_table_is_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gpus", "list")
    assert code == 0
    assert "Instinct MI300X" in out and "Gaudi 3" in out
    assert "sparsity" in out.lower()  # the title says the peaks are dense


# --- show --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["H100 SXM", "h100-sxm5-80gb", "NVIDIA GeForce RTX 4090", "mi300x", "gaudi3"])
def test_show_json_is_one_object(capsys: pytest.CaptureFixture[str], query: str) -> None:
    code, out, err = run(capsys, "gpus", "show", query, "--format", "json")
    assert code == 0, err
    obj = json.loads(out)
    assert isinstance(obj, dict)
    assert set(obj) >= CONTRACT_KEYS
    assert obj["name"] == load_catalog().get(query).name


def test_show_mi300x_keeps_amds_dense_figure(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "gpus", "show", "MI300X", "--format", "json")
    assert json.loads(out)["peak_flops_per_s"]["bf16"] == pytest.approx(1307.4e12)


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_show_table_and_csv(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, _ = run(capsys, "gpus", "show", "rtx 5090", "--format", fmt)
    assert code == 0
    assert "GeForce RTX 5090" in out
    assert "images.nvidia.com" in out  # sources are shown


# --- errors ------------------------------------------------------------------------------------------


def test_ambiguous_name_exit_2_one_line_listing_matches(capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_line_error(*run(capsys, "gpus", "show", "h100"))
    assert "ambiguous" in line
    assert "H100 SXM5 80GB" in line and "H100 PCIe 80GB" in line


def test_unknown_name_exit_2_with_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_line_error(*run(capsys, "gpus", "show", "rtx 4900"))
    assert "unknown GPU 'rtx 4900'" in line
    assert "GeForce RTX 4090" in line


# typer vendors its own click (typer._click): usage errors must still exit 2 with one line.


@pytest.mark.parametrize(
    "argv",
    [
        ["gpus", "list", "--vendor", "nvdia"],
        ["gpus", "list", "--segment", "gaming"],
        ["gpus", "list", "--format", "xml"],
        ["gpus", "show"],
        ["gpus", "frobnicate"],
    ],
)
def test_bad_arguments_exit_2_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert_one_line_error(*run(capsys, *argv))


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('name = "unterminated\n', "line 1"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not UTF-8"),
        ('name = "X"\nwarp_drive = true\n', "field 'warp_drive'"),
    ],
)
def test_malformed_overlay_exit_2_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], content: str | bytes, field: str
) -> None:
    folder = load_settings().gpu_overlay_dir
    folder.mkdir(parents=True)
    path = folder / "mine.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    for argv in (["gpus", "list", "--format", "json"], ["gpus", "show", "4090"]):
        line = assert_one_line_error(*run(capsys, *argv))
        assert str(path) in line
        assert field in line


def test_debug_flag_shows_the_exception() -> None:
    folder = load_settings().gpu_overlay_dir
    folder.mkdir(parents=True)
    (folder / "bad.toml").write_text("[[[", encoding="utf-8")
    with pytest.raises(DataFileError):
        main(["--debug", "gpus", "list"])
