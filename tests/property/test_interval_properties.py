"""Every interval holds its estimate: low ≤ figure ≤ high for every figure of every estimate (Hypothesis)."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpumatch.errors import InputError
from gpumatch.estimate import Request, estimate

MODELS = ["llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "qwen2.5-7b", "gemma-2-9b"]
GPUS = ["H200 SXM 141GB", "H100 SXM5 80GB", "L4", "Instinct MI300X", "GeForce RTX 4090", "A100 SXM4 80GB"]


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       task=st.sampled_from(["infer", "serve", "train", "lora", "qlora"]), batch=st.integers(1, 64),
       length=st.sampled_from([128, 1000, 2048, 8192]), gen=st.sampled_from([1, 64, 512]),
       precision=st.sampled_from(["bf16", "fp8", "int4"]), count=st.sampled_from([1, 2, 8]))
def test_every_interval_holds_its_figure(model: str, gpu: str, task: str, batch: int, length: int, gen: int,
                                         precision: str, count: int) -> None:
    training = task in ("train", "lora", "qlora")
    opts: dict[str, object] = {"task": task, "tp": count,
                               ("micro_batch" if task in ("train", "lora", "qlora") else "concurrency"): batch}
    opts.update({"seq": length} if training else {"prompt": length, "gen": gen, "precision": precision})
    if task == "qlora":
        opts["precision"] = "nf4"
    try:
        est = estimate(model, gpu, Request(**opts), run_tokens=1e9)
    except InputError:
        assume(False)
        return
    d = est.to_dict()
    assert "total_bytes" in d["intervals"]
    for name, (lo, hi) in d["intervals"].items():
        value = d["memory"][name] if name == "total_bytes" else d[name]
        assert math.isfinite(lo) and math.isfinite(hi)
        assert 0 <= lo <= value * (1 + 1e-12) and value <= hi * (1 + 1e-12), (name, lo, value, hi)
        assert d["interval_basis"][name]
    if est.fits:
        key = "step_s" if training else "tpot_s"
        assert key in d["intervals"]
