"""Collective microbenchmark through torch.distributed, measured the way nccl-tests measures
(https://github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md).

For every op and message size ``S`` (bytes, nccl-tests' "size"): one checked call (inputs rank+1, the result
compared with the expected sum or gather, as nccl-tests' ``#wrong`` column; the buffers then hold zeros), then
``warmup`` untimed calls, then ``iters`` calls each started after a barrier and timed on its own
(:func:`gpumatch.bench.dist.common.timed`); ``time_s`` keeps every iteration's maximum over the ranks.

Bandwidths (bytes/s) from the median time t: algbw = S / t; busbw = algbw · factor with PERFORMANCE.md's
factors for n ranks: all_reduce 2(n-1)/n; all_gather, reduce_scatter and all_to_all (n-1)/n; sendrecv 1.
``S`` per op: all_reduce the buffer; all_gather the gathered output (= per-rank input · n); reduce_scatter the
input (= per-rank output · n); all_to_all each rank's send buffer; sendrecv the bytes each rank sends. Counts
not divisible by n are rounded down to a multiple of n, and the size recorded is the size used.

APIs: ``all_gather_into_tensor`` when the build and backend have it, else ``all_gather`` into a list; reduce-scatter
``reduce_scatter_single`` (torch 2.13's name) or ``reduce_scatter_tensor``; ``all_to_all_single``. An op the
backend refuses (gloo lacks reduce-scatter or all-to-all in some builds) is recorded ``"supported": false``
with the error's text, never replaced by another op. sendrecv is nccl-tests' ``sendrecv_perf`` pattern: every
rank sends S bytes to rank+1 and receives S bytes from rank-1 (mod n) at once (``batch_isend_irecv``), so with
2 ranks 0 and 1 exchange both ways; it needs 2 ranks.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from gpumatch.bench.dist.common import Rank, dtype_for, max_over_ranks, sync, timed
from gpumatch.bench.dist.spec import DistSpec


def busbw_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``op`` on ``n`` ranks (doc/PERFORMANCE.md, "Summary")."""
    if n < 1:
        raise ValueError(f"rank count must be >= 1, not {n}")
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "sendrecv":
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def bandwidths(op: str, size_bytes: int, time_s: float, n: int) -> tuple[float, float]:
    """(algbw, busbw) in bytes/s of ``size_bytes`` moved in ``time_s`` seconds by ``op`` on ``n`` ranks."""
    algbw = size_bytes / time_s
    return algbw, algbw * busbw_factor(op, n)


class _Case:
    """One op at one size: ``run`` issues the op; ``check`` fills inputs, runs once and says if the result is
    right, then zeroes the buffers."""

    def __init__(self, op: str, count: int, rank: Rank, dtype: torch.dtype, gather_list: bool = False) -> None:
        self.op, self.count, self.rank, self.dtype = op, count, rank, dtype
        self.gather_list = gather_list or not hasattr(dist, "all_gather_into_tensor")
        self.api = ""
        n, dev = rank.world, rank.device
        chunk = count // n
        if op == "all_reduce":
            self.inp = torch.empty(count, dtype=dtype, device=dev)
            self.out = self.inp
        elif op == "all_gather":
            self.inp = torch.empty(chunk, dtype=dtype, device=dev)
            self.out = torch.empty(count, dtype=dtype, device=dev)
        elif op == "reduce_scatter":
            self.inp = torch.empty(count, dtype=dtype, device=dev)
            self.out = torch.empty(chunk, dtype=dtype, device=dev)
        else:  # all_to_all, sendrecv
            self.inp = torch.empty(count, dtype=dtype, device=dev)
            self.out = torch.empty(count, dtype=dtype, device=dev)
        self.run = self._runner()

    def _runner(self) -> Callable[[], None]:
        op, inp, out, n, r = self.op, self.inp, self.out, self.rank.world, self.rank.rank
        if op == "all_reduce":
            self.api = "all_reduce"
            return lambda: dist.all_reduce(inp)
        if op == "all_gather":
            if not self.gather_list:
                self.api = "all_gather_into_tensor"
                return lambda: dist.all_gather_into_tensor(out, inp)
            self.api = "all_gather"
            parts = list(out.chunk(n))
            return lambda: dist.all_gather(parts, inp)
        if op == "reduce_scatter":
            fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            self.api = fn.__name__
            return lambda: fn(out, inp)
        if op == "all_to_all":
            self.api = "all_to_all_single"
            return lambda: dist.all_to_all_single(out, inp)
        self.api = "batch_isend_irecv"
        ops = [dist.P2POp(dist.isend, inp, (r + 1) % n), dist.P2POp(dist.irecv, out, (r - 1) % n)]

        def sendrecv() -> None:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        return sendrecv

    def check(self) -> bool:
        """Inputs rank+1 (all_to_all: chunk j of rank r holds r+1); True when the output is what the op must give."""
        n, r = self.rank.world, self.rank.rank
        self.inp.fill_(r + 1)
        self.run()
        sync(self.rank)
        out = self.out.float()
        if self.op in ("all_reduce", "reduce_scatter"):
            want = torch.full_like(out, n * (n + 1) / 2)
        elif self.op in ("all_gather", "all_to_all"):
            want = torch.arange(1, n + 1, device=out.device, dtype=out.dtype).repeat_interleave(out.numel() // n)
        else:
            want = torch.full_like(out, (r - 1) % n + 1)
        ok = bool(torch.equal(out, want))
        self.inp.zero_()
        self.out.zero_()
        return ok


def _count(op: str, size_bytes: int, n: int, elem: int) -> int:
    count = max(size_bytes // elem, 1)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        count = max(count // n, 1) * n
    return count


def measure_op(op: str, size_bytes: int, rank: Rank, spec: DistSpec) -> dict[str, Any]:
    """One row of the sweep (module docstring); ``supported: false`` with a reason when the backend refuses."""
    dtype, dname = dtype_for(rank, spec.dtype)
    elem = torch.empty(0, dtype=dtype).element_size()
    n = rank.world
    count = _count(op, size_bytes, n, elem)
    row: dict[str, Any] = {"op": op, "size_bytes": count * elem, "requested_size_bytes": size_bytes,
                           "count": count, "dtype": dname, "ranks": n}
    if op == "sendrecv" and n < 2:
        return {**row, "supported": False, "reason": "sendrecv needs 2 or more ranks"}
    case = _Case(op, count, rank, dtype)
    try:
        try:
            row["correct"] = case.check()
        except (RuntimeError, NotImplementedError, ValueError):
            if op != "all_gather" or case.gather_list:
                raise
            case = _Case(op, count, rank, dtype, gather_list=True)  # the backend lacks the flat-tensor form
            row["correct"] = case.check()
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        return {**row, "api": case.api, "supported": False,
                "reason": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"}
    row["api"] = case.api
    for _ in range(spec.warmup_steps):
        case.run()
    own = [timed(rank, case.run) for _ in range(spec.iters)]
    times = max_over_ranks(rank, own)
    median = statistics.median(times)
    algbw, busbw = bandwidths(op, row["size_bytes"], median, n)
    row.update(supported=True, time_s=times, rank_time_s=own, median_time_s=median, algbw_bytes_per_s=algbw,
               busbw_bytes_per_s=busbw, busbw_factor=busbw_factor(op, n))
    return row


def run_collectives(rank: Rank, spec: DistSpec) -> list[dict[str, Any]]:
    """Every op of ``spec.ops`` over ``spec.sizes()``, in that order (ops outer, sizes inner)."""
    return [measure_op(op, size, rank, spec) for op in spec.ops for size in spec.sizes()]
