"""How published engine rows meet their frozen predictions (calibrate.published.load_engine_cases): several measured
files, the richer columns, and which predicted statistic each published one is compared with."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpumatch.calibrate.published import load_engine_cases

_SOURCE = '[sources.{name}]\nurl = "https://example.org/{name}"\nsays = "x"\n'


def _frozen(tmp_path: Path, *ids: str, replay: bool = True) -> Path:
    rows = []
    for i in ids:
        serving = ({"model": "benchmark-replay", "steady_state_ttft_s": 0.05, "steady_state_tpot_s": 0.011,
                    "replay": {"ttft_p50_s": 0.08, "tpot_p50_s": 0.012}} if replay else {"engine": "vllm"})
        rows.append({"id": i, "model": "qwen3-8b", "gpu": "H100 SXM5 80GB", "tp": 1, "precision": "bf16",
                     "engine": "vllm", "concurrency": 4, "ttft_s": 0.1, "tpot_s": 0.01, "serving": serving})
    path = tmp_path / f"pred-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({"frozen_at_commit": "a" * 40, "rows": rows}))
    return path


def _measured(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(_SOURCE.format(name=name) + body)
    return path


def test_two_measured_files_and_the_richer_columns(tmp_path: Path) -> None:
    old = _measured(tmp_path, "old", '[[group]]\nsource = "old"\ncolumns = ["id", "ttft_ms", "tpot_ms"]\n'
                    'rows = [["a", 200.0, 10.0]]\n')
    new = _measured(tmp_path, "new", '[[group]]\nsource = "new"\ncolumns = ["id", "ttft_ms", "tpot_ms", '
                    '"ttft_median_ms", "ttft_p99_ms", "tpot_median_ms", "requests_per_s", "image"]\n'
                    'rows = [["b", 200.0, 10.0, 100.0, 900.0, 12.5, 0.5, "img:1"]]\n')
    cases, sources, frozen_at = load_engine_cases((old, new), (_frozen(tmp_path, "a", replay=False),
                                                               _frozen(tmp_path, "b")))
    a, b = cases
    assert list(sources) == ["old", "new"] and len(frozen_at) == 2
    assert a.prediction_model == "steady-state" and a.steady_tpot_s == a.predicted_tpot_s == 0.01
    assert math.isnan(a.ttft_median_error) and a.ttft_error == pytest.approx(-0.5)
    assert b.prediction_model == "benchmark-replay" and b.frozen_in.startswith("pred-")
    assert (b.ttft_median_s, b.ttft_p99_s, b.tpot_median_s) == pytest.approx((0.1, 0.9, 0.0125))
    assert b.requests_per_s == 0.5 and b.image == "img:1"
    assert b.tpot_error == pytest.approx(0.0)  # a mean against the replay's mean
    assert b.ttft_median_error == pytest.approx(-0.2)  # the median against the replay's p50
    assert b.steady_tpot_error == pytest.approx(0.1)


def test_a_median_tpot_is_compared_with_the_replays_median(tmp_path: Path) -> None:
    data = _measured(tmp_path, "m", '[[group]]\nsource = "m"\ntpot_basis = "median"\ncolumns = ["id", "tpot_ms"]\n'
                     'rows = [["c", 15.0]]\n')
    (c,), _, _ = load_engine_cases((data,), (_frozen(tmp_path, "c"),))
    assert c.ttft_s is None and c.tpot_median_s == c.tpot_s == 0.015
    assert c.compared_tpot_s == 0.012 and c.tpot_error == pytest.approx(-0.2)


@pytest.mark.parametrize("body, message", [
    ('[[group]]\nsource = "x"\ncolumns = ["id", "tpot_ms", "speed"]\nrows = [["d", 1.0, 2.0]]\n', "unknown"),
    ('[[group]]\nsource = "x"\ntpot_basis = "p90"\ncolumns = ["id", "tpot_ms"]\nrows = [["d", 1.0]]\n', "tpot_basis"),
    ('[[group]]\nsource = "x"\ncolumns = ["id", "tpot_ms"]\nrows = [["e", 1.0]]\n', "no frozen prediction"),
])
def test_malformed_measured_files_are_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_engine_cases((_measured(tmp_path, "x", body),), (_frozen(tmp_path, "d"),))


def test_a_source_or_row_in_two_files_is_refused(tmp_path: Path) -> None:
    body = '[[group]]\nsource = "s"\ncolumns = ["id", "tpot_ms"]\nrows = [["f", 1.0]]\n'
    one, two = _measured(tmp_path, "s", body), tmp_path / "s2.toml"
    two.write_text(one.read_text())
    with pytest.raises(ValueError, match="defined twice"):
        load_engine_cases((one, two), (_frozen(tmp_path, "f"),))
    two.write_text(body.replace('source = "s"', 'source = "t"') + _SOURCE.format(name="t"))
    with pytest.raises(ValueError, match="measured twice"):
        load_engine_cases((one, two), (_frozen(tmp_path, "f"),))
