"""Bounds and pacing of the planner's search: refuse a search it cannot finish, run it in chunks, report progress.

The search is the product GPUs × layouts × mitigations (:mod:`gpumatch.plan.enumeration`); its size is known
before anything is allocated (:func:`gpumatch.plan.enumeration.candidate_count`). :data:`MAX_CANDIDATES` bounds
it: about 2.4 µs and 0.5 kB per candidate (measured on 2 cores: 2.4 M candidates took 4.5 s and 1.2 GB before the
passes were chunked), so at most ~5 s and, with the estimator run over :data:`CHUNK` candidates at a time, well
under 1 GB. A larger search is refused up front (exit 2) with the largest ``max_gpus`` that fits the bound.
Counts no layout can use are pruned first (:func:`gpumatch.plan.enumeration.useful_max_gpus`), so a large
``--max-gpus`` for a small batch costs nothing.

Progress goes to a callback ``progress(phase, done, total)`` (the library never prints; the CLI shows it on
stderr when that is a terminal and the search lasts more than a second).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from gpumatch.errors import InputError
from gpumatch.plan.enumeration import candidate_count, dp_limit, useful_max_gpus
from gpumatch.plan.request import PlanRequest

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: ``done`` of ``total`` candidates of ``phase`` are through."""
MAX_CANDIDATES = 2_000_000
CHUNK = 250_000
SECONDS_PER_CANDIDATE = 2.4e-6
BYTES_PER_CANDIDATE = 500.0


def check_size(req: PlanRequest, allowed: Sequence[bool] | npt.NDArray[np.bool_]) -> int:
    """The number of candidates, or :class:`InputError` when it exceeds :data:`MAX_CANDIDATES` (the message
    names the largest ``max_gpus`` this request can search)."""
    total, counts, cumulative = candidate_count(req, allowed)
    if total <= MAX_CANDIDATES:
        return total
    fits = counts[cumulative <= MAX_CANDIDATES]
    largest = int(fits[-1]) if fits.size else 0
    cost = f"about {total * SECONDS_PER_CANDIDATE:,.0f} s and {total * BYTES_PER_CANDIDATE / 1e9:,.1f} GB"
    what = f"searching up to {req.max_gpus:,} GPUs means {total:,} candidate configurations ({cost}); the " \
           f"planner searches at most {MAX_CANDIDATES:,}"
    narrow = "narrow the search with --gpu NAME, --tp/--pp or --micro-batch"
    if largest:
        raise InputError(f"{what}: the most GPUs this request can search is {largest:,}",
                         f"use --max-gpus {largest} or less, or {narrow}")
    raise InputError(what, narrow)


def pruned_note(req: PlanRequest) -> str:
    """A note when ``max_gpus`` is above what any layout can use (empty otherwise)."""
    top = useful_max_gpus(req)
    if req.max_gpus <= top:
        return ""
    per = "micro-batches of the global batch" if req.training else "sequences in flight"
    return (f"counts above {top:,} GPUs were not searched: no layout uses more (largest TP × largest PP × "
            f"{dp_limit(req):,} {per}, one per data-parallel rank or replica); max GPUs is {req.max_gpus:,}")


def chunks(n: int) -> list[npt.NDArray[np.intp]]:
    """Index ranges of at most :data:`CHUNK` candidates covering ``range(n)``."""
    return [np.arange(s, min(n, s + CHUNK), dtype=np.intp) for s in range(0, n, CHUNK)] or [np.zeros(0, np.intp)]
