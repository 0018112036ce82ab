"""The collective class of gpumatch calibrate: recovery of known parameters, and nccl-tests files calibrating."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumatch.calibrate.collectives import OPS, CollectivePoint, fit_collectives, predict_time_s
from gpumatch.cli.app import app
from gpumatch.estimate import Calibration

DATA = Path(__file__).parents[2] / "data" / "imports" / "nccl-tests-all-reduce.json"


def _synthetic(card: str, truth: Calibration, pcie: bool, noise: float, seed: int = 7) -> list[CollectivePoint]:
    rng = random.Random(seed)
    return [CollectivePoint(op, 2.0 ** k, n, predict_time_s(op, 2.0 ** k, n, card, truth, pcie)
                            * math.exp(rng.gauss(0.0, noise)))
            for op in OPS for n in (2, 4, 8) for k in range(10, 31, 2)]


@pytest.mark.parametrize(("card", "pcie", "field", "eff", "lat"),
                         [("h200", False, "nvlink_efficiency", 0.62, 2.5e-5),
                          ("h200", True, "pcie_efficiency", 0.55, 1.2e-5),
                          ("l40s", False, "pcie_efficiency", 0.7, 3e-5)])
def test_fit_recovers_known_parameters(card: str, pcie: bool, field: str, eff: float, lat: float) -> None:
    truth = replace(Calibration(), **{field: eff, "collective_latency_s": lat})
    fit = fit_collectives(_synthetic(card, truth, pcie, 0.03), card, pcie)
    assert fit.field == field
    assert fit.fields()[field] == pytest.approx(eff, rel=0.05)
    assert fit.fields()["collective_latency_s"] == pytest.approx(lat, rel=0.1)
    assert fit.held_after[0] < 0.05 < fit.held_before[0]
    assert fit.fit_sizes == 6 and fit.held_sizes == 5


def test_nccl_tests_import_calibrates_the_collective_class(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    runner = CliRunner()
    got = runner.invoke(app, ["runs", "import", str(DATA), "--store", str(db)])
    assert got.exit_code == 0, got.output
    got = runner.invoke(app, ["calibrate", "--store", str(db), "--no-save", "--format", "json"])
    assert got.exit_code == 0, got.output
    fit = json.loads(got.stdout)
    (row,) = [c for c in fit["classes"] if c["cls"] == "collective"]
    assert row["fit_shapes"] == 3 and row["held_shapes"] == 2
    assert row["held_after_mean"] < row["held_before_mean"]
    assert fit["card"].lower().startswith("h200")
    assert fit["calibration"]["nvlink_efficiency"] != Calibration().nvlink_efficiency
    table = runner.invoke(app, ["calibrate", "--store", str(db), "--no-save"])
    assert "collective" in table.stdout and max(map(len, table.stdout.splitlines())) <= 80


def test_pcie_only_reads_the_topology_matrix() -> None:
    from gpumatch.calibrate.collectives import pcie_only

    nv = {"available": True, "matrix": [["X", "NV18"], ["NV18", "X"]]}
    pcie = {"available": True, "pairs": [{"a": 0, "b": 1, "link": "PXB"}, {"a": 0, "b": 2, "link": "NV4"}]}
    assert not pcie_only(nv, 2)
    assert pcie_only(pcie, 2) and not pcie_only(pcie, 3)
    assert not pcie_only({"available": False, "reason": "no NVML"}, 8)
