"""The bench layer's one precision -> torch dtype map (gpumatch.bench.dtypes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from gpumatch.bench.dtypes import STORAGE_PRECISIONS, autocast_dtype, torch_dtype  # noqa: E402


def test_each_precision_maps_to_its_element_dtype() -> None:
    assert [torch_dtype(p) for p in STORAGE_PRECISIONS] == [torch.bfloat16, torch.float16, torch.float32]
    assert torch_dtype("tf32") is torch.float32  # fp32 storage; TF32 is a matmul mode
    with pytest.raises(KeyError):
        torch_dtype("fp8")


def test_autocast_runs_fp8_training_under_bf16_and_fp32_without_autocast() -> None:
    assert [autocast_dtype(p) for p in ("bf16", "fp16", "fp8", "fp32", "tf32")] == [
        torch.bfloat16, torch.float16, torch.bfloat16, None, None]


def test_the_names_import_without_torch() -> None:
    code = ("import sys; import gpumatch.bench.dtypes as d, gpumatch.bench.dist.spec, gpumatch.lab.serve; "
            "assert 'torch' not in sys.modules, 'torch imported'; print(','.join(d.STORAGE_PRECISIONS))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "bf16,fp16,fp32"
