"""gpumatch's estimates against the measurements in tests/data/measurements (H200s, 2026-12-02 to 2026-12-04).

Source of the measured values: benchmarks/gpu/run_suite.py on the device pool's H200s (four runs; environment,
plan and raw timings inside each JSON). Comparison rules and the fit / held-out split:
src/gpumatch/calibrate/cases.py. Tolerance: 10% relative error on every case (issue 3's goal), fit and
held-out alike. Cases known to miss it are listed in KNOWN_MISSES as strict xfails, so the table in
docs/accuracy.md and this test say the same thing, and a fixed estimator turns them into failures to clean up.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpumatch.calibrate.cases import MeasuredCase, load_cases
from gpumatch.calibrate.compare import predict, rel_error

DATA = Path(__file__).resolve().parents[1] / "data" / "measurements"
TOLERANCE = 0.10
CASES = load_cases(DATA)
KNOWN_MISSES = {
    # Eager PyTorch prefill of the 28-layer 3B model at 1024 tokens ran 24.6 ms (6 samples within 3%); gpumatch
    # predicts ~16 ms. A probe on a third H200 (2026-12-02-h200-probe-prefill-host.json) found it host-bound:
    # enqueueing one prefill took 27.4 ms of host time against 15.6 ms of device time (CUDA-graph replay), about
    # 1 ms of Python/ATen dispatch per layer. The same probe ran the 8B prefill at 512 tokens in 30.6 ms where
    # the first run's machine took 18.4 ms: the host CPU differs between machines of one kind, so eager
    # dispatch-bound cases cannot be predicted from the GPU alone (the fitted eager_launch_s is a mean).
    "prefill llama-3.2-3b b1 s1024": "3B eager prefill at 1024 tokens: host-bound, under-predicted by ~33%",
    # Third run (2026-12-03, new shapes, predicted blind: 2026-12-03-h200-heldout3-blind-predictions.json): one
    # Qwen2.5-14B decode step at batch 24 and 6000 tokens of context reads its KV cache at ~3.5 TB/s.
    "decode qwen2.5-14b-shape b24 ctx6000": "14B decode, batch 24, 6000 tokens: KV read at ~3.5 TB/s; -10.02%",
    # Sixth run (2026-12-04, LoRA/QLoRA fine-tuning, predicted blind: 2026-12-04-h200-heldout6-blind-predictions.json).
    # LoRA: the adapter path (thin rank-r GEMMs that read the whole input and write a full-width output, the scale
    # multiply, the add to the base output, the extra input-gradient add in backward) is memory-bound work run as
    # separate unfused kernels; gpumatch adds only its FLOPs to the compute-bound base GEMMs, so its traffic is not
    # counted. The 8B runs imply ~265 ns per token per layer without recompute, ~390 ns with full recompute.
    "train llama-3-8b b4 s2048 rc=full lora r=16": "LoRA adapter path's memory-bound kernels not counted; -10.4%",
    # The same cause without recompute: -9.99% under the defaults of 2026-12-02, -10.06% since the shipped refit of
    # 2026-12-07 (train_step_overhead_s 11 -> 10.45 ms, estimate/data/calibration.json).
    "train llama-3-8b b4 s2048 rc=none lora r=16": "LoRA adapter path's memory-bound kernels not counted; -10.1%",
    # QLoRA: gpumatch adds the NF4 dequantization bytes to the compute-bound base GEMMs, where the roofline max
    # hides them, so it gives QLoRA the LoRA step time. Dequantization runs as separate kernels before each use (2
    # per step, 3 with full recompute); the bench's plain-torch path (uint8 -> int32 cast, 2-wide F.embedding
    # gather, scale multiply: ~10.5 bytes per weight counted, against ~2.5 for bitsandbytes' fused kernel) costs
    # 5.1-5.6 ps per weight per use on top of LoRA (8B and 14B alike), ~21-22 bytes per weight at 4.0 TB/s.
    **{f"train {name}": f"QLoRA dequantization kernels not counted (bench's plain-torch NF4); {err}"
       for name, err in (("llama-3-8b b4 s2048 rc=none qlora r=16", "-18.4%"),
                         ("llama-3-8b b4 s2048 rc=full qlora r=16", "-19.9%"),
                         ("llama-3-8b b8 s2048 rc=full qlora r=64", "-15.1%"),
                         ("qwen2.5-14b-shape b2 s2048 rc=full qlora r=64", "-27.1%"))},
}
RAN_BUT_PREDICTED_NOT_TO_FIT: dict[str, str] = {
    # Fifth run (2026-12-04, 7B-14B training, predicted blind: 2026-12-04-h200-heldout5-blind-predictions.json):
    # Llama-3-8B under PyTorch AMP ran in 120 GiB where gpumatch predicted 147.7 GiB (the Megatron recipe, 18 bytes
    # per parameter). Fixed by the ``amp`` recipe (16 bytes; gpumatch.estimate.options), chosen after seeing the
    # run, so its AMP cases are no longer blind (docs/accuracy.md). Empty: every step that ran is predicted to fit.
}


def _params(kinds: tuple[str, ...]) -> list[object]:
    out: list[object] = []
    for c in CASES:
        if c.kind not in kinds:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[c.case_id])] if c.case_id in KNOWN_MISSES else []
        out.append(pytest.param(c, id=f"{'fit' if c.fit else 'held-out'}: {c.case_id}", marks=marks))
    return out


def test_the_measurements_are_there_and_describe_their_card() -> None:
    files = [p for p in sorted(DATA.glob("2026-12-0[23]-h200-*.json"))
             if p.stem.rsplit("-", 1)[-1] in ("micro", "decode", "prefill", "train")]
    assert len(files) == 12
    for path in files:
        env = json.loads(path.read_text())["environment"]
        assert env["gpu_name"] == "NVIDIA H200"
        assert env["torch"].startswith("2.11")
        assert env["nvidia_smi"][0]["driver_version"] == "580.159.04"
    kinds = {c.kind for c in CASES}
    assert kinds == {"decode", "prefill", "train-time", "train-memory", "train-fit"}
    assert sum(c.fit for c in CASES) >= 25 and sum(not c.fit for c in CASES) >= 150


@pytest.mark.parametrize("case", _params(("decode", "prefill", "train-time", "train-memory")))
def test_estimate_within_tolerance(case: MeasuredCase) -> None:
    predicted = predict(case)
    err = rel_error(predicted, case.measured)
    msg = f"{case.case_id}: predicted {predicted:.4g}, measured {case.measured:.4g} ({err:+.1%})"
    assert abs(err) <= TOLERANCE, msg


def _ran(case: MeasuredCase) -> str:
    return case.case_id.removeprefix("train ")


@pytest.mark.parametrize("case", [
    pytest.param(c, id=_ran(c), marks=[pytest.mark.xfail(strict=True, reason=RAN_BUT_PREDICTED_NOT_TO_FIT[_ran(c)])]
                 if _ran(c) in RAN_BUT_PREDICTED_NOT_TO_FIT else [])
    for c in CASES if c.kind == "train-time"])
def test_a_training_step_that_ran_is_predicted_to_fit(case: MeasuredCase) -> None:
    assert predict(replace(case, metric="fits")) == 1.0, f"{case.case_id} ran on the H200; gpumatch: does not fit"


@pytest.mark.parametrize("case", _params(("train-fit",)))
def test_out_of_memory_case_is_predicted_not_to_fit(case: MeasuredCase) -> None:
    assert predict(case) == 0.0, f"{case.case_id} ran out of memory on the H200; gpumatch says it fits"
