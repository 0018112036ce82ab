"""Tensor-parallel decode (Megatron-LM style, Shoeybi et al. 2019, arXiv:1909.08053, section 3) in plain
torch.distributed, on the bench's Llama model (:mod:`gpumatch.bench.llama`).

Sharding over n ranks, per block: the fused QKV projection is column-parallel by heads (rank r keeps query
heads r·H/n .. (r+1)·H/n-1 and KV heads r·Hkv/n .. likewise, so GQA groups stay whole); the output projection
is row-parallel over those heads; the fused gate/up projection is column-parallel over the FFN width and the
down projection row-parallel. Each row-parallel output is a partial sum that one ``all_reduce`` (SUM) completes,
so a block issues two all-reduces of (batch, 1, hidden) per decode step. Embedding, norms and LM head are
replicated (Megatron shards the vocabulary too; here the head's matmul runs whole on every rank). Needs
heads, kv_heads and ffn divisible by n. Each rank holds a static KV cache of its KV heads,
(batch, Hkv/n, context, head_dim) per layer, filled with random values; a decode step writes the new token at
position context-1 and attends to all ``seq_len`` positions (as :mod:`gpumatch.bench.decode`).

The weights are built whole on every rank from the same seed and then sliced, so the whole model must fit one
device once (it is freed before timing; the timed KV cache is built sharded). Before timing, the TP logits of one
step are compared with the unsharded model's on the same small random cache (:data:`CHECK_BATCH` ×
:data:`CHECK_CONTEXT`; ``check``: max |difference| and relative L2 of the logits; ``matches_single_rank`` when the
relative L2 is at most 1e-4 in fp32, 2e-2 in bf16/fp16, whose sums run in another order). Timing: ``steps`` eager decode steps after ``warmup_steps``, each barrier-aligned and the slowest
rank's (:mod:`gpumatch.bench.dist.common`), seconds. The whole TP group produces ``batch_per_rank`` tokens per
step: ``tokens_per_s`` = batch / median step time. ``comm_time_s``: the step's 2·layers all-reduces of
(batch, hidden) alone. ``compute_time_s``: the same sharded step with the all-reduces skipped (the numbers are
wrong, the work is the same).
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from gpumatch.bench.decode import make_caches
from gpumatch.bench.dist.common import Rank, dtype_for, max_over_ranks, peak_memory_bytes, reset_peak_memory, sync
from gpumatch.bench.dist.common import timed as timed_call
from gpumatch.bench.dist.spec import DistSpec
from gpumatch.bench.llama import Block, Llama, build_model, decode_logits, rope_tables
from gpumatch.bench.shapes import LlamaShape


class RowParallelLinear(nn.Linear):
    """y = x · Wᵀ over this rank's input slice (``weight`` is (out, in/n), no bias), then all_reduce(SUM) across
    the group (when ``reduce``)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            self.weight.copy_(weight)
        self.reduce = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.linear(x, self.weight)
        if self.reduce:
            dist.all_reduce(y)
        return y


def tp_divisible(shape: LlamaShape, n: int) -> str | None:
    """None when ``shape`` can be split over ``n`` ranks, else what is not divisible."""
    bad = [f"{k} {v}" for k, v in (("heads", shape.heads), ("kv_heads", shape.kv_heads), ("ffn", shape.ffn))
           if v % n]
    return f"{', '.join(bad)} not divisible by {n} ranks" if bad else None


def _rows(w: torch.Tensor, sizes: list[int], r: int, n: int) -> torch.Tensor:
    """Rank r's share of each consecutive row block of ``w`` (blocks of ``sizes`` rows), concatenated."""
    parts = torch.split(w, sizes, dim=0)
    return torch.cat([p.chunk(n, dim=0)[r] for p in parts], dim=0).clone()


def shard_model(full: Llama, r: int, n: int) -> Llama:
    """Rank r's Megatron shard of ``full`` (module docstring), a :class:`Llama` of the local shape."""
    s = full.s
    err = tp_divisible(s, n)
    if err:
        raise ValueError(f"tensor parallel: {err}")
    local = dataclasses.replace(s, heads=s.heads // n, kv_heads=s.kv_heads // n, ffn=s.ffn // n)
    dev, dt = full.embed.weight.device, full.embed.weight.dtype
    with torch.device(dev):
        model = Llama(local).to(dt)
    with torch.no_grad():
        model.embed.weight.copy_(full.embed.weight)
        model.norm.weight.copy_(full.norm.weight)
        if model.lm_head is not None and full.lm_head is not None:
            model.lm_head.weight.copy_(full.lm_head.weight)
        for mine, whole in zip(model.layers, full.layers, strict=True):
            _shard_block(mine, whole, s, r, n)  # type: ignore[arg-type]
    return model


def _shard_block(mine: Block, whole: Block, s: LlamaShape, r: int, n: int) -> None:
    d = s.head_dim
    mine.attn_norm.weight.copy_(whole.attn_norm.weight)
    mine.mlp_norm.weight.copy_(whole.mlp_norm.weight)
    mine.attn.wqkv.weight.copy_(_rows(whole.attn.wqkv.weight, [s.heads * d, s.kv_heads * d, s.kv_heads * d], r, n))
    mine.attn.wo = RowParallelLinear(whole.attn.wo.weight.chunk(n, dim=1)[r].clone())
    mine.mlp.w13.weight.copy_(_rows(whole.mlp.w13.weight, [s.ffn, s.ffn], r, n))
    mine.mlp.w2 = RowParallelLinear(whole.mlp.w2.weight.chunk(n, dim=1)[r].clone())


def shard_caches(caches: list[tuple[torch.Tensor, torch.Tensor]], r: int, n: int
                 ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Rank r's KV heads of every (B, Hkv, L, D) cache."""
    return [(k.chunk(n, dim=1)[r].clone(), v.chunk(n, dim=1)[r].clone()) for k, v in caches]


def set_reduce(model: Llama, on: bool) -> None:
    """Switch the row-parallel all-reduces on or off (off: :func:`run_tp_decode`'s compute-only timing)."""
    for m in model.modules():
        if isinstance(m, RowParallelLinear):
            m.reduce = on


CHECK_BATCH, CHECK_CONTEXT = 2, 64
"""The correctness check's decode batch and cache length (at most the spec's): small, so the unsharded cache it
needs stays small whatever the timed batch and context are."""


def _check(full: Llama, model: Llama, rank: Rank, spec: DistSpec, dtype: torch.dtype) -> dict[str, Any]:
    """One decode step of the sharded and the whole model on the same random cache and tokens (module docstring)."""
    dev = rank.device
    batch, ctx = min(CHECK_BATCH, spec.batch_per_rank), min(CHECK_CONTEXT, spec.seq_len)
    full_caches = make_caches(full, batch, ctx)  # the same on every rank: the same seed, the same draws
    rope_all = rope_tables(full.s, ctx, dev, dtype)
    gen = torch.Generator(device="cpu").manual_seed(spec.seed + 1)
    tokens = torch.randint(0, full.s.vocab, (batch, 1), generator=gen).to(dev)
    pos = torch.tensor([ctx - 1], device=dev)
    mine = shard_caches(full_caches, rank.rank, rank.world)
    with torch.no_grad():
        out = decode_logits(model, tokens, pos, rope_all, mine).double()
        ref = decode_logits(full, tokens, pos, rope_all, full_caches).double()
    rel = float((out - ref).norm() / ref.norm())
    rtol = 1e-4 if dtype == torch.float32 else 2e-2
    return {"batch": batch, "context": ctx, "max_abs_diff": float((out - ref).abs().max()), "rel_l2": rel,
            "rtol": rtol, "matches_single_rank": rel <= rtol}


def run_tp_decode(rank: Rank, spec: DistSpec) -> dict[str, Any]:
    """Shard, check, time decode steps; returns the rank JSON's ``steps`` (module docstring)."""
    dtype, dname = dtype_for(rank, spec.dtype)
    full = build_model(spec.model, rank.device, dtype)
    model = shard_model(full, rank.rank, rank.world)
    row: dict[str, Any] = {"parallelism": "tensor", "tp_size": rank.world, "dtype": dname, "variant": "eager",
                           "batch": spec.batch_per_rank, "context": spec.seq_len,
                           "check": _check(full, model, rank, spec, dtype)}
    del full
    dev = rank.device
    caches = make_caches(model, spec.batch_per_rank, spec.seq_len)  # this rank's KV heads only
    rope_all = rope_tables(model.s, spec.seq_len, dev, dtype)
    tokens = torch.randint(0, model.s.vocab, (spec.batch_per_rank, 1), device=dev)
    dist.broadcast(tokens, src=0)
    pos = torch.tensor([spec.seq_len - 1], device=dev)

    def step() -> None:
        decode_logits(model, tokens, pos, rope_all, caches).argmax(dim=-1)

    if rank.cuda:
        torch.cuda.empty_cache()
    reset_peak_memory(rank)
    with torch.no_grad():
        row["step_time_s"] = _timed(rank, spec, step)
        row["peak_memory_bytes"] = peak_memory_bytes(rank)
        set_reduce(model, False)
        row["compute_time_s"] = _timed(rank, spec, step)
        set_reduce(model, True)
        buf = torch.empty(spec.batch_per_rank, 1, model.s.hidden, dtype=dtype, device=dev)

        def comm() -> None:
            for _ in range(2 * model.s.layers):
                dist.all_reduce(buf)
        row["comm_time_s"] = _timed(rank, spec, comm)
    row["compute_time_method"] = "the same sharded decode step with its all-reduces skipped"
    row["comm_collectives"] = [{"op": "all_reduce", "size_bytes": buf.numel() * buf.element_size(),
                                "count_per_step": 2 * model.s.layers}]
    median = statistics.median(row["step_time_s"])
    row.update(tokens_per_step=spec.batch_per_rank, tokens_per_s=spec.batch_per_rank / median,
               median_step_time_s=median)
    return row


def _timed(rank: Rank, spec: DistSpec, fn: Any) -> list[float]:
    for _ in range(spec.warmup_steps):
        fn()
    sync(rank)
    return max_over_ranks(rank, [timed_call(rank, fn) for _ in range(spec.steps)])
