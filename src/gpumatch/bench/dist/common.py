"""What every rank's workload shares: its :class:`Rank` (rank, world size, device, backend), barriers, and the
per-iteration maximum over ranks.

Times are seconds on the host clock (``time.perf_counter``) bracketed by ``torch.cuda.synchronize`` on CUDA, so
a sample covers the device work it started (benchmark-method.md: device work is asynchronous). The time of a
synchronized operation is the slowest rank's, as nccl-tests reports it: every iteration starts after a barrier,
and the per-iteration times are reduced with MAX over the ranks (nccl-tests' ``-a`` default and
doc/PERFORMANCE.md, https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gpumatch.bench.dtypes import torch_dtype


@dataclass(frozen=True)
class Rank:
    """This process's place in the job: global ``rank`` of ``world``, ``local_rank`` on its node."""

    rank: int
    world: int
    local_rank: int
    device: torch.device
    backend: str

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"


def dtype_for(rank: Rank, name: str) -> tuple[torch.dtype, str]:
    """The spec's dtype on CUDA; fp32 on the CPU (gloo and CPU matmuls are fp32 paths). Returns (dtype, name)."""
    if not rank.cuda:
        return torch.float32, "fp32"
    return torch_dtype(name), name


def sync(rank: Rank) -> None:
    """Wait for this rank's device work (no-op on the CPU)."""
    if rank.cuda:
        torch.cuda.synchronize(rank.device)


def barrier(rank: Rank) -> None:
    """All ranks here, and this rank's device idle."""
    sync(rank)
    if rank.world > 1:
        if rank.backend == "nccl":
            dist.barrier(device_ids=[rank.local_rank])
        else:
            dist.barrier()
    sync(rank)


def timed(rank: Rank, fn: Callable[[], Any]) -> float:
    """Seconds of ``fn()`` and the device work it queued, started right after a barrier."""
    barrier(rank)
    t0 = time.perf_counter()
    fn()
    sync(rank)
    return time.perf_counter() - t0


def max_over_ranks(rank: Rank, times: list[float]) -> list[float]:
    """Element-wise maximum of every rank's list of the same length (one all_reduce MAX, float64)."""
    if rank.world == 1 or not times:
        return list(times)
    t = torch.tensor(times, dtype=torch.float64, device=rank.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(x) for x in t.tolist()]


def reset_peak_memory(rank: Rank) -> None:
    if rank.cuda:
        torch.cuda.reset_peak_memory_stats(rank.device)


def peak_memory_bytes(rank: Rank) -> int | None:
    """``torch.cuda.max_memory_allocated`` since the last reset (bytes); None on the CPU."""
    return int(torch.cuda.max_memory_allocated(rank.device)) if rank.cuda else None
