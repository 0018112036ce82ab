"""CPU checks of the kernel-path check and the convergence runs (tiny sizes, a fake timer where speed matters)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import pytest

from gpumatch.bench.shapes import LLAMA_3_8B, QWEN2_5_0_5B, tiny_shape
from gpumatch.bench.stats import summarize

torch = pytest.importorskip("torch")

from gpumatch.bench import convergence as cv  # noqa: E402
from gpumatch.bench import kernelpath as kp  # noqa: E402

CPU = torch.device("cpu")


def fake_timer(calls: list[dict[str, Any]]) -> kp.Timer:
    """100 TFLOP/s when K and N are multiples of 128, 40 otherwise; records what was timed."""

    def timer(fn: Callable[[], object], device: Any, info: dict[str, Any]) -> dict[str, Any]:
        fn()  # the call must run
        calls.append(info)
        aligned = info["k"] % 128 == 0 and info["n"] % 128 == 0
        rate = 100e12 if aligned else 40e12
        return summarize([2.0 * info["m"] * info["n"] * info["k"] / rate] * 3)

    return timer


def test_workload_gemms_llama3_8b() -> None:
    got = {g["name"]: (g["m"], g["n"], g["k"]) for g in kp.workload_gemms(LLAMA_3_8B, 2048)}
    assert got == {"qkv": (2048, 6144, 4096), "o": (2048, 4096, 4096), "gate_up": (2048, 28672, 4096),
                   "down": (2048, 4096, 14336), "lm_head": (2048, 128256, 4096)}
    qwen = {g["name"]: (g["n"], g["k"]) for g in kp.workload_gemms(QWEN2_5_0_5B, 1)}
    assert qwen["qkv"] == ((14 + 2 * 2) * 64, 896) and qwen["lm_head"] == (151936, 896)
    assert all(g["flops"] == 2.0 * g["m"] * g["n"] * g["k"] for g in kp.workload_gemms(QWEN2_5_0_5B, 7))


def test_aligned_shape_keeps_flops_and_alignment() -> None:
    m, n, k = kp.aligned_shape(4096, 2880, 2880)
    assert n % 128 == 0 and k % 128 == 0 and m % 64 == 0
    assert abs(m * n * k / (4096 * 2880 * 2880) - 1) < 0.03
    assert kp.aligned_shape(1, 4097, 4096) == (1, 4096, 4096)  # a decode M is kept
    assert kp.aligned_shape(64, 64, 64) == (64, 64, 64)


def test_misaligned_shape_flagged_with_reason() -> None:
    calls: list[dict[str, Any]] = []
    row = kp.kernel_path_case("odd", 256, 2880, 2881, "bf16", CPU, timer=fake_timer(calls))
    assert row["flagged"] and row["slow_vs_aligned"]
    assert row["ratio_to_aligned"] == pytest.approx(0.4)
    assert any(r.startswith("K=2881 odd") for r in row["reasons"])
    assert any(r == "N=2880 not a multiple of 128 (a multiple of 64): tensor-core tiles partially filled"
               for r in row["reasons"])
    a = row["aligned"]
    assert a["n"] % 128 == 0 and a["k"] % 128 == 0 and not a["same_shape"]
    assert [c["role"] for c in calls] == ["own", "aligned"]
    assert row["torch"] == torch.__version__ and row["device"] == "cpu"
    assert row["layout"]["x"]["contiguous"] and row["layout"]["w"]["strides"] == [2881, 1]
    assert row["tensor_path"] == kp.NO_CUDA and row["kernels"] == kp.NO_CUDA


def test_aligned_shape_not_flagged_and_timed_once() -> None:
    calls: list[dict[str, Any]] = []
    row = kp.kernel_path_case("o", 256, 512, 384, "fp16", CPU, timer=fake_timer(calls))
    assert not row["flagged"] and row["reasons"] == [] and row["aligned"]["same_shape"]
    assert row["ratio_to_aligned"] == 1.0 and len(calls) == 1


def test_threshold_decides_the_flag() -> None:
    row = kp.kernel_path_case("odd", 256, 2880, 2881, "bf16", CPU, threshold=0.3, timer=fake_timer([]))
    assert not row["flagged"] and row["alignment_issues"]


def test_fp8_without_cuda_falls_back_to_bf16() -> None:
    row = kp.kernel_path_case("qkv", 64, 256, 128, "fp8", CPU, timer=fake_timer([]))
    assert row["ran_precision"] == "bf16" and row["fell_back"] and row["flagged"]
    why = row["reasons"][0]
    assert why.startswith("fp8 path unavailable on this device") and why.endswith("fell back to bf16")


def test_fp32_tensor_path_skipped_on_cpu() -> None:
    for precision in ("fp32", "tf32"):
        row = kp.kernel_path_case("o", 64, 128, 128, precision, CPU, timer=fake_timer([]))
        assert row["tf32"] == kp.NO_CUDA and row["tensor_path"] == kp.NO_CUDA and not row["flagged"]


def test_suite_on_tiny_shape_real_timer() -> None:
    rows = kp.kernel_path_suite(tiny_shape(), "bf16", 16, CPU, iters=2)
    assert [r["name"] for r in rows] == ["qkv", "o", "gate_up", "down", "lm_head"]
    assert all(r["status"] == "ok" and r["timing"]["n"] == 2 and r["tflops_per_s"] > 0 for r in rows)
    assert {r["model"] for r in rows} == {"tiny"} and all(r["tokens"] == 16 for r in rows)
    assert kp.flagged(rows) == [
        {k: r[k] for k in ("name", "m", "n", "k", "precision", "ratio_to_aligned", "reasons")}
        for r in rows if r["flagged"]]


def test_unknown_precision_refused() -> None:
    with pytest.raises(ValueError, match="unknown precision 'int4'; choose one of bf16, fp16, fp8, fp32, tf32"):
        kp.kernel_path_case("x", 1, 1, 1, "int4", CPU)
    with pytest.raises(ValueError, match="unknown precision"):
        kp.kernel_path_suite(tiny_shape(), "fp64", 4, CPU)
    with pytest.raises(ValueError, match="unknown precision 'fp4'"):
        cv.convergence_case(tiny_shape(), "fp4", CPU)
    with pytest.raises(ValueError, match="unknown recompute 'some'"):
        cv.convergence_case(tiny_shape(), "bf16", CPU, recompute="some")
    with pytest.raises(ValueError, match="threshold"):
        kp.kernel_path_case("x", 1, 1, 1, "bf16", CPU, threshold=1.5)
    with pytest.raises(ValueError, match="tokens"):
        kp.workload_gemms(tiny_shape(), 0)


def test_markov_source_entropy_is_the_minimum_loss() -> None:
    src = cv.MarkovSource(states=16, branch=3, seed=3)
    pi, p = src.stationary, src.transition
    assert torch.allclose(pi @ p, pi, atol=1e-9) and torch.allclose(p.sum(-1), torch.ones(16, dtype=p.dtype))
    seqs = src.sample(400, 50, torch.Generator().manual_seed(0))
    nll = -p[seqs[:, :-1], seqs[:, 1:]].log().mean().item()  # the true chain's own loss on samples
    assert nll == pytest.approx(src.entropy_nats, abs=0.03)
    assert 0 < src.entropy_nats < math.log(3)
    assert cv.MarkovSource(states=8, branch=1).entropy_nats == pytest.approx(0.0, abs=1e-12)


def _run(precision: str, recompute: str = "none", steps: int = 40) -> dict[str, Any]:
    src = cv.MarkovSource(states=32, seed=0)
    return cv.convergence_case(tiny_shape(layers=1, vocab=64), precision, CPU, recompute=recompute, steps=steps,
                               batch=8, seq=32, lr=1e-2, seed=0, source=src, log_every=5)


def test_loss_falls_toward_the_chain_entropy() -> None:
    row = _run("fp32")
    assert row["status"] == "ok"
    h = row["entropy_nats"]
    assert row["initial_loss"] == pytest.approx(math.log(64), abs=0.2)
    assert row["final_loss"] > h - 0.05  # nothing beats the source's entropy (up to sampling noise)
    assert row["fraction_learned"] > 0.8 and row["gap_to_entropy"] < 0.4
    assert row["time_to_target_s"] is not None and row["steps_to_target"] <= 40
    curve = row["curve"]
    assert [p["step"] for p in curve] == [1, 5, 10, 15, 20, 25, 30, 35, 40]
    assert all(b["wall_s"] >= a["wall_s"] for a, b in itertools.pairwise(curve))
    assert row["tokens_per_s"] > 0 and row["loss_drop_per_s"] > 0
    again = _run("fp32")
    assert again["final_loss"] == row["final_loss"]  # fixed seed: same data, same initial weights


def test_variants_are_comparable() -> None:
    rows = [_run("bf16"), _run("bf16", "full"), _run("fp16", steps=40), _run("fp8")]
    keys = set(rows[0])
    assert rows[0]["status"] == rows[1]["status"] == rows[2]["status"] == "ok"
    assert set(rows[1]) == keys and set(rows[2]) == keys
    assert rows[0]["initial_loss"] == pytest.approx(rows[1]["initial_loss"], abs=1e-3)  # same start, same data
    assert rows[0]["final_loss"] == pytest.approx(rows[1]["final_loss"], abs=0.05)  # recompute: same math
    assert rows[3]["status"] == "skipped" and "fp8 path unavailable" in rows[3]["reason"]
    cmp = cv.compare_convergence(rows)
    assert cmp["baseline"] == {"precision": "bf16", "recompute": "none"}
    assert cmp["common_loss"] == max(r["final_loss"] for r in rows[:3])
    v = cmp["variants"]
    assert v[0]["speedup_vs_baseline"] == 1.0 and v[0]["final_loss_vs_baseline"] == 0.0
    assert all(x["time_to_common_loss_s"] is not None and x["loss_at_common_time"] > 0 for x in v[:3])
    assert v[3] == {"precision": "fp8", "recompute": "none", "status": "skipped", "reason": rows[3]["reason"]}


def test_compare_refuses_different_sources() -> None:
    a = _run("fp32", steps=3)
    b = dict(a, entropy_nats=a["entropy_nats"] + 1)
    with pytest.raises(ValueError, match="different synthetic sources"):
        cv.compare_convergence([a, b])


def test_fp8_linear_matches_bf16_where_scaled_mm_runs() -> None:
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8 in this torch")
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(2, 8, 64, requires_grad=True)
    f8 = cv.Fp8Linear(lin)
    try:
        y = f8(x)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"_scaled_mm does not run on this CPU build: {exc}")
    ref = x @ lin.weight.t()
    assert y.shape == (2, 8, 32) and y.dtype == torch.bfloat16
    assert torch.allclose(y.float(), ref, atol=0.15 * ref.abs().max().item())
    y.float().sum().backward()
    assert x.grad is not None and lin.weight.grad is not None
    assert torch.allclose(x.grad, lin.weight.sum(0).expand(2, 8, 64), atol=0.05)
