"""Pipeline parallelism overlaps micro-batches (issue 12 item 2): serving engines keep ``pp`` micro-batches in
flight (decode cycles, prefill fills and drains), a plain PyTorch run does not, training runs 1F1B."""

from __future__ import annotations

import pytest

from gpumatch.catalog import get_gpu
from gpumatch.estimate import DEFAULT_CALIBRATION, Request, estimate, model_nums, roofline
from gpumatch.estimate.case import Case
from gpumatch.estimate.options import build_case
from gpumatch.models import get_model

ARCH = get_model("llama-3.1-70b")
GPU = get_gpu("H100 SXM5 80GB")
CTX = 2048.0 + 128.5


def _case(task: str, pp: int, batch: int, prompt: int = 2048, engine: str | None = None) -> Case:
    case, _ = build_case(ARCH, GPU, Request(task=task, tp=4, pp=pp, dp=1, concurrency=batch, prompt=prompt, gen=256,
                                            engine=engine))
    return case


def test_micro_batches_in_flight() -> None:
    assert roofline.pipeline_micro_batches(_case("serve", 1, 32), 32.0) == 1.0
    assert roofline.pipeline_micro_batches(_case("serve", 2, 32), 32.0) == 2.0
    assert roofline.pipeline_micro_batches(_case("serve", 4, 32), 3.0) == 3.0  # a sequence is never split
    assert roofline.pipeline_micro_batches(_case("serve", 4, 32), 0.2) == 1.0
    assert roofline.pipeline_micro_batches(_case("infer", 2, 32), 32.0) == 1.0  # HF device_map: one stage at a time


def test_serving_decode_is_a_micro_batch_crossing_every_stage() -> None:
    """TPOT of 32 sequences on 2 stages = a micro-batch of 16 crossing both stages (all the layers at 16, plus the
    hop), below all the layers at 32 (the stages one after another) but not by much: memory-bound decode reads
    the stage's weights again for each micro-batch, so the gain is the KV reads and compute of half the batch."""
    m, cal = model_nums(ARCH), DEFAULT_CALIBRATION
    tpot = roofline.decode_step(m, _case("serve", 2, 32), CTX, cal)["time_s"]
    at16 = roofline.decode_step(m, _case("serve", 1, 16), CTX, cal)["time_s"]
    at32 = roofline.decode_step(m, _case("serve", 1, 32), CTX, cal)["time_s"]
    assert at16 < tpot < at32
    assert tpot == pytest.approx(at16, rel=0.03)


def test_serving_prefill_fills_and_drains_the_pipeline() -> None:
    """32 prompts of 2048 on 2 stages in 2 micro-batches: the latency of one plus one more slowest stage, about 3/4
    of the same prefill on one stage of all the layers (compute-bound), not the same time as before."""
    m, cal = model_nums(ARCH), DEFAULT_CALIBRATION
    overlapped = roofline.prefill(m, _case("serve", 2, 32), cal)["time_s"]
    one_stage = roofline.prefill(m, _case("serve", 1, 32), cal)["time_s"]
    assert 0.70 < overlapped / one_stage < 0.80
    # one prompt cannot be split: it crosses the stages one after another
    alone = roofline.prefill(m, _case("serve", 2, 32), cal, batch=1.0)["time_s"]
    assert alone >= roofline.prefill(m, _case("serve", 1, 32), cal, batch=1.0)["time_s"]


def test_pp1_is_unchanged_and_infer_keeps_stages_in_series() -> None:
    kw = {"prompt": 2048, "gen": 256}
    a = estimate(ARCH, GPU, Request(task="infer", tp=4, pp=2, **kw, concurrency=32), with_scaling=False)
    lat = roofline.decode_step(model_nums(ARCH), _case("infer", 2, 32), CTX, DEFAULT_CALIBRATION)["time_s"]
    assert a.metrics["tpot_s"] == lat
    one = estimate(
        ARCH, GPU, Request(task="serve", engine="static", tp=4, pp=1, count=8, **kw, concurrency=32), with_scaling=False
    )
    case = _case("serve", 1, 16, engine="static")  # PyTorch's SDPA: no split-KV decode (engines.toml)
    assert one.metrics["tpot_s"] == roofline.decode_step(model_nums(ARCH), case, CTX, DEFAULT_CALIBRATION)["time_s"]


def test_engine_throughput_rises_with_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 70B TP4 x PP2 example: vLLM at 32 in flight serves at least 5 % more tokens/s with overlapped stages than
    the same estimate with one micro-batch in the pipeline (the sequential-stage model before issue 12 item 2, then
    1,481 tok/s and TPOT 21.5 ms)."""
    req = Request(task="serve", engine="vllm", tp=4, pp=2, count=8, concurrency=32)
    overlapped = estimate(ARCH, GPU, req, with_scaling=False)
    monkeypatch.setattr(roofline, "pipeline_micro_batches", lambda c, seqs: 1.0)
    sequential = estimate(ARCH, GPU, req, with_scaling=False)
    assert overlapped.metrics["output_tokens_per_s"] > sequential.metrics["output_tokens_per_s"] * 1.05
    assert overlapped.metrics["tpot_s"] < sequential.metrics["tpot_s"]


def test_training_stages_overlap_in_1f1b() -> None:
    """Training already overlaps stages: a step is (m + p - 1) micro-batch slots of one stage (1F1B, Narayanan et
    al. 2021 section 2.2.1), so PP 2 at 8 micro-batches is about 9/16 of the one-stage step, not all of it."""
    kw = {"task": "train", "tp": 8, "micro_batch": 1, "seq": 4096, "micro_batches": 8, "recompute": "full", "zero": 1}
    one = estimate(ARCH, "H200 SXM", Request(dp=2, pp=1, count=16, **kw), with_scaling=False).metrics
    two = estimate(ARCH, "H200 SXM", Request(dp=2, pp=2, count=32, **kw), with_scaling=False).metrics
    assert one["bubble_s"] == 0.0
    slot = two["bubble_s"]  # (p - 1) = 1 slot of one stage's micro-batch
    assert 9 * slot < two["step_s"] < 9 * slot * 1.2
    assert two["step_s"] == pytest.approx(one["step_s"] * 9 / 16, rel=0.05)
