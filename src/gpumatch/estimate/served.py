"""One serving configuration under an engine: its steady state and the figures that state replaces.

Shared by :func:`gpumatch.estimate.estimate` (``--task serve``) and the planner's serving roles, so a plan entry
and ``gpumatch estimate`` with the entry's ``estimate_options`` give the same numbers by construction.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any

import numpy as np

from gpumatch.estimate import replay, serving
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import Case, ModelNums
from gpumatch.estimate.engine import evaluate, in_flight_sequences, replica_case, scaling
from gpumatch.estimate.power import Site


def engine_state(
    m: ModelNums, case: Case, cal: Calibration, engine: str, gpu_name: str, *, request_rate: float | None = None,
    prefix_hit_ratio: float = 0.0, targets: tuple[float | None, float | None] = (None, None),
    bench: replay.Benchmark | None = None,
) -> tuple[serving.Serving | None, Case, str]:
    """The engine's steady state of ``case`` (scalar; ``request_rate`` over all replicas; None for ``static``),
    the case whose memory and power it runs (the requests admitted per replica; the rest wait in the queue,
    holding no KV cache) and a note. ``bench`` (closed loop): the benchmark replayed over all replicas, each
    replica taking its share of the prompts. When the engine's memory share cannot hold one sequence, the static model's
    memory check reports the shortfall (state None, a note says so)."""
    if engine == "static":
        return None, case, ""
    dp = float(case.dp)
    seqs_per_replica = float(in_flight_sequences(case)) / dp
    rate = None if request_rate is None else request_rate / dp
    try:
        share = None if bench is None else replace(bench, num_prompts=math.ceil(bench.num_prompts / dp),
                                                   request_rate=rate)
        sv = serving.steady_state(m, replica_case(case), cal, engine, gpu_name, concurrency=seqs_per_replica,
                                  request_rate=rate, prefix_hit_ratio=prefix_hit_ratio, targets=targets,
                                  bench=share)
    except serving.NoRoom as e:
        return None, case, f"{e}: estimated with the static-batch model"
    held = sv.running if rate is not None else min(sv.running, seqs_per_replica)  # open loop: as many as the rate holds
    running = float(max(1, math.ceil(held - 1e-9)))
    note = "" if sv.stable or request_rate is None or sv.benchmark is not None else (
        f"--request-rate {request_rate:g}/s is at or above what {sv.engine} serves "
        f"({sv.saturated_requests_per_s * dp:.3g} requests/s): the queue grows without bound (TTFT has no mean)")
    if sv.replay_note:
        note = f"{note}; {sv.replay_note}" if note else sv.replay_note
    return sv, replace(case, seqs_per_replica=running, in_flight=running * dp), note


def benchmark_of(num_prompts: int | None, length_low: float, case: Case,
                 request_rate: float | None = None) -> replay.Benchmark | None:
    """The benchmark an estimate replays: closed loop, ``num_prompts`` requests (None: 10 × the requests in flight
    over all replicas, as published sweeps run; 0: none, the steady state) of lengths in ``[length_low × L, L]``;
    open loop (``request_rate``, requests/s over all replicas), the ``num_prompts`` requests of a finite run
    arriving at that rate (None or 0: none, the steady state at that rate)."""
    if request_rate is not None:
        if not num_prompts:
            return None
        return replay.Benchmark(num_prompts=num_prompts, length_low=length_low, request_rate=request_rate)
    n = 10 * int(in_flight_sequences(case)) if num_prompts is None else num_prompts
    return replay.Benchmark(num_prompts=n, length_low=length_low)


def apply_engine(out: dict[str, Any], sv: serving.Serving | None, run_case: Case, case: Case, site: Site) -> None:
    """Replace, in ``out`` (:func:`evaluate` of ``run_case``), the memory and figures the steady state ``sv``
    sets (nothing when ``sv`` is None)."""
    if sv is None:
        return
    out.update(serving.serving_memory({k: float(v) for k, v in out.items()}, sv, float(run_case.seqs_per_replica)))
    out.update(serving.serving_metrics({k: float(v) for k, v in out.items()}, sv, float(case.dp), float(case.gen),
                                       site))


def scalar_case(c: Case, i: int = 0) -> Case:
    """Element ``i`` of a vectorized :class:`Case` as a case of Python floats (fields that are scalars stay)."""
    vals = {}
    for f in fields(c):
        v = getattr(c, f.name)
        vals[f.name] = float(np.ravel(v)[i if np.size(v) > 1 else 0]) if isinstance(v, np.ndarray) else v
    return Case(**vals)


def engine_figures(m: ModelNums, case: Case, cal: Calibration, site: Site, engine: str, gpu_name: str, *,
                   prefix_hit_ratio: float = 0.0) -> dict[str, Any]:
    """Every figure of one serving configuration (scalar ``case``) at ``engine``'s closed-loop steady state, as
    :func:`gpumatch.estimate.estimate` computes them (scaling included when it has more than one GPU), plus
    ``engine_state`` = 1 when the steady state applied (0: static fallback, no room for one sequence)."""
    sv, run_case, _ = engine_state(m, case, cal, engine, gpu_name, prefix_hit_ratio=prefix_hit_ratio)
    out = evaluate("serve", m, run_case, cal, site)
    apply_engine(out, sv, run_case, case, site)
    if float(case.tp * case.pp * case.dp) > 1:
        out.update(scaling("serve", m, run_case, out, cal))
    out["engine_state"] = 0.0 if sv is None else 1.0
    return out
