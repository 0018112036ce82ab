"""Bytes per parameter of each mixed-precision training recipe (``master_weights``), against their sources.

- ``fp32`` (the default; Megatron-LM / DeepSpeed): 16-bit parameters 2 + fp32 gradients 4 (Megatron-LM's
  ``main_grad``) + fp32 master copy, momentum and variance 4 + 4 + 4 = 18 bytes. With 16-bit gradients it is the
  ZeRO paper's count, Rajbhandari et al. 2020 ("ZeRO: Memory Optimizations Toward Training Trillion Parameter
  Models", section 3.1): "2Ψ + 2Ψ + KΨ = 16Ψ bytes" with K = 12 for mixed-precision Adam.
- ``amp`` (PyTorch AMP, "Automatic Mixed Precision package - torch.amp"): the model stays fp32 under
  ``torch.autocast``: fp32 parameters 4 (they are the master) + fp32 gradients 4 + AdamW moments 8 = 16 bytes,
  plus autocast's cached 16-bit casts of the matmul weights (aten/src/ATen/autocast_mode.cpp ``cached_cast``),
  2 bytes per cast weight, alive from the forward into the backward. Measured: Llama-3-8B trained this way on an
  H200 peaked at 16.04 bytes per parameter allocated (tests/data/measurements/2026-12-04-h200-heldout5-train.json).
- ``none``: a model cast to bf16, parameters 2 + gradients 2 + AdamW moments 2 + 2 = 8 bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpumatch.errors import InputError
from gpumatch.estimate import Request, estimate
from gpumatch.estimate.options import precision_numbers
from gpumatch.models import get_model

MEASURED = Path(__file__).resolve().parents[1] / "data" / "measurements" / "2026-12-04-h200-heldout5-train.json"


def _states(master: str, **kw: object) -> float:
    """Persistent bytes per parameter: stored weights + gradients + optimizer state."""
    n = precision_numbers(Request(task="train", master_weights=master, **kw))  # type: ignore[arg-type]
    stored = 4.0 if n["autocast"] else n["weight_bytes"]
    return stored + n["grad_bytes"] + n["opt_bytes"]


@pytest.mark.parametrize(("master", "expected"), [("fp32", 18.0), ("amp", 16.0), ("none", 8.0)])
def test_bytes_per_parameter_of_each_recipe(master: str, expected: float) -> None:
    assert _states(master) == expected


def test_zero_paper_count_is_the_fp32_recipe_with_16_bit_gradients() -> None:
    assert _states("fp32", grad_bytes=2.0) == 16.0  # ZeRO section 3.1: 2 + 2 + 12


def test_amp_keeps_no_master_copy_and_reads_16_bit_casts() -> None:
    amp = precision_numbers(Request(task="train", master_weights="amp"))
    assert amp["autocast"] == 1.0 and amp["weight_bytes"] == 2.0  # the casts the GEMMs read
    assert amp["opt_bytes"] == 8.0 and amp["grad_bytes"] == 4.0  # moments only; gradients in the params' fp32


def test_amp_memory_of_an_untied_model() -> None:
    """Llama-3.1-8B (untied): states 16 bytes per parameter; the casts 2 bytes per matmul weight (all but the
    embedding), counted with the activations."""
    m = get_model("llama-3.1-8b")
    e = estimate(m, "H200", Request(task="train", seq=1024, master_weights="amp", micro_batch=1), with_scaling=False)
    states = e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes
    assert states == pytest.approx(16 * m.params_total)
    embed = m.vocab_size * m.hidden_size
    assert e.memory.autocast_copies_bytes == pytest.approx(2 * (m.params_total - embed - m.hidden_size), rel=1e-6)
    assert e.memory.tied_embedding_grad_bytes == 0.0


def test_the_measured_amp_peak_is_16_bytes_per_parameter() -> None:
    """The blind 8B AMP runs peaked at the recipe's 16 bytes per parameter (the casts not on top)."""
    runs = [r for r in json.loads(MEASURED.read_text())["cases"] if r["master"] == "fp32"]
    assert len(runs) == 2
    for r in runs:
        assert r["max_memory_allocated_bytes"] / r["params"] == pytest.approx(16.0, abs=0.1)


def test_tied_embedding_gradient_twice_at_the_end_of_backward() -> None:
    """Llama-3.2-1B ties its embedding: the embedding backward's dense V·h gradient sits beside the head's
    (tests/data/measurements/2026-12-04-h200-probe-amp-peaks.txt); fp32 under AMP."""
    m = get_model("llama-3.2-1b")
    e = estimate(m, "H200", Request(task="train", seq=1024, master_weights="amp", micro_batch=1), with_scaling=False)
    assert e.memory.tied_embedding_grad_bytes == pytest.approx(4 * m.vocab_size * m.hidden_size)
    e_pp = estimate(
        m,
        "H200",
        Request(task="train", seq=1024, master_weights="amp", pp=2, count=2, micro_batch=1),
        with_scaling=False,
    )
    assert e_pp.memory.tied_embedding_grad_bytes == 0.0  # stages keep separate copies


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"task": "lora"}, "full training"),
        ({"task": "train", "precision": "fp32"}, "bf16 or fp16"),
        ({"task": "train", "precision": "fp8"}, "bf16 or fp16"),
    ],
)
def test_amp_outside_16_bit_full_training_is_an_error(kw: dict[str, str], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        estimate("llama-3.2-1b", "H200", Request(master_weights="amp", **kw), with_scaling=False)


def test_amp_with_fp8_candidates_counts_the_fp32_master_recipe() -> None:
    """The planner's fp8 mitigation of an amp request is counted as Transformer Engine's fp32-master recipe."""
    # the mitigation changes the precision of the request as written (an amp recipe), unvalidated, as the planner
    # builds its candidates (estimate.vectorized.candidate_case); a user's fp8 + amp request is an error (above)
    fp8_amp = precision_numbers(Request.model_construct(task="train", precision="fp8", master_weights="amp"))
    fp8_fp32 = precision_numbers(Request(task="train", precision="fp8", master_weights="fp32"))
    assert fp8_amp == fp8_fp32
