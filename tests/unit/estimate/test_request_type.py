"""The one estimate request (:mod:`gpumatch.estimate.request`): the batch concepts under their own names, the two
split rules written once (and the planner's enumeration using them), validation in one place, ``count`` as an
input of ``dp``."""

from __future__ import annotations

import numpy as np
import pytest

from gpumatch.catalog import get_gpu
from gpumatch.errors import InputError
from gpumatch.estimate import Request, build_case, estimate
from gpumatch.estimate.request import grad_accum, seqs_per_replica
from gpumatch.models import get_model
from gpumatch.plan.enumeration import enumerate_candidates
from gpumatch.plan.request import with_options

GPU = "H100 SXM5 80GB"


@pytest.mark.parametrize(("concurrency", "replicas", "per_replica", "in_flight"),
                         [(32, 3, 11, 32), (33, 3, 11, 33), (8, 1, 8, 8), (2, 4, 1, 4), (1, 1, 1, 1)])
def test_concurrency_is_split_over_the_replicas(concurrency: int, replicas: int, per_replica: int,
                                                in_flight: int) -> None:
    req = Request(task="serve", concurrency=concurrency, dp=replicas)
    assert (req.seqs_per_replica, req.in_flight, req.count) == (per_replica, in_flight, replicas)
    assert seqs_per_replica(concurrency, replicas) == per_replica
    assert bool(req.warnings) == (concurrency < replicas)


def test_the_rules_take_arrays_as_the_planner_does() -> None:
    conc, dp = np.array([32, 33, 2, 7]), np.array([3, 3, 4, 7])
    assert seqs_per_replica(conc, dp).tolist() == [11, 11, 1, 1]
    assert grad_accum(np.array([64, 64, 6]), np.array([2, 4, 8]), np.array([4, 4, 1])).tolist() == [8, 4, 1]


@pytest.mark.parametrize(("fields", "micro", "accum"), [
    ({"global_batch": 64, "micro_batch": 2, "dp": 4}, 2, 8),        # accumulation from the two batches
    ({"global_batch": 30, "dp": 4}, 8, 1),                          # split over the ranks, no accumulation
    ({"global_batch": 64, "micro_batches": 4, "dp": 4}, 4, 4),      # the accumulation given: the micro-batch follows
    ({"micro_batch": 3}, 3, 1),
    ({}, 1, 1),
])
def test_training_micro_batch_and_accumulation(fields: dict[str, int], micro: int, accum: int) -> None:
    req = Request(task="train", **fields)
    assert (req.seqs_per_replica, req.grad_accum) == (micro, accum)


def test_the_case_carries_the_split() -> None:
    case, warnings = build_case(get_model("llama-3.1-8b"), get_gpu(GPU), Request(task="serve", concurrency=32, count=3))
    assert (case.seqs_per_replica, case.in_flight, case.dp) == (11.0, 32.0, 3.0) and not warnings
    train, _ = build_case(get_model("llama-3.2-1b"), get_gpu(GPU), Request(task="train", global_batch=64, micro_batch=2,
                                                                    count=4))
    assert (train.seqs_per_replica, train.micro_batches, train.in_flight) == (2.0, 8.0, float("inf"))


def test_count_gives_dp_or_is_checked() -> None:
    assert Request(count=8, tp=2).dp == 4
    assert Request(count=8, tp=2, dp=4).count == 8
    with pytest.raises(InputError, match="not a multiple of tp×pp"):
        Request(count=6, tp=4)
    with pytest.raises(InputError, match=r"count 8 != tp×pp×dp"):
        Request(count=8, tp=2, dp=2)


@pytest.mark.parametrize(("fields", "needle"), [
    ({"batch": 4}, "unknown option"),
    ({"task": "train", "concurrency": 8}, "--concurrency applies to inference only"),
    ({"task": "serve", "micro_batch": 2}, "--micro-batch applies to training only"),
    ({"task": "infer", "global_batch": 8}, "--global-batch applies to training only"),
    ({"concurrency": 0}, "--concurrency must be at least 1"),
    ({"task": "train", "micro_batch": 10**8}, r"--micro-batch 1e\+08 is beyond any real workload"),
    ({"task": "serve", "zero": 1}, "--zero applies to training only"),
    ({"precision": "bf17"}, "unknown precision"),
    ({"engine": "vllm"}, "applies to task 'serve'"),
])
def test_every_rule_is_checked_where_the_request_is_built(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        Request(**fields)


def test_defaults_never_trigger_a_rule_and_a_change_is_validated_again() -> None:
    req = Request(task="serve", concurrency=8)
    assert req.given == {"task": "serve", "concurrency": 8}  # optimizer's default is not an inference option given
    assert req.but(concurrency=4).seqs_per_replica == 4
    with pytest.raises(InputError, match="applies to training only"):
        req.but(zero=3)
    with pytest.raises(ValueError, match="frozen"):
        req.concurrency = 2  # type: ignore[misc]


@pytest.mark.parametrize("task", ["serve", "finetune"])
def test_plan_candidates_split_as_the_request_does(task: str) -> None:
    """Every candidate's sequences per replica and micro-batches per step are the request's rules applied to the
    plan's concurrency or global batch (the rules live in one place)."""
    size = {"concurrency": 37} if task == "serve" else {"global_batch": 96}
    plan_req = with_options(None, get_model("llama-3.1-8b"), task=task, max_gpus=8, **size)
    cs = enumerate_candidates(plan_req, 1)
    assert len(cs)
    for i in range(len(cs)):
        fields = ({"concurrency": 37} if task == "serve" else
                  {"global_batch": 96, "micro_batch": int(cs.seqs_per_replica[i])})
        req = Request(task=task, tp=int(cs.tp[i]), pp=int(cs.pp[i]), dp=int(cs.dp[i]), **fields)
        assert (req.seqs_per_replica, req.grad_accum) == (int(cs.seqs_per_replica[i]), int(cs.grad_accum[i]))


def test_estimate_takes_the_request() -> None:
    one = estimate("llama-3.1-8b", GPU, Request(task="serve", engine="static", concurrency=33, count=3))
    assert one.layout["seqs_per_replica"] == 11 and one.layout["in_flight"] == 33 and one.count == 3
