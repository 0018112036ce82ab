"""Data-parallel training steps of a Llama-shaped decoder (:mod:`gpumatch.bench.llama`): DDP and FSDP.

Weak scaling: every rank trains ``batch_per_rank`` sequences of ``seq_len`` tokens per step (random tokens,
seeded by ``seed + rank``), AdamW (fused on CUDA, foreach on the CPU, as :mod:`gpumatch.bench.train`). Precision:
on CUDA with dtype bf16 (or fp16, without loss scaling) the parameters are fp32 and forward/backward run under
``torch.autocast(bfloat16)`` (DDP) or FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``; on
the CPU everything is fp32.

Per step, raw (seconds, one value per timed step, each the slowest rank's, barrier-aligned:
:mod:`gpumatch.bench.dist.common`): ``step_time_s`` (forward, loss, backward with its gradient communication,
optimizer step, zero_grad).

- **DDP** (``torch.nn.parallel.DistributedDataParallel``, default 25 MiB buckets): ``compute_time_s`` is the
  same step under ``ddp.no_sync()``, which skips the gradient all-reduce, so it is the step without
  communication. ``comm_time_s`` times only the all-reduces DDP issues: the gradients (fp32, reverse parameter
  order, as DDP fills buckets) cut into ``bucket_cap_mb`` buckets, each all-reduced in turn.
- **FSDP** (FSDP2 ``torch.distributed.fsdp.fully_shard``, one unit per block plus the root; in torch since 2.6):
  a step without communication cannot be run — every forward and backward must all-gather the sharded
  parameters — so ``compute_time_s`` is ``null`` and ``compute_time_method`` says so. ``comm_time_s`` times the
  collectives the step issues, alone and back to back: per block unit an all-gather of its parameters in
  forward and again in backward (``reshard_after_forward=True``), and a reduce-scatter of its gradients; the
  root unit (embedding, final norm, head) gathers once (FSDP2 keeps the root unsharded after forward) and
  reduce-scatters once. Bytes: parameters in the param dtype, gradients in the reduce dtype, each unit padded
  to a multiple of the ranks. Since they overlap compute in the real step, the exposed communication is at most
  ``comm_time_s``.

``tokens_per_step`` = batch_per_rank · seq_len (this rank's); ``tokens_per_s`` = that / median step time;
``global_tokens_per_s`` = world · tokens_per_s. ``peak_memory_bytes`` = ``torch.cuda.max_memory_allocated``
over the timed steps (None on the CPU). ``loss``: each timed step's loss on this rank.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from gpumatch.bench.dist.common import (
    Rank,
    dtype_for,
    max_over_ranks,
    peak_memory_bytes,
    reset_peak_memory,
    sync,
    timed,
)
from gpumatch.bench.dist.spec import DistSpec
from gpumatch.bench.llama import Llama, build_model, rope_tables

DDP_BUCKET_BYTES = 25 * 1024 * 1024
"""DistributedDataParallel's default ``bucket_cap_mb`` (25 MiB)."""


def _data(rank: Rank, spec: DistSpec, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(spec.seed + rank.rank)
    tokens = torch.randint(0, vocab, (spec.batch_per_rank, spec.seq_len + 1), generator=gen).to(rank.device)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _optimizer(rank: Rank, params: Iterator[nn.Parameter]) -> torch.optim.Optimizer:
    fused = rank.cuda
    return torch.optim.AdamW(list(params), lr=1e-5, fused=fused, foreach=None if fused else True)


def _step_fn(model: nn.Module, opt: torch.optim.Optimizer, rank: Rank, spec: DistSpec, vocab: int,
             autocast: bool, losses: list[torch.Tensor]) -> Callable[[], None]:
    inputs, targets = _data(rank, spec, vocab)
    s = spec.shape()
    rope = rope_tables(s, spec.seq_len, rank.device, torch.bfloat16 if rank.cuda else torch.float32)

    def step() -> None:
        amp = (torch.autocast("cuda", dtype=dtype_for(rank, spec.dtype)[0]) if autocast
               else contextlib.nullcontext())
        with amp:
            logits = model(inputs, rope)
            loss = F.cross_entropy(logits.float().view(-1, vocab), targets.view(-1))
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    return step


def _timed_steps(rank: Rank, spec: DistSpec, step: Callable[[], None]) -> tuple[list[float], list[float]]:
    """(max over ranks, this rank's) seconds of ``spec.steps`` steps after ``spec.warmup_steps``."""
    for _ in range(spec.warmup_steps):
        step()
    sync(rank)
    own = [timed(rank, step) for _ in range(spec.steps)]
    return max_over_ranks(rank, own), own


def _time_comm(rank: Rank, spec: DistSpec, calls: list[Callable[[], Any]]) -> list[float]:
    """Seconds of issuing ``calls`` back to back, ``spec.steps`` times after the warm-up (max over ranks)."""
    def run() -> None:
        for call in calls:
            call()
    for _ in range(spec.warmup_steps):
        run()
    return max_over_ranks(rank, [timed(rank, run) for _ in range(spec.steps)])


def ddp_buckets(numels: list[int], elem_bytes: int, cap_bytes: int = DDP_BUCKET_BYTES) -> list[int]:
    """Element counts of DDP-like gradient buckets: parameters in reverse order, a bucket closed when adding the
    next parameter would pass ``cap_bytes`` (a parameter larger than the cap is a bucket of its own)."""
    buckets: list[int] = []
    current = 0
    for numel in reversed(numels):
        if current and (current + numel) * elem_bytes > cap_bytes:
            buckets.append(current)
            current = 0
        current += numel
    if current:
        buckets.append(current)
    return buckets


def fsdp_comm_plan(unit_numels: list[int], n: int, param_bytes: int, reduce_bytes: int) -> list[tuple[str, int]]:
    """The collectives of one FSDP2 step as (op, bytes of the whole unit): per block unit all-gather twice and
    reduce-scatter once; the last unit (the root) all-gathers once. Units are padded to a multiple of ``n``."""
    plan: list[tuple[str, int]] = []
    for i, numel in enumerate(unit_numels):
        padded = -(-numel // n) * n
        root = i == len(unit_numels) - 1
        plan += [("all_gather", padded * param_bytes)] * (1 if root else 2)
        plan.append(("reduce_scatter", padded * reduce_bytes))
    return plan


def _ddp(rank: Rank, spec: DistSpec, model: Llama, row: dict[str, Any], losses: list[torch.Tensor]) -> None:
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, device_ids=[rank.local_rank] if rank.cuda else None)
    opt = _optimizer(rank, ddp.parameters())
    autocast = dtype_for(rank, spec.dtype)[0] != torch.float32
    step = _step_fn(ddp, opt, rank, spec, model.s.vocab, autocast, losses)
    reset_peak_memory(rank)
    row["step_time_s"], row["rank_step_time_s"] = _timed_steps(rank, spec, step)
    row["peak_memory_bytes"] = peak_memory_bytes(rank)
    row["loss"] = [float(x) for x in losses[spec.warmup_steps:]]

    def local_step() -> None:
        with ddp.no_sync():
            step()
    row["compute_time_s"] = _timed_steps(rank, spec, local_step)[0]
    row["compute_time_method"] = "the same step under DistributedDataParallel.no_sync() (no gradient all-reduce)"
    grads = [torch.empty(n, dtype=torch.float32, device=rank.device)
             for n in ddp_buckets([p.numel() for p in model.parameters()], 4)]
    row["comm_time_s"] = _time_comm(rank, spec, [_all_reduce(g) for g in grads])
    row["comm_collectives"] = [{"op": "all_reduce", "size_bytes": g.numel() * 4} for g in grads]


def _fsdp(rank: Rank, spec: DistSpec, model: Llama, row: dict[str, Any], losses: list[torch.Tensor]) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(rank.device.type, (rank.world,))
    param_dtype, _ = dtype_for(rank, spec.dtype)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    total = sum(p.numel() for p in model.parameters())
    units = [sum(p.numel() for p in block.parameters()) for block in model.layers]
    units.append(total - sum(units))  # the root unit: embedding, final norm, head
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = _optimizer(rank, model.parameters())
    step = _step_fn(model, opt, rank, spec, model.s.vocab, False, losses)
    reset_peak_memory(rank)
    row["step_time_s"], row["rank_step_time_s"] = _timed_steps(rank, spec, step)
    row["peak_memory_bytes"] = peak_memory_bytes(rank)
    row["loss"] = [float(x) for x in losses[spec.warmup_steps:]]
    row["compute_time_s"] = None
    row["compute_time_method"] = ("none: every FSDP forward and backward all-gathers the sharded parameters, so "
                                  "a step without communication cannot run; comm_time_s times its collectives")
    plan = fsdp_comm_plan(units, rank.world, torch.empty(0, dtype=param_dtype).element_size(), 4)
    row["comm_time_s"] = _time_comm(rank, spec, [_collective(rank, op, size, param_dtype) for op, size in plan])
    row["comm_collectives"] = [{"op": op, "size_bytes": size} for op, size in plan]
    row["fsdp_api"] = "fully_shard"


def _all_reduce(t: torch.Tensor) -> Callable[[], Any]:
    return lambda: dist.all_reduce(t)


def _collective(rank: Rank, op: str, size_bytes: int, dtype: torch.dtype) -> Callable[[], Any]:
    """An all-gather (``size_bytes`` gathered, in ``dtype``) or reduce-scatter (``size_bytes`` in, fp32)."""
    n = rank.world
    if op == "all_gather":
        full = torch.empty(size_bytes // torch.empty(0, dtype=dtype).element_size(), dtype=dtype, device=rank.device)
        part = torch.empty(full.numel() // n, dtype=dtype, device=rank.device)
        return lambda: dist.all_gather_into_tensor(full, part)
    full = torch.empty(size_bytes // 4, dtype=torch.float32, device=rank.device)
    part = torch.empty(full.numel() // n, dtype=torch.float32, device=rank.device)
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return lambda: fn(part, full)


def _precision(rank: Rank, spec: DistSpec) -> str:
    """How the step computes (module docstring): fp32 on the CPU or with dtype fp32."""
    dtype, name = dtype_for(rank, spec.dtype)
    if dtype == torch.float32:
        return "fp32"
    if spec.workload == "ddp":
        return f"{name}-autocast/fp32-master"
    return f"{name}-params/fp32-reduce/fp32-master"


def run_training(rank: Rank, spec: DistSpec) -> dict[str, Any]:
    """Train ``spec.workload`` (ddp or fsdp) and return the rank JSON's ``steps`` (module docstring)."""
    model = build_model(spec.model, rank.device, torch.float32)
    row: dict[str, Any] = {"parallelism": spec.workload, "world_size": rank.world,
                           "params": sum(p.numel() for p in model.parameters()),
                           "precision": _precision(rank, spec)}
    losses: list[torch.Tensor] = []
    (_ddp if spec.workload == "ddp" else _fsdp)(rank, spec, model, row, losses)
    tokens = spec.batch_per_rank * spec.seq_len
    median = statistics.median(row["step_time_s"])
    row.update(tokens_per_step=tokens, tokens_per_s=tokens / median, global_tokens_per_s=rank.world * tokens / median,
               median_step_time_s=median)
    return row
