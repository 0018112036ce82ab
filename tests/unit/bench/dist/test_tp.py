"""Tensor-parallel decode through torchrun on 4 gloo CPU ranks: equal to the unsharded model, timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpumatch.bench.dist.launch import launch
from gpumatch.bench.dist.spec import DistSpec
from gpumatch.bench.shapes import tiny_shape
from gpumatch.errors import InputError

SHAPE = {**tiny_shape(), "heads": 8, "kv_heads": 4}


def test_tp_decode_four_ranks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    spec = DistSpec("tp-decode", SHAPE, batch_per_rank=3, seq_len=24, steps=3, warmup_steps=1)
    res = launch(spec, 4, out_dir=tmp_path, device="cpu", timeout_s=60)
    assert [r["rank"] for r in res.ranks] == [0, 1, 2, 3]
    for r in res.ranks:
        steps = r["steps"]
        assert steps["tp_size"] == 4 and steps["context"] == 24
        check = steps["check"]
        assert check["matches_single_rank"], check
        assert check["max_abs_diff"] < 1e-4
    steps = res.ranks[0]["steps"]
    assert len(steps["step_time_s"]) == 3 and len(steps["compute_time_s"]) == 3 and len(steps["comm_time_s"]) == 3
    assert steps["tokens_per_step"] == 3
    assert steps["tokens_per_s"] == pytest.approx(3 / steps["median_step_time_s"])
    assert steps["comm_collectives"] == [{"op": "all_reduce", "size_bytes": 3 * 64 * 4, "count_per_step": 4}]


def test_tp_needs_divisible_heads(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="tensor parallel over 3 ranks: heads 8, kv_heads 4"):
        launch(DistSpec("tp-decode", SHAPE), 3, out_dir=tmp_path, device="cpu")


def test_shard_model_splits_heads_and_ffn() -> None:
    torch = pytest.importorskip("torch")
    from gpumatch.bench.dist.tp import RowParallelLinear, shard_model
    from gpumatch.bench.llama import build_model

    full = build_model(SHAPE, torch.device("cpu"), torch.float32)
    part = shard_model(full, 1, 2)
    assert (part.s.heads, part.s.kv_heads, part.s.ffn) == (4, 2, 64)
    blk, whole = part.layers[0], full.layers[0]
    assert isinstance(blk.attn.wo, RowParallelLinear) and blk.attn.wo.weight.shape == (64, 64)
    assert torch.equal(blk.attn.wo.weight, whole.attn.wo.weight[:, 64:])
    # rank 1's query rows are heads 4..7 (rows 64..127), its K rows KV heads 2..3 of the K block
    assert torch.equal(blk.attn.wqkv.weight[:64], whole.attn.wqkv.weight[64:128])
    assert torch.equal(blk.attn.wqkv.weight[64:96], whole.attn.wqkv.weight[128 + 32:128 + 64])
    assert torch.equal(blk.mlp.w13.weight[64:], whole.mlp.w13.weight[128 + 64:])
