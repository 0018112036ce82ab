"""DistSpec: JSON round trip and input errors (no torch needed)."""

from __future__ import annotations

from typing import Any

import pytest

from gpumatch.bench.dist.spec import DEFAULT_SIZES_BYTES, DistSpec
from gpumatch.bench.shapes import tiny_shape
from gpumatch.errors import InputError


def test_round_trip_equal() -> None:
    spec = DistSpec("fsdp", tiny_shape(), batch_per_rank=2, seq_len=16, steps=3, sizes_bytes=(8, 64),
                    ops=("all_reduce",), dtype="fp32", seed=7)
    assert DistSpec.from_json(spec.to_json()) == spec
    assert spec.to_json()["sizes_bytes"] == [8, 64]


def test_preset_name_resolves() -> None:
    spec = DistSpec.from_json({"workload": "ddp", "model": "llama-3.2-1b"})
    assert spec.shape().layers == 16


def test_default_sweep() -> None:
    assert DistSpec("collectives").sizes() == DEFAULT_SIZES_BYTES
    assert DistSpec("collectives", sizes_bytes=(4,)).sizes() == (4,)


@pytest.mark.parametrize(("data", "needle"), [
    ({"workload": "pipeline"}, "unknown distributed workload"),
    ({"workload": "ddp"}, "needs a model shape"),
    ({"workload": "ddp", "model": {"layers": 2}}, "bad model shape"),
    ({"workload": "ddp", "model": "no-such-model"}, "unknown model preset"),
    ({"workload": "ddp", "model": {**tiny_shape(), "kv_heads": 3}}, "multiple of kv_heads"),
    ({"workload": "collectives", "steps": 0}, "steps must be >= 1"),
    ({"workload": "collectives", "warmup_steps": -1}, "warmup_steps"),
    ({"workload": "collectives", "ops": ["broadcast"]}, "unknown collective"),
    ({"workload": "collectives", "ops": []}, "unknown collective"),
    ({"workload": "collectives", "sizes_bytes": [0]}, "out of range"),
    ({"workload": "collectives", "dtype": "fp8"}, "unknown dtype"),
    ({"workload": "collectives", "iters": "5"}, "must be an integer"),
    ({"workload": "collectives", "colour": 1}, "unknown spec field"),
    ({}, "lacks workload"),
])
def test_bad_specs_are_input_errors(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        DistSpec.from_json(data)
