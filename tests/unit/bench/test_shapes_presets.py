"""The bench shapes come from gpumatch's model presets, keep the dimensions the committed measurements name, and
import without pydantic (the GPU machine that runs the bench has torch and nothing else)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpumatch.bench.shapes import PRESETS, from_preset

MEASUREMENTS = Path(__file__).resolve().parents[2] / "data" / "measurements"


def _measured_shapes() -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = {}
    for path in MEASUREMENTS.glob("*-h200-*.json"):
        plan = json.loads(path.read_text()).get("plan", {})
        for key in ("decode_model", "decode_models", "prefill_models", "train"):
            value = plan.get(key)
            for item in value if isinstance(value, list) else [value]:
                shape = item[0] if isinstance(item, list) else item
                if isinstance(shape, dict) and "name" in shape:
                    found[str(shape["name"])] = shape
    return found


def test_presets_match_the_shapes_the_measurements_recorded() -> None:
    measured = _measured_shapes()
    assert set(PRESETS) <= set(measured)
    for name, shape in PRESETS.items():
        assert shape == measured[name], name


def test_from_preset_refuses_what_the_bench_model_cannot_run() -> None:
    with pytest.raises(ValueError, match="experts"):
        from_preset("mixtral-8x7b")


def test_shapes_import_without_pydantic() -> None:
    code = ("import sys; sys.modules['pydantic'] = None; from gpumatch.bench import shapes; "
            "print(len(shapes.PRESETS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "8"
