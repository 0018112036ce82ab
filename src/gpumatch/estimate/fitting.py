"""What would make a configuration that does not fit fit: the planner's mitigations, tried on one request.

When :func:`gpumatch.estimate.estimate` finds that a configuration does not fit in memory, it tries the changes
the planner enumerates (:mod:`gpumatch.plan.enumeration`), one at a time and then the usual pairs, evaluates each
with the same engine, and names the first that fits with what it costs (step time or TPOT, tokens/s), so the
user is told "--recompute selective fits: 71.2 of 79.6 GiB, step 1.92 s (+19 %)" instead of only "does not
fit". Order (cheapest to the workload first):

1. same GPUs, same numerics, fastest first: recompute selective / full, a smaller micro-batch with more
   accumulation steps (same sequences per step), a higher ZeRO stage, optimizer offload to the CPU, and the
   pairs recompute full + micro-batch 1 / + ZeRO-3 / + offload (training);
2. other numerics, fastest first: a 4-bit base (QLoRA) for LoRA, 8-bit Adam for full training; an fp8 KV cache,
   int8, fp8 or int4 weights for inference; each alone and with each change of group 1;
3. more GPUs, fewest first: tensor parallel ×2 (inside a node, dividing the heads), then data parallel with
   ZeRO-3 (training) or pipeline stages ×2 (inference); each alone and with each change of group 1;
4. inference only: fewer sequences in flight (serves fewer users).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpumatch.catalog import GpuSpec
from gpumatch.errors import InputError
from gpumatch.estimate.calibration import Calibration
from gpumatch.estimate.case import model_nums
from gpumatch.estimate.engine import evaluate, memory_items
from gpumatch.estimate.options import build_case, kv_precision
from gpumatch.estimate.power import Site
from gpumatch.estimate.precision import bytes_per_element
from gpumatch.estimate.request import Request
from gpumatch.models.arch import ModelArch
from gpumatch.units import GIB
from gpumatch.vocab import FULL_TRAINING_TASKS

MAX_GPUS_TRIED = 64
"""More GPUs are tried up to this count; beyond it ``gpumatch plan`` is the tool."""


@dataclass(frozen=True)
class Fix:
    """One change that fits: the flags to add (``--recompute selective``), the request, and its metrics."""

    flags: str
    request: Request
    metrics: dict[str, float]
    group: int
    """1 same GPUs and numerics, 2 other numerics, 3 more GPUs, 4 fewer sequences in flight (module docstring)."""


def _training_changes(req: Request) -> Iterator[tuple[int, str, dict[str, object]]]:
    rc = ("selective", "full") if req.recompute == "none" else (("full",) if req.recompute == "selective" else ())
    for r in rc:
        yield 1, f"--recompute {r}", {"recompute": r}
    micro, accum = req.seqs_per_replica, req.grad_accum
    smaller = sorted({max(1, micro // 2**k) for k in range(1, 8)} - {micro}, reverse=True)
    for b in smaller:
        mb = accum * -(-micro // b)
        yield 1, f"--micro-batch {b} --micro-batches {mb}", {"micro_batch": b, "micro_batches": mb}
    top_zero = 1 if req.pp > 1 else 3
    zeros = range(req.zero + 1, top_zero + 1) if req.dp > 1 else range(0)
    for z in zeros:
        yield 1, f"--zero {z}", {"zero": z}
    full = req.task in FULL_TRAINING_TASKS
    if full and not req.offload_optimizer:
        yield 1, "--offload-optimizer", {"offload_optimizer": True}
    if req.recompute != "full":
        mb1 = accum * micro
        yield 1, f"--recompute full --micro-batch 1 --micro-batches {mb1}", {"recompute": "full", "micro_batch": 1,
                                                                              "micro_batches": mb1}
        if req.dp > 1 and req.zero < top_zero:
            yield 1, f"--recompute full --zero {top_zero}", {"recompute": "full", "zero": top_zero}
        if full and not req.offload_optimizer:
            yield 1, "--recompute full --offload-optimizer", {"recompute": "full", "offload_optimizer": True}
    if req.task == "lora":
        yield 2, "--task qlora --precision nf4", {"task": "qlora", "precision": "nf4"}
    if full and req.optimizer == "adamw":
        yield 2, "--optimizer adamw-8bit", {"optimizer": "adamw-8bit"}


def _inference_changes(req: Request) -> Iterator[tuple[int, str, dict[str, object]]]:
    kv = kv_precision(req)[0]
    if bytes_per_element(kv) > 1.0:
        yield 2, "--kv-precision fp8", {"kv_precision": "fp8"}
    for p in ("int8", "fp8", "int4"):
        if bytes_per_element(p) < bytes_per_element(req.precision):
            yield 2, f"--precision {p}", {"precision": p}
    for c in sorted({max(1, req.in_flight // 2**k) for k in range(1, 8)} - {req.in_flight}, reverse=True):
        yield 4, f"--concurrency {c}", {"concurrency": c}


def _more_gpus(req: Request) -> Iterator[tuple[int, str, dict[str, object]]]:
    tp = req.tp * 2
    while tp <= min(req.gpus_per_node, MAX_GPUS_TRIED // (req.pp * req.dp)):
        yield 3, f"--count {tp * req.pp * req.dp} --tp {tp}", {"tp": tp}
        tp *= 2
    if req.training:
        dp = req.dp * 2
        while dp * req.tp * req.pp <= MAX_GPUS_TRIED:
            z = 1 if req.pp > 1 else 3
            yield 3, f"--count {dp * req.tp * req.pp} --dp {dp} --zero {z}", {"dp": dp, "zero": z}
            dp *= 2
    else:
        pp = req.pp * 2
        while pp * req.tp * req.dp <= MAX_GPUS_TRIED:
            yield 3, f"--count {pp * req.tp * req.dp} --pp {pp}", {"pp": pp}
            pp *= 2


def _speed_key(req: Request, metrics: dict[str, float]) -> float:
    """Smaller is better: step time (training) or the time per generated token (inference)."""
    return metrics["step_s"] if req.training else 1.0 / metrics["tokens_per_s"]


def first_fit(arch: ModelArch, gpu: GpuSpec, req: Request, cal: Calibration, site: Site) -> Fix | None:
    """The first change (module docstring's order) with which ``req`` fits on ``gpu``; None when none does."""
    m = model_nums(arch)
    own = list(_training_changes(req) if req.training else _inference_changes(req))
    same = [(f, c) for g, f, c in own if g == 1]
    changes = [(1, f, c) for f, c in same]
    for g, flags, change in [*(x for x in own if x[0] != 1), *_more_gpus(req)]:
        changes.append((g, flags, change))  # alone, then with each same-GPU change (no key set twice)
        changes.extend((g, f"{flags} {f}", {**change, **c}) for f, c in same if not set(c) & set(change))
    changes.sort(key=lambda c: c[0])  # stable: the order within a group stays
    best: Fix | None = None
    for group, flags, change in changes:
        if best is not None and group != best.group:
            break  # the groups are in order: a fit in an earlier group wins
        try:
            alt = req.but(**change)
            case, _ = build_case(arch, gpu, alt)
        except InputError:
            continue  # e.g. a TP that does not divide the heads, a precision the card cannot compute
        mem = memory_items(alt.task, m, case, cal)
        if float(mem["total_bytes"]) > float(mem["capacity_bytes"]):
            continue
        out = {k: float(v) for k, v in evaluate(alt.task, m, case, cal, site).items()}
        fix = Fix(flags, alt, out, group)
        if best is None or (group != 3 and _speed_key(alt, out) < _speed_key(best.request, best.metrics)):
            best = fix
    return best


def describe(fix: Fix, req: Request, given: dict[str, float], usd_per_million_tokens: float | None = None) -> str:
    """``"fits with --recompute selective: 71.2 of 79.6 GiB per GPU, step 1.92 s (+19 % vs as given), ..."``.

    ``given`` holds the metrics of the request as given (computed although it does not fit, so the cost of the
    change can be stated); ``usd_per_million_tokens`` the change's price on the estimate's price basis.
    """
    m = fix.metrics
    mem = f"{m['total_bytes'] / GIB:.1f} of {m['capacity_bytes'] / GIB:.1f} GiB per GPU"
    if req.training:
        speed = f"step {m['step_s']:.3g} s ({_change(m['step_s'], given['step_s'])} vs as given), " \
                f"{m['tokens_per_s']:,.0f} trained tokens/s"
    else:
        speed = f"TPOT {m['tpot_s'] * 1e3:.1f} ms, {m['tokens_per_s']:,.0f} generated tokens/s " \
                f"({_change(m['tokens_per_s'], given['tokens_per_s'])} vs as given)"
    usd = f", ${usd_per_million_tokens:.3g}/1M tokens" if usd_per_million_tokens is not None else ""
    return f"fits with {fix.flags}: {mem}, {speed}{usd}"


def _change(new: float, old: float) -> str:
    return f"{(new / old - 1.0) * 100:+.0f} %" if old > 0 else "n/a"
