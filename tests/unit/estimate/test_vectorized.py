"""The planner's vectorized path gives the scalar estimate's numbers, candidate by candidate."""

from __future__ import annotations

import numpy as np
import pytest

from gpumatch.catalog import get_gpu
from gpumatch.estimate import Request, estimate, evaluate, model_nums
from gpumatch.estimate.vectorized import candidate_case, case_supported, gpu_table, layout_valid
from gpumatch.models import get_model

GPUS = ["H100 SXM", "A100 SXM4 80GB", "RTX 4090"]


@pytest.mark.parametrize("task", ["serve", "train", "qlora"])
def test_vector_equals_scalar(task: str) -> None:
    arch = get_model("llama-3.1-8b")
    table = gpu_table([get_gpu(g) for g in GPUS])
    gi = np.array([0, 1, 2, 0, 1])
    tp = np.array([1, 2, 1, 4, 8])
    dp = np.array([1, 1, 2, 2, 1])
    batch = np.array([1, 4, 8, 16, 2])
    prec = np.array(["bf16", "int8", "int4", "fp8", "bf16"]) if task == "serve" else "bf16"
    rc = np.array(["none", "full", "selective", "none", "full"])
    seq = {"seq": 2048.0} if task != "serve" else {"prompt": 1024.0, "gen": 128.0}
    # serve: the static-batch model's kernels (engine "static": PyTorch SDPA, no split-KV decode), as estimate() below
    case = candidate_case(arch, table, task, gpu_index=gi, tp=tp, dp=dp, seqs_per_replica=batch, precision=prec,
                          recompute=rc, engine="static" if task == "serve" else None, **seq)
    out = evaluate(task, model_nums(arch), case)
    supported = case_supported(case)
    key = "step_s" if task != "serve" else "tpot_s"
    for i in range(5):
        p = prec if isinstance(prec, str) else str(prec[i])
        if not supported[i]:
            assert p == "fp8" and GPUS[gi[i]] != "H100 SXM"
            continue
        # estimate() refuses recompute for serving; the vectorized path is the static-batch model
        train_only = {"recompute": str(rc[i])} if task != "serve" else {"engine": "static"}
        p = "nf4" if task == "qlora" else p  # the QLoRA base (estimate() refuses a 16-bit one)
        per_replica = ({"micro_batch": int(batch[i])} if task != "serve"
                       else {"concurrency": int(batch[i]) * int(dp[i])})  # the candidate's sequences per replica
        e = estimate(arch, GPUS[gi[i]], Request(task=task, tp=int(tp[i]), dp=int(dp[i]), precision=p, **per_replica,
                                                **train_only, **{k: int(v) for k, v in seq.items()}),
                     with_scaling=False)
        assert out[key][i] == pytest.approx(e.metrics[key], rel=1e-9)
        assert out["total_bytes"][i] == pytest.approx(e.memory.total_bytes, rel=1e-9)
        assert bool(out["fits"][i]) == e.fits


def test_unsupported_precision_is_nan_not_error() -> None:
    arch = get_model("llama-3.1-8b")
    table = gpu_table([get_gpu("A100 SXM4 80GB"), get_gpu("H100 SXM")])
    case = candidate_case(
        arch, table, "serve", gpu_index=np.array([0, 1]), seqs_per_replica=np.array([1, 1]), precision="fp8"
    )
    assert list(case_supported(case)) == [False, True]


def test_layout_valid() -> None:
    arch = get_model("llama-3.1-8b")
    assert list(layout_valid(arch, np.array([1, 3, 8]), np.array([1, 1, 40]))) == [True, False, False]


def test_choice_equals_string_arrays() -> None:
    from gpumatch.estimate.vectorized import Choice

    arch = get_model("llama-3.1-8b")
    table = gpu_table([get_gpu("H100 SXM")])
    codes = np.array([0, 1, 2, 1])
    names = ("bf16", "fp8", "int4")
    as_str = np.array(names)[codes]
    kv = Choice(("bf16", "fp8"), np.array([0, 1, 1, 0]))
    m = model_nums(arch)
    a = evaluate(
        "serve",
        m,
        candidate_case(
            arch,
            table,
            "serve",
            gpu_index=np.zeros(4, int),
            seqs_per_replica=np.full(4, 8.0),
            precision=Choice(names, codes),
            kv_precision=kv,
        ),
    )
    b = evaluate(
        "serve",
        m,
        candidate_case(
            arch,
            table,
            "serve",
            gpu_index=np.zeros(4, int),
            seqs_per_replica=np.full(4, 8.0),
            precision=as_str,
            kv_precision=np.array(["bf16", "fp8", "fp8", "bf16"]),
        ),
    )
    assert np.allclose(a["tpot_s"], b["tpot_s"]) and np.allclose(a["total_bytes"], b["total_bytes"])
    assert a["kv_cache_bytes"][1] == pytest.approx(a["kv_cache_bytes"][0] / 2)
