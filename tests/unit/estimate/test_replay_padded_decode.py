"""The `gpumatch` profile's padded decode (engines.toml padded_decode; estimate.passes.padded_shape): gpumatch serve
runs its decode rows as a CUDA graph of a padded shape, and the estimate costs that shape (the runner's own rule
is pinned against it in tests/unit/bench/server/test_runner.py)."""

from __future__ import annotations

import math

import pytest

from gpumatch.estimate import Request, estimate
from gpumatch.estimate.engine_profiles import engine_profile
from gpumatch.estimate.passes import (
    PassTables,
    Scheduler,
    batch_bucket,
    context_bucket,
    padded_shape,
    pass_cost,
    pass_tables,
)


def test_buckets() -> None:
    assert [batch_bucket(b, 64) for b in (0, 1, 3, 4, 5, 33, 48, 64)] == [0, 1, 4, 4, 8, 64, 64, 64]
    assert batch_bucket(40, 48) == 48 and batch_bucket(12.3) == 16
    assert [context_bucket(n) for n in (1, 16, 17, 300, 512, 513, 1152, 1536, 2049)] == [
        16, 16, 32, 512, 512, 1024, 1536, 1536, 2560]
    assert padded_shape(48, 1152, 64) == (64, 1536)


def test_only_the_gpumatch_profile_pads() -> None:
    assert engine_profile("gpumatch").padded_decode
    assert not any(engine_profile(e).padded_decode for e in ("vllm", "sglang", "trtllm"))


def test_a_padded_pass_costs_the_unpadded_pass_of_its_graph_shape() -> None:
    """48 rows at a mean context of 1000 whose longest attends 1152 keys cost, padded, what 64 rows reading 1536
    keys each cost unpadded; the host cost still counts the real rows."""
    from gpumatch.estimate.api import model_arch, resolve_gpu
    from gpumatch.estimate.calibration import DEFAULT_CALIBRATION
    from gpumatch.estimate.case import model_nums
    from gpumatch.estimate.options import build_case

    arch = model_arch("llama-3.1-8b")
    case, _ = build_case(arch, resolve_gpu("h100-sxm"), Request(task="serve", engine="gpumatch"))
    k = pass_tables(model_nums(arch), case, DEFAULT_CALIBRATION, 64, 2048.0, 8192.0)
    plain = Scheduler("mixed", 8192, math.inf, math.inf, True, 0.0, 0.0)
    padded = Scheduler("mixed", 8192, math.inf, math.inf, True, 0.0, 0.0, padded_decode=True, decode_slots=64)
    got = pass_cost(k, padded, 48, 1000.0, [], longest=1152.0)
    assert got.decode_s == pytest.approx(pass_cost(k, plain, 64, 1536.0, []).decode_s)
    assert got.decode_s > pass_cost(k, plain, 48, 1000.0, []).decode_s
    mixed = pass_cost(k, padded, 48, 1000.0, [(0.0, 512.0)], longest=1152.0)
    assert mixed.decode_s == got.decode_s and mixed.linear_s > 0


def test_serve_estimates_of_the_gpumatch_profile_pay_the_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 48 clients of 1024/512 the running batch pads to 64 rows reading 1536 keys: the steady state's TPOT is
    higher than the same profile's without padding by about the decode steps' difference (about 1.9 ms on an H100
    SXM: 64 rows x 1536 keys against 48 x ~1280), and so is the replay's."""
    from gpumatch.estimate import engine_profiles

    def tpot(num_prompts: int) -> float:
        req = Request(task="serve", engine="gpumatch", prompt=1024, gen=512, concurrency=48, num_prompts=num_prompts)
        return float(estimate("llama-3.1-8b", "h100-sxm", req).metrics["tpot_s"])

    padded = tpot(0), tpot(96)
    real = engine_profiles.engine_profile
    monkeypatch.setattr(engine_profiles, "engine_profile",
                        lambda name: real(name).model_copy(update={"padded_decode": False}))
    plain = tpot(0), tpot(96)
    assert all(1.2e-3 < p - q < 2.6e-3 for p, q in zip(padded, plain, strict=True)), (padded, plain)


def test_the_replay_pays_each_passs_context_bucket_as_the_longest_request_crosses_them() -> None:
    """One client, prompt 768, 384 tokens, a decode step linear in the keys read (D0 + s * keys): the decode
    passes attend 769 .. 1151 keys, read 1024 keys for the first 256 and 1536 for the rest (a stretch of
    decode passes is split where the longest request crosses a bucket), so TPOT is their mean."""
    import numpy as np

    from gpumatch.estimate.replay import Benchmark, run

    d0, slope = 0.005, 1e-6
    contexts = np.array([0.0, 4096.0])
    k = PassTables(decode_table=np.tile(d0 + slope * contexts, (4, 1)), contexts=contexts,
               prefill_x=np.array([0.0, 1e7]), attention_s=np.array([0.0, 0.0]), linear_x=np.array([1.0, 1e7]),
               linear_s=np.array([0.0, 0.0]), prefill_fixed_s=0.004, micro_batches=lambda seqs: 1.0)
    padded = Scheduler("mixed", 8192, math.inf, 1e9, True, 0.0, 0.0, padded_decode=True, decode_slots=64)
    r = run(k, padded, 1, Benchmark(2), 768, 384)
    keys = [context_bucket(768 + 1 + j) for j in range(383)]
    assert keys.count(1024.0) == 256 and keys.count(1536.0) == 127
    assert r.tpot_s == pytest.approx(d0 + slope * sum(keys) / len(keys))
