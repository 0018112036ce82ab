"""``gpumatch estimate`` as one library call: :func:`run_estimate` of an :class:`EstimateQuery`.

The query holds what the command line said (strings and counts, None = not given). The shared concepts (task,
model, concurrency, global and micro-batch, lengths, precisions, optimizer) go through the one mapping of a
workload file and flags, :func:`gpumatch.workload.request.resolve_request`; :func:`request_of` turns the
result into the :class:`~gpumatch.estimate.request.Request` of :func:`gpumatch.estimate.estimate` (the path of a
field: flag or file field -> :class:`~gpumatch.workload.request.WorkRequest` -> ``Request`` -> ``Case``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpumatch.catalog import load_catalog
from gpumatch.errors import InputError
from gpumatch.estimate.api import estimate, memory_curve
from gpumatch.estimate.calibration import Calibration, load_calibration_file
from gpumatch.estimate.request import Request
from gpumatch.estimate.results import Estimate
from gpumatch.vocab import estimator_task
from gpumatch.workload import load_workload
from gpumatch.workload.quantities import token_count
from gpumatch.workload.request import RequestFlags, WorkRequest, deprecation_notes, resolve_request


@dataclass(frozen=True)
class EstimateQuery:
    """One ``gpumatch estimate``: the shared flags (``request``), the GPUs to compare, the layout and extras.

    ``models``: every ``--model`` given (more than one is an error); ``request.model`` is ignored.
    ``run_tokens`` is text as typed ('100M', '2e9'); ``calibration`` a Calibration JSON file; ``curve`` adds the
    memory growth curve over batch × sequence length (one GPU only).
    """

    request: RequestFlags = field(default_factory=RequestFlags)
    models: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()
    workload: str | None = None
    count: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    zero: int | None = None
    micro_batches: int | None = None
    recompute: str | None = None
    offload_optimizer: bool = False
    run_tokens: str | None = None
    calibration: str | None = None
    calibration_value: Calibration | None = None
    """A Calibration given as a value (the newest stored one of the card, :mod:`gpumatch.usecases.calibrated`);
    ``calibration`` (a file) wins over it."""
    curve: bool = False
    num_prompts: int | None = None
    length_low: float | None = None
    memory_fraction: float | None = None


@dataclass(frozen=True)
class EstimateRun:
    """What ``gpumatch estimate`` shows: one estimate per GPU (in the order given) and, with ``curve``, the
    memory growth rows of :func:`gpumatch.estimate.memory_curve` for the one GPU."""

    estimates: tuple[Estimate, ...]
    curve: list[dict[str, Any]] = field(default_factory=list)
    with_curve: bool = False
    notes: tuple[str, ...] = ()
    """How the query was asked for: a deprecated flag and the one that replaces it."""


def run_estimate(query: EstimateQuery) -> EstimateRun:
    """Estimate the query's configuration on each of its GPUs (flags over the workload file)."""
    work = query_request(query)
    if work.model is None:
        raise InputError("--model is required (or --workload FILE)", "see 'gpumatch estimate --help'")
    gpus = distinct_gpus(query.gpus)
    if len(gpus) > 1 and query.curve:
        raise InputError(f"--curve draws one GPU's memory curve, but --gpu was given {len(gpus)} times",
                         "drop --curve to compare, or give one --gpu")
    request = request_of(work, query)
    extras = _extras(query, work)
    estimates = tuple(estimate(work.model, g, request, **extras) for g in gpus)
    curve = memory_curve(work.model, gpus[0], request) if query.curve else []
    return EstimateRun(estimates, curve, query.curve, deprecation_notes(work))


def query_request(query: EstimateQuery) -> WorkRequest:
    """The shared concepts of the query: its workload file (if any) under its flags."""
    if len(query.models) > 1:
        raise InputError(f"--model given {len(query.models)} times ({', '.join(query.models)}): estimate takes "
                         "one model", "run one estimate per model; repeat --gpu to compare GPUs")
    flags = query.request
    if query.models:
        flags = RequestFlags(**{**vars(flags), "model": query.models[0]})
    return resolve_request(load_workload(query.workload) if query.workload else None, flags)


def distinct_gpus(names: tuple[str, ...]) -> list[str]:
    """The GPUs as canonical names, in order; the same card named twice is an error."""
    catalog = load_catalog()
    out: list[str] = []
    for n in names:
        name = catalog.get(n).name
        if name in out:
            raise InputError(f"--gpu {n!r} names {name} a second time", "give each GPU once")
        out.append(name)
    return out


def request_of(work: WorkRequest, query: EstimateQuery) -> Request:
    """The :class:`~gpumatch.estimate.request.Request` of ``work`` with the query's layout: only what the file
    or a flag set (defaults never trigger a rule); the concepts keep their names, and the request splits them
    over the replicas and DP ranks itself (:mod:`gpumatch.estimate.request`).

    The deprecated ``estimate --batch`` of an inference task (sequences per replica) is ``concurrency`` =
    that × the replicas. ``--micro-batches`` with a ``--global-batch`` flag is an error (both set the step's
    batch); with a file's global batch, ``--micro-batches`` wins over the file's accumulation.
    """
    keep = ("concurrency", "global_batch", "micro_batch", "seq", "prompt", "gen", "precision", "kv_precision",
            "optimizer", "master_weights", "lora_rank", "price_basis", "gpus_per_node", "engine", "request_rate",
            "prefix_hit_ratio", "slo_ttft_s", "slo_tpot_s")
    opts: dict[str, Any] = {k: v for k, v in work.given().items() if k in keep}
    opts["task"] = estimator_task(work.task)
    layout = {"count": query.count, "tp": query.tp, "pp": query.pp, "dp": query.dp, "zero": query.zero,
              "recompute": query.recompute, "micro_batches": query.micro_batches,
              "offload_optimizer": query.offload_optimizer or None, "num_prompts": query.num_prompts,
              "length_low": query.length_low, "memory_fraction": query.memory_fraction}
    opts.update({k: v for k, v in layout.items() if v is not None})
    if work.replica_batch is not None:
        opts["concurrency"] = work.replica_batch * _replicas(query)
    if query.micro_batches is not None and "global_batch" in work.from_flags:
        raise InputError(f"{work.flag('global_batch')} and --micro-batches both set the step's batch",
                         "give --global-batch with --micro-batch, or --micro-batch with --micro-batches")
    return Request(**opts)


def _replicas(query: EstimateQuery) -> int:
    """Data-parallel ranks (replicas) of the query's layout: ``--dp``, else ``count / (tp × pp)``, else 1."""
    if query.dp is not None:
        return query.dp
    split = (query.tp or 1) * (query.pp or 1)
    return max(1, (query.count or split) // split)


def _extras(query: EstimateQuery, work: WorkRequest) -> dict[str, Any]:
    """``run_tokens`` (``--run-tokens``, else a training file's ``targets.train_tokens``) and the calibration."""
    out: dict[str, Any] = {}
    if query.run_tokens is not None:
        try:
            out["run_tokens"] = token_count(query.run_tokens)
        except ValueError as e:
            raise InputError(f"--run-tokens: {e}") from None
    elif work.training and work.train_tokens is not None:
        out["run_tokens"] = work.train_tokens
    if query.calibration:
        cal: Calibration = load_calibration_file(query.calibration)
        out["calibration"] = cal
    elif query.calibration_value is not None:
        out["calibration"] = query.calibration_value
    return out

