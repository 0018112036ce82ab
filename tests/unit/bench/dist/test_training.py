"""DDP and FSDP training through torchrun on 2 gloo CPU ranks, and the communication plans they time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpumatch.bench.dist.launch import launch
from gpumatch.bench.dist.spec import DistSpec
from gpumatch.bench.shapes import tiny_shape

pytest.importorskip("torch")

from gpumatch.bench.dist.training import ddp_buckets, fsdp_comm_plan  # noqa: E402

STEPS = 3


def _train(tmp_path: Path, workload: str) -> list[dict[str, Any]]:
    spec = DistSpec(workload, tiny_shape(), batch_per_rank=2, seq_len=16, steps=STEPS, warmup_steps=1, seed=3)
    return launch(spec, 2, out_dir=tmp_path / workload, device="cpu", timeout_s=60).ranks


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    base = tmp_path_factory.mktemp("train")
    return {w: _train(base, w) for w in ("ddp", "fsdp")}


def test_ddp_and_fsdp_steps(runs: dict[str, list[dict[str, Any]]]) -> None:
    for workload, ranks in runs.items():
        assert [r["rank"] for r in ranks] == [0, 1]
        steps = ranks[0]["steps"]
        assert steps["parallelism"] == workload and steps["precision"] == "fp32"
        assert len(steps["step_time_s"]) == STEPS and all(t > 0 for t in steps["step_time_s"])
        assert steps["tokens_per_step"] == 32
        assert steps["tokens_per_s"] == pytest.approx(32 / steps["median_step_time_s"])
        assert steps["peak_memory_bytes"] is None  # CPU
        assert len(steps["comm_time_s"]) == STEPS and all(t > 0 for t in steps["comm_time_s"])
        assert steps["step_time_s"] == ranks[1]["steps"]["step_time_s"]  # the slowest rank's, on every rank
        losses = steps["loss"]
        assert len(losses) == STEPS and losses[-1] < losses[0]  # training, not just timing
    ddp, fsdp = runs["ddp"][0]["steps"], runs["fsdp"][0]["steps"]
    assert len(ddp["compute_time_s"]) == STEPS and "no_sync" in ddp["compute_time_method"]
    assert fsdp["compute_time_s"] is None and fsdp["fsdp_api"] == "fully_shard"
    # same init, same data, both average the gradients over the ranks: the same training on every rank
    for r in (0, 1):
        assert runs["fsdp"][r]["steps"]["loss"] == pytest.approx(runs["ddp"][r]["steps"]["loss"], rel=1e-5)
    assert runs["ddp"][0]["steps"]["loss"] != runs["ddp"][1]["steps"]["loss"]  # ranks see different data


def test_ddp_buckets() -> None:
    assert ddp_buckets([10, 20, 30], 4, cap_bytes=200) == [50, 10]
    assert ddp_buckets([100], 4, cap_bytes=8) == [100]
    assert sum(ddp_buckets([3, 5, 7, 11], 2, cap_bytes=20)) == 26


def test_fsdp_plan() -> None:
    plan = fsdp_comm_plan([10, 10, 7], 4, 2, 4)
    assert plan == [("all_gather", 24), ("all_gather", 24), ("reduce_scatter", 48)] * 2 + [
        ("all_gather", 16), ("reduce_scatter", 32)]
