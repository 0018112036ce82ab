"""MXFP4 and NVFP4 weights: bytes per element with their block-scale overhead, and the FP4 compute path."""

from __future__ import annotations

import pytest

from gpumatch.catalog import get_gpu
from gpumatch.estimate.precision import bytes_per_element, compute_path
from gpumatch.vocab import FOUR_BIT, WEIGHT_PRECISIONS


def test_mxfp4_is_4_25_bits() -> None:
    # OCP MX v1.0: E2M1 elements, one 8-bit E8M0 scale per block of 32 -> (32*4 + 8) / 32 = 4.25 bits
    assert bytes_per_element("mxfp4") * 8 == pytest.approx(4.25)
    assert bytes_per_element("mxfp4") == bytes_per_element("fp4")


def test_nvfp4_is_4_5_bits() -> None:
    # NVIDIA NVFP4: E2M1 elements, one FP8 E4M3 scale per block of 16 -> (16*4 + 8) / 16 = 4.5 bits
    assert bytes_per_element("nvfp4") * 8 == pytest.approx(4.5)


def test_formats_are_four_bit_weight_precisions() -> None:
    assert {"mxfp4", "nvfp4"} <= set(WEIGHT_PRECISIONS)
    assert {"mxfp4", "nvfp4"} <= FOUR_BIT


@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_fp4_formats_compute_on_the_fp4_path(fmt: str) -> None:
    path = compute_path(get_gpu("B200"), fmt)
    assert path.compute_key == "fp4" and path.peak_flops_per_s
    # before Blackwell the blocks are dequantized to 16 bit (W4A16): BF16 peak, with a warning; fp4 has no fallback
    hopper = compute_path(get_gpu("H100-SXM5-80GB"), fmt)
    assert hopper.compute_key == "bf16" and hopper.peak_flops_per_s and "dequantized" in hopper.warning
    assert compute_path(get_gpu("H100-SXM5-80GB"), "fp4").peak_flops_per_s is None
