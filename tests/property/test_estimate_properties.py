"""Properties every estimate must keep (DESIGN.md 'property' tests), checked with Hypothesis."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumatch.estimate import Case, evaluate, model_nums
from gpumatch.models import get_model

MODELS = ["llama-3.2-1b", "llama-3.1-8b", "mixtral-8x7b", "llama-3.1-70b", "gemma-2-9b", "deepseek-v2-lite"]
TRAIN = ["train", "lora", "qlora"]


def _case(**kw: float) -> Case:
    base: dict[str, float] = dict(capacity_bytes=80e9, bandwidth_bytes_per_s=3.35e12, peak_flops_per_s=989e12,
                                  tdp_w=700.0, scaleup_bytes_per_s=450e9, scaleup_domain=8.0)
    base.update(kw)
    return Case(**base)


def _task_case(task: str, **kw: float) -> Case:
    if task == "qlora":
        kw.setdefault("weight_bytes", 0.516)
    if task in ("lora", "qlora"):
        kw.update(full_train=0.0, lora_rank=16.0)
    return _case(**kw)


small = st.integers(min_value=1, max_value=64)
seqs = st.sampled_from([128, 512, 1024, 2048, 4096, 8192])


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), task=st.sampled_from(["infer", "serve", *TRAIN]), b=small, s=seqs,
       rc=st.sampled_from(["none", "selective", "full"]), flash=st.booleans())
def test_memory_grows_with_batch_and_sequence(model: str, task: str, b: int, s: int, rc: str, flash: bool) -> None:
    m = model_nums(get_model(model))
    kw = dict(rc_full=float(rc == "full"), rc_selective=float(rc == "selective"), flash=float(flash))
    c = _task_case(task, seqs_per_replica=float(b), seq=float(s), prompt=float(s), **kw)
    base = evaluate(task, m, c)
    # totals never shrink (they can plateau where gradients, not activations, set a training peak) ...
    for bigger in (replace(c, seqs_per_replica=b + 1.0), replace(c, seq=2.0 * s, prompt=2.0 * s)):
        out = evaluate(task, m, bigger)
        assert out["total_bytes"] >= base["total_bytes"]
        # ... and what batch and sequence drive (activations, KV cache) strictly grows
        assert out["activations_bytes"] + out["kv_cache_bytes"] > base["activations_bytes"] + base["kv_cache_bytes"]


def _sharded_bytes(out: dict[str, float]) -> float:
    """Per-GPU memory without the communication buffers that a parallel group itself adds."""
    return float(out["total_bytes"] - out["comm_buffer_bytes"])


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), task=st.sampled_from(["infer", *TRAIN]), b=small, s=seqs,
       tp=st.sampled_from([2, 4, 8]), dp=st.sampled_from([2, 4, 8, 64]), pp=st.sampled_from([2, 4]),
       zero=st.integers(min_value=0, max_value=2))
def test_sharding_never_raises_per_gpu_memory(
    model: str, task: str, b: int, s: int, tp: int, dp: int, pp: int, zero: int
) -> None:
    arch = get_model(model)
    m = model_nums(arch)
    c = _task_case(task, seqs_per_replica=float(b), seq=float(s), prompt=float(s))
    one = _sharded_bytes(evaluate(task, m, c))
    if arch.heads % tp == 0:
        assert _sharded_bytes(evaluate(task, m, replace(c, tp=float(tp)))) <= one
    if pp <= arch.layers:
        assert _sharded_bytes(evaluate(task, m, replace(c, pp=float(pp)))) <= one
    if task in TRAIN:
        lower = evaluate(task, m, replace(c, dp=float(dp), zero=float(zero)))
        higher = evaluate(task, m, replace(c, dp=float(dp), zero=float(zero + 1)))
        assert _sharded_bytes(higher) <= _sharded_bytes(lower) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), task=st.sampled_from(["infer", "serve", *TRAIN]), b=small, s=seqs,
       tp=st.sampled_from([1, 2, 8]))
def test_step_time_positive_and_monotone_in_batch(model: str, task: str, b: int, s: int, tp: int) -> None:
    arch = get_model(model)
    if arch.heads % tp:
        tp = 1
    m = model_nums(arch)
    c = _task_case(task, seqs_per_replica=float(b), seq=float(s), prompt=float(s), tp=float(tp))
    key = "step_s" if task in TRAIN else "tpot_s"
    t1 = evaluate(task, m, c)[key]
    t2 = evaluate(task, m, replace(c, seqs_per_replica=b + 1.0))[key]
    # non-decreasing: a step whose kernels are dispatched eagerly can be CPU-bound, flat in batch
    # (compared up to float rounding)
    assert 0 < t1 <= t2 * (1 + 1e-12)
    if task not in TRAIN:
        p1 = evaluate(task, m, c)["prefill_s"]
        assert 0 < p1 <= evaluate(task, m, replace(c, seqs_per_replica=b + 1.0))["prefill_s"] * (1 + 1e-12)


def test_vectorized_matches_scalar() -> None:
    """The array path gives the scalar path's numbers element by element."""
    m = model_nums(get_model("llama-3.1-8b"))
    batches = np.array([1.0, 4.0, 16.0, 64.0])
    tps = np.array([1.0, 2.0, 4.0, 8.0])
    for task in ("serve", "train", "lora"):
        vec = evaluate(task, m, _task_case(task, seqs_per_replica=batches, tp=tps))
        for i in range(4):
            one = evaluate(task, m, _task_case(task, seqs_per_replica=float(batches[i]), tp=float(tps[i])))
            time_key = "tpot_s" if task == "serve" else "step_s"
            for key in ("total_bytes", "power_w", "energy_j_per_token", "bound_index", time_key):
                assert np.broadcast_to(vec[key], batches.shape)[i] == pytest_approx(one[key])


def pytest_approx(v: float) -> object:
    import pytest

    return pytest.approx(v, rel=1e-9)
