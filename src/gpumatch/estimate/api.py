"""Public entry points: :func:`estimate` for one configuration, :func:`memory_curve` for growth curves.

The planner evaluates many candidates at once through :func:`gpumatch.estimate.engine.evaluate` on a
:class:`~gpumatch.estimate.case.Case` of numpy arrays (see :mod:`gpumatch.estimate.vectorized`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from gpumatch.catalog import GpuSpec, get_gpu
from gpumatch.catalog.prices import HOURLY_BASES, select_price, unpriced_mark
from gpumatch.errors import InputError
from gpumatch.estimate import fitting, served, serving
from gpumatch.estimate._num import Num
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.case import Case, model_nums
from gpumatch.estimate.engine import TRAIN_TASKS, evaluate, replica_case, scaling
from gpumatch.estimate.intervals import Residuals, estimate_intervals, where_of
from gpumatch.estimate.options import build_case, kv_precision
from gpumatch.estimate.passes import PassCost, PassShape
from gpumatch.estimate.power import DEFAULT_SITE, Site
from gpumatch.estimate.request import Request
from gpumatch.estimate.results import Estimate, MemoryEstimate, PriceBasis
from gpumatch.estimate.roofline import BOUNDS
from gpumatch.models import resolve_model
from gpumatch.models.arch import ModelArch
from gpumatch.units import GIB
from gpumatch.workload.rules import MAX_RUN_TOKENS, check_bound


def model_arch(model: ModelArch | str) -> ModelArch:
    """A ModelArch as given, or what :func:`gpumatch.models.resolve_model` makes of a string: a preset name or
    alias, or a path to a Hugging Face ``config.json`` (or to a folder holding one, or to a preset TOML)."""
    return model if isinstance(model, ModelArch) else resolve_model(model)


def resolve_gpu(gpu: GpuSpec | str) -> GpuSpec:
    return gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)


def _price(gpu: GpuSpec, metrics: dict[str, float], basis: str) -> tuple[PriceBasis | None, float, float]:
    """(quotes used, $/h, $/1M tokens) on one price basis, chosen by the same function as the planner
    (:func:`gpumatch.catalog.prices.select_price`); NaN costs and no basis when the card has no quote of it."""
    choice = select_price(gpu, basis)
    if choice.value is None:
        return None, float("nan"), float("nan")
    who = choice.quotes[0].provider if choice.providers == 1 else f"median of {choice.providers} providers"
    when = choice.period() if choice.quotes else ""
    url = choice.quotes[0].source_url if choice.quotes else ""
    if basis in HOURLY_BASES:
        return (PriceBasis(basis, choice.value, when, url, who, choice.to_dict()), metrics["usd_per_hour_cloud"],
                metrics["usd_per_million_tokens_cloud"])
    if math.isnan(metrics["usd_per_hour_owned"]):
        return None, float("nan"), float("nan")
    per_gpu_h = metrics["usd_per_hour_owned"] / metrics["count"]
    return (PriceBasis(basis, per_gpu_h, when, url, who, choice.to_dict()), metrics["usd_per_hour_owned"],
            metrics["usd_per_million_tokens_owned"])


def estimate(
    model: ModelArch | str,
    gpu: GpuSpec | str,
    request: Request | None = None,
    *,
    calibration: Calibration | None = None,
    site: Site | None = None,
    with_scaling: bool = True,
    run_tokens: float | None = None,
    residuals: Residuals | None = None,
) -> Estimate:
    """Estimate one configuration: ``request`` (:class:`~gpumatch.estimate.request.Request`, validated when it
    was built; None = its defaults) of ``model`` on ``gpu``.

    ``run_tokens`` (training tokens of a whole run, or tokens to generate) adds ``run_hours``,
    ``energy_kwh_per_run`` (facility: GPUs + host share, × PUE), ``gpu_energy_kwh_per_run`` and ``usd_per_run``.

    Every time and memory figure gets an interval from ``residuals`` (default: the shipped table;
    :mod:`gpumatch.estimate.intervals`), or from the calibration's own held-out residuals
    (``Calibration.residuals``) where they apply to the card.

    Raises :class:`InputError` for impossible combinations (TP not dividing the heads, count ≠ tp·pp·dp,
    unknown precision, a precision the GPU cannot compute).
    """
    arch, spec = model_arch(model), resolve_gpu(gpu)
    cal = calibration or DEFAULT_CALIBRATION
    req = request or Request()
    case, warnings = build_case(arch, spec, req)
    m = model_nums(arch)
    sv, run_case, note = _serving(arch, spec, req, case, cal)
    warnings += (note,) if note else ()
    out = evaluate(req.task, m, run_case, cal, site or DEFAULT_SITE)
    served.apply_engine(out, sv, run_case, case, site or DEFAULT_SITE)
    if with_scaling and req.count > 1:
        out.update(scaling(req.task, m, run_case, out, cal))
    metrics = {k: float(v) for k, v in out.items()}
    price, usd_h, usd_m = _price(spec, metrics, req.price_basis)
    if price is None:
        warnings += (f"{unpriced_mark(req.price_basis)} for {spec.name}: cost not estimated (try another "
                     "--price-basis, or add a quote in a price overlay)",)
    metrics["usd_per_hour"], metrics["usd_per_million_tokens"] = usd_h, usd_m
    metrics["uncertainty_fraction"], why = cal.time_uncertainty(spec.name)
    metrics["power_idle_w"] = spec.tdp_w * cal.idle_power_fraction
    metrics["power_peak_w"] = spec.tdp_w
    if run_tokens is not None:
        if run_tokens <= 0:
            raise InputError(f"run tokens must be positive, got {run_tokens}")
        check_bound("--run-tokens", run_tokens, MAX_RUN_TOKENS)
        metrics.update({k: float(v) for k, v in run_metrics(run_tokens, metrics).items()})
    mem = MemoryEstimate({k: metrics[k] for k in _MEMORY_ITEMS})
    hint = ""
    if not mem.fits:
        over = -mem.margin_bytes / GIB
        hint = _fit_hint(arch, spec, req, cal, site or DEFAULT_SITE, metrics)
        tail = f"; {hint}" if hint else (
            "; none of the changes tried fits (see 'gpumatch plan' for more GPUs or other cards)")
        warnings += (f"does not fit: needs {over:.1f} GiB more than the {mem.items['capacity_bytes'] / GIB:.1f} "
                     f"GiB of {spec.name}{tail}",)
    where = where_of(spec.name, req.task, str(_weights(req)), arch.params_total, case.seq if req.training else None,
                     None if req.training else case.prompt, None if req.training else case.gen, req.count,
                     open_loop=req.request_rate is not None)
    spans, span_basis = estimate_intervals(dict(metrics, total_bytes=mem.total_bytes), where, req.training,
                                           cal.extrapolated_error_fraction, residuals, cal.residuals)
    return Estimate(
        task=req.task,
        model=arch.name,
        gpu=spec.name,
        count=req.count,
        layout={"tp": req.tp, "pp": req.pp, "dp": req.dp, "zero": req.zero, "micro_batches": req.grad_accum,
                "seqs_per_replica": req.seqs_per_replica, "seq": int(case.seq) if req.task in TRAIN_TASKS else None,
                "prompt": None if req.task in TRAIN_TASKS else int(case.prompt),
                "gen": None if req.task in TRAIN_TASKS else int(case.gen),
                "recompute": req.recompute, "flash": req.flash,
                "in_flight": None if req.task in TRAIN_TASKS else req.in_flight},
        precision={"weights": req.precision if req.task != "qlora" else "nf4", "weight_bytes": case.weight_bytes,
                   "kept_16_bit": _kept_16_bit(arch, case),
                   "kv_bytes": case.kv_bytes, "kv": kv_precision(req)[0], "kv_basis": kv_precision(req)[1],
                   "activation_bytes": case.act_bytes,
                   "optimizer": req.optimizer if req.task in TRAIN_TASKS else None,
                   "master_weights": req.master_weights if req.task in TRAIN_TASKS else None},
        basis=cal.basis,
        provenance=cal.provenance,
        memory=mem,
        metrics=metrics,
        bound=BOUNDS[int(out["bound_index"])],
        price=price,
        warnings=warnings,
        uncertainty_basis=why,
        fit_hint=hint,
        intervals=spans,
        interval_basis=span_basis,
        serving=None if sv is None else sv.assumptions(float(case.dp)),
    )


def _kept_16_bit(arch: ModelArch, case: Case) -> list[str]:
    """The tensors a quantized checkpoint keeps at the activations' 16 bits (:mod:`gpumatch.estimate.precision`):
    attention of an MoE model with FP4 experts, the embedding and the LM head; empty when none differ."""
    kept = ["attention"] if arch.is_moe and float(case.moe_attention_weight_bytes) != float(case.weight_bytes) else []
    return kept + (["embedding", "LM head"] if float(case.edge_weight_bytes) != float(case.weight_bytes) else [])


def _weights(req: Request) -> str:
    return req.precision if req.task != "qlora" else "nf4"


def _serving(arch: ModelArch, spec: GpuSpec, req: Request, case: Case,
             cal: Calibration) -> tuple[serving.Serving | None, Case, str]:
    """The engine's steady state of ``req`` (:func:`gpumatch.estimate.served.engine_state`)."""
    return served.engine_state(model_nums(arch), case, cal, req.serving_engine, spec.name,
                               request_rate=req.request_rate, prefix_hit_ratio=req.prefix_hit_ratio,
                               bench=served.benchmark_of(req.num_prompts, req.length_low, case, req.request_rate),
                               targets=(req.slo_ttft_s, req.slo_tpot_s))


def pass_costs(model: ModelArch | str, gpu: GpuSpec | str, request: Request,
               passes: Sequence[PassShape], calibration: Calibration | None = None) -> list[PassCost]:
    """What the serving model predicts for each of ``passes`` (an engine's logged passes: decode rows, their mean
    context, prompt chunks) under ``request``'s engine profile (``--engine``) on one replica, part by part
    (:class:`gpumatch.estimate.passes.PassCost`): the pass time the replay adds up, held against a measured one
    (``benchmarks/serve_passes.py``)."""
    arch, spec = model_arch(model), resolve_gpu(gpu)
    case, _ = build_case(arch, spec, request)
    if request.serving_engine == "static":
        raise InputError("the static engine has no passes to cost", "use --engine vllm, sglang, trtllm or gpumatch")
    return serving.pass_costs(model_nums(arch), replica_case(case), calibration or DEFAULT_CALIBRATION,
                              request.serving_engine, spec.name, list(passes))


def _fit_hint(arch: ModelArch, spec: GpuSpec, req: Request, cal: Calibration, site: Site,
              given: dict[str, float]) -> str:
    """The first change that fits (:mod:`gpumatch.estimate.fitting`) with its cost, or "" when none does."""
    fix = fitting.first_fit(arch, spec, req, cal, site)
    if fix is None:
        return ""
    usd = _price(spec, dict(fix.metrics), req.price_basis)[2]
    return fitting.describe(fix, req, given, None if math.isnan(usd) else usd)


def run_metrics(run_tokens: Num, out: dict[str, Num], usd_per_hour_key: str = "usd_per_hour") -> dict[str, Num]:
    """Hours, energy (kWh: facility and GPU-only) and dollars of a run of ``run_tokens`` useful tokens.

    ``out`` is an estimate's metrics or :func:`evaluate`'s dict of arrays (then pass
    ``usd_per_hour_key="usd_per_hour_cloud"`` or ``"usd_per_hour_owned"``).
    """
    run_s = run_tokens / out["useful_tokens_per_s"]
    return {
        "run_tokens": run_tokens,
        "run_hours": run_s / 3600.0,
        "energy_kwh_per_run": out["facility_power_w"] * run_s / 3.6e6,
        "gpu_energy_kwh_per_run": out["power_w"] * out["count"] * run_s / 3.6e6,
        "usd_per_run": out[usd_per_hour_key] * run_s / 3600.0,
    }


_MEMORY_ITEMS = (
    "weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes", "overhead_bytes",
    "total_bytes", "capacity_bytes", "logits_bytes", "autocast_copies_bytes", "tied_embedding_grad_bytes",
    "cuda_context_bytes", "comm_buffer_bytes", "fragmentation_bytes", "gather_buffer_bytes", "offloaded_bytes",
    "not_at_peak_bytes",
)


def memory_curve(
    model: ModelArch | str,
    gpu: GpuSpec | str,
    request: Request | None = None,
    *,
    batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    seqs: Sequence[int] = (512, 1024, 2048, 4096, 8192),
    calibration: Calibration | None = None,
) -> list[dict[str, Any]]:
    """Per-GPU memory over a grid of batch sizes × sequence lengths (seed: "逐步增加批量或序列长度").

    The batch is the sequences per replica (``Case.seqs_per_replica``: the micro-batch when training); for
    inference the sequence is the prompt length. Rows: batch, seq, the memory items, fits.
    """
    arch, spec = model_arch(model), resolve_gpu(gpu)
    req = request or Request()
    case, _ = build_case(arch, spec, req)
    b, s = np.meshgrid(np.asarray(batches, float), np.asarray(seqs, float), indexing="ij")
    b, s = b.ravel(), s.ravel()
    grid = replace(case, seqs_per_replica=b, in_flight=float("inf"))
    grid = replace(grid, seq=s) if req.training else replace(grid, prompt=s)
    out = evaluate(req.task, model_nums(arch), grid, calibration or DEFAULT_CALIBRATION)
    keys = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes", "kv_cache_bytes",
            "overhead_bytes", "total_bytes")
    rows = []
    for i in range(b.size):
        row: dict[str, Any] = {"batch": int(b[i]), "seq": int(s[i])}
        row.update({k: float(np.broadcast_to(out[k], b.shape)[i]) for k in keys})
        row["fits"] = bool(row["total_bytes"] <= float(np.broadcast_to(out["capacity_bytes"], b.shape)[i]))
        rows.append(row)
    return rows
