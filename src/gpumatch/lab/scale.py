"""``gpumatch bench scale`` as one library call: :func:`run_scale`.

The same workload on 1 -> 2 -> 4 -> 8 GPUs (only the counts the machine has: visible GPUs, or CPU processes
with ``cpu``), each rung launched by :func:`gpumatch.bench.dist.launch` (torchrun; NCCL on GPUs, gloo on
CPU processes), recorded through :class:`gpumatch.record.Recording` as ONE run of kind ``scale``:

- per rank and metric one result: ``step_time_s``, ``compute_time_s``, ``comm_time_s``, ``exposed_comm_s``,
  ``tokens_per_s``, ``peak_memory_bytes`` (training / TP decode) or ``collective_time_s`` and its
  ``collective_{alg,bus}bw_bytes_per_s`` (collectives); config ``{"n_gpus", "rank", "workload", ...}``, the raw
  timings in ``extra``;
- per rung the job-level ``ladder_*`` results of :mod:`gpumatch.lab.scale_derive` (config ``rank: null``,
  ``scope: "job"``), each with its formula and, beside it, the estimator's prediction and the ratio
  measured / predicted (:mod:`gpumatch.lab.scale_predict`), or the reason there is none;
- a rung that fails (:class:`~gpumatch.errors.DistLaunchError`: a crash, a timeout, out of memory) is a failure
  with its reason and log tail, and the ladder goes on; Ctrl-C closes the run ``interrupted`` and re-raises.

The manifest holds the machine (the bench manifest, collected in a child), the GPU topology
(:func:`gpumatch.telemetry.topology.gpu_topology`), the launch environment (NVLink multicast off) and
nnodes / nproc per rung.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpumatch.errors import GpumatchError, InputError
from gpumatch.lab import scale_derive as d
from gpumatch.lab.scale_predict import beside, no_prediction_reason, pcie_only, workload_step_s
from gpumatch.record import Recording

LADDER = (1, 2, 4, 8)
WORKLOADS = ("collectives", "ddp", "fsdp", "tp-decode")
MAX_CPU_RANKS = 8
Progress = Callable[[str, int, int, str], None]
"""``progress(phase, done, total, label)``: ``probe``, ``rung`` (starting ``label``), ``done``."""


@dataclass(frozen=True)
class ScaleRequest:
    """What ``gpumatch bench scale`` was asked (sizes in bytes; counts; ``timeout_s`` per rung)."""

    workload: str = "ddp"
    gpus: tuple[int, ...] = ()
    """Rungs; empty: 1, 2, 4, 8 up to what the machine has."""
    model: str | None = None
    batch_per_gpu: int = 1
    seq: int = 128
    steps: int = 10
    warmup_steps: int = 3
    sizes_bytes: tuple[int, ...] = ()
    ops: tuple[str, ...] = ()
    iters: int = 20
    cpu: bool = False
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    store: Path | str | None = None
    use_store: bool = True
    timeout_s: float = 600.0
    seed: int = 0
    work_dir: Path | None = None


@dataclass
class ScaleOutcome:
    """The recorded ladder: run id, how it closed, the ladder and collective rows, failures and notes."""

    run_id: int | None
    store_path: Path | str | None
    status: str
    workload: str
    device: str
    card: str | None
    ladder: list[dict[str, Any]] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    formulas: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__, store_path=None if self.store_path is None else str(self.store_path))


FORMULAS = {"tokens_per_s": d.THROUGHPUT_FORMULA, "tokens_per_s (tp-decode)": d.TP_THROUGHPUT_FORMULA,
            "per_added_gpu_tokens_per_s": d.PER_ADDED_FORMULA, "scaling_efficiency": d.EFFICIENCY_FORMULA,
            "delivers_gpus": d.DELIVERS_FORMULA, "exposed_comm_s": d.EXPOSED_FORMULA,
            "collective time_s": d.COLLECTIVE_TIME_FORMULA, "algbw_bytes_per_s": d.ALGBW_FORMULA,
            "busbw_bytes_per_s": d.BUSBW_FORMULA}


def check_request(req: ScaleRequest) -> None:
    """One-line InputError for a bad request, before anything starts."""
    if req.workload not in WORKLOADS:
        raise InputError(f"unknown --workload {req.workload!r}", f"one of {', '.join(WORKLOADS)}")
    if any(n < 1 for n in req.gpus):
        raise InputError(f"--gpus takes counts of 1 or more, got {','.join(map(str, req.gpus))}")
    for name, v in (("--batch-per-gpu", req.batch_per_gpu), ("--seq", req.seq), ("--steps", req.steps),
                    ("--nnodes", req.nnodes), ("--iters", req.iters)):
        if v < 1:
            raise InputError(f"{name} must be 1 or more, not {v}")
    if req.nnodes > 1 and not req.rdzv_endpoint:
        raise InputError(f"--nnodes {req.nnodes} needs --rdzv-endpoint HOST:PORT", "the same on every node")
    if req.timeout_s <= 0:
        raise InputError(f"the timeout must be positive, not {req.timeout_s}")


def parse_sizes(text: str) -> tuple[int, ...]:
    """``1KiB..1GiB`` (powers of two from the first to the last, nccl-tests ``-b 1K -e 1G -f 2``), ``4KiB..64MiB:4``
    (factor 4), or a comma list ``1MiB,16MiB``; bytes. InputError for anything else."""
    from gpumatch.units import parse_bytes

    text = text.strip()
    if ".." not in text:
        return tuple(parse_bytes(p.strip()) for p in text.split(",") if p.strip())
    span, _, factor_text = text.partition(":")
    lo_text, _, hi_text = span.partition("..")
    lo, hi = parse_bytes(lo_text.strip()), parse_bytes(hi_text.strip())
    try:
        factor = int(factor_text) if factor_text else 2
    except ValueError:
        raise InputError(f"bad size step {factor_text!r} in --sizes {text!r}", "e.g. 1KiB..1GiB:4") from None
    if lo < 1 or hi < lo or factor < 2:
        raise InputError(f"bad --sizes {text!r}", "LOW..HIGH with 1 <= LOW <= HIGH and a factor of 2 or more")
    out = [lo]
    while out[-1] * factor <= hi:
        out.append(out[-1] * factor)
    return tuple(out)


def parse_counts(text: str) -> tuple[int, ...]:
    """``1,2,4,8`` as counts; InputError for anything else."""
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise InputError(f"--gpus takes counts like 1,2,4,8, got {text!r}") from None


def rungs(req: ScaleRequest, device: str, gpus_here: int) -> tuple[list[int], list[str]]:
    """The counts to run and notes on those left out: GPUs visible (per node), or CPU processes (at most
    :data:`MAX_CPU_RANKS`; by default not more than the cores, at least 2)."""
    have = gpus_here if device == "cuda" else MAX_CPU_RANKS if req.gpus else max(2, os.cpu_count() or 1)
    asked = sorted(set(req.gpus or LADDER))
    run = [n for n in asked if n <= have]
    notes = [f"{n} {'GPUs' if device == 'cuda' else 'processes'} skipped: this machine has {have}"
             for n in asked if n > have and (req.gpus or device == "cuda")]
    if device == "cpu" and run and max(run) > (os.cpu_count() or 1):
        notes.append(f"{max(run)} CPU processes on {os.cpu_count()} cores: the ranks share cores, so CPU timings "
                     "measure contention as well")
    if not run:
        raise InputError(f"none of the counts {','.join(map(str, asked))} fits this machine ({have})",
                         "lower --gpus")
    return run, notes


def _model(req: ScaleRequest, tiny: bool) -> tuple[dict[str, Any], str | None]:
    """(bench shape, model name the estimator knows): ``--model``, else Llama-3.2-1B on GPUs, a tiny shape on CPU."""
    from gpumatch.bench import shapes

    if req.model is None:
        return (shapes.tiny_shape(), None) if tiny else (dict(shapes.LLAMA_3_2_1B), "llama-3.2-1b")
    from gpumatch.lab.inputs import arch_shape
    from gpumatch.models import resolve_model

    arch = resolve_model(req.model)
    return arch_shape(arch), arch.name


def build_spec(req: ScaleRequest, shape: dict[str, Any], device: str) -> Any:
    """The :class:`gpumatch.bench.dist.DistSpec` of every rung (fp32 on CPU, bf16 on GPUs)."""
    from gpumatch.bench.dist.spec import DistSpec

    extra: dict[str, Any] = {"ops": req.ops} if req.ops else {}
    return DistSpec(workload=req.workload, model=shape if req.workload != "collectives" else {},
                    batch_per_rank=req.batch_per_gpu, seq_len=req.seq, steps=req.steps,
                    warmup_steps=req.warmup_steps, sizes_bytes=req.sizes_bytes,
                    dtype="bf16" if device == "cuda" else "fp32", iters=req.iters, seed=req.seed, **extra)


def _probe(device: str) -> dict[str, Any]:
    from gpumatch.lab.child import run_in_child

    got = run_in_child({"run": {"scale": True}}, 180.0, target="gpumatch.bench.manifest:collect_case")
    if got.outcome is None:
        raise GpumatchError(f"could not describe this machine ({got.error_class}: {got.message})",
                            "is torch installed? ('pip install gpumatch[bench]'); " + got.log_tail[-300:])
    return dict(got.outcome)


def topology() -> dict[str, Any]:
    """The GPU topology (:func:`gpumatch.telemetry.topology.gpu_topology`), or why there is none."""
    import importlib

    try:
        reader = importlib.import_module("gpumatch.telemetry.topology")
    except ImportError as e:
        return {"available": False, "reason": f"no topology reader ({e})"}
    try:
        return dict(reader.gpu_topology())
    except GpumatchError as e:
        return {"available": False, "reason": str(e)}


def _device(req: ScaleRequest) -> tuple[str, int]:
    if req.cpu:
        return "cpu", 0
    from gpumatch.bench.dist.launch import visible_gpus

    n = visible_gpus()
    return ("cuda", n) if n > 0 else ("cpu", 0)


def run_scale(req: ScaleRequest, progress: Progress | None = None) -> ScaleOutcome:
    """Run the ladder and record it (module docstring)."""
    from gpumatch.bench.dist.launch import NVLS_OFF, child_env
    from gpumatch.lab.predict import catalog_gpu

    check_request(req)
    say = progress or (lambda *a: None)
    device, gpus_here = _device(req)
    counts, notes = rungs(req, device, gpus_here)
    shape, model_name = _model(req, device != "cuda")
    spec = build_spec(req, shape, device)
    say("probe", 0, len(counts), "environment")
    fields = _probe(device)
    gpu_name = fields.get("gpu.name") or fields.get("device.name")
    card = catalog_gpu(gpu_name) if device == "cuda" else None
    topo = topology()
    env = {k: v for k, v in child_env(device, {}).items() if k != "PYTHONPATH"}
    fields.update({"scale.workload": req.workload, "scale.topology": topo, "scale.launch_env": env,
                   "scale.nvls_off": dict(NVLS_OFF), "scale.nnodes": req.nnodes, "scale.nproc_per_node": counts,
                   "scale.rdzv_endpoint": req.rdzv_endpoint, "scale.backend": "nccl" if device == "cuda" else "gloo",
                   "scale.device": device, "scale.spec": spec.to_json(), "model.name": shape.get("name"),
                   "model.architecture": shape, "run.notes": notes})
    config = {"workload": req.workload, "gpus": counts, "model": shape.get("name"), "nnodes": req.nnodes,
              "batch_per_gpu": req.batch_per_gpu, "seq": req.seq, "steps": req.steps, "device": device,
              "sizes_bytes": list(spec.sizes()) if req.workload == "collectives" else []}
    why = no_prediction_reason(card, device, gpu_name)
    out = ScaleOutcome(None, None, "running", req.workload, device, card, notes=notes, formulas=dict(FORMULAS))
    if why:
        out.notes.append(why)
    ctx = _Ctx(req, spec, device, card, why, model_name, topo)
    with tempfile.TemporaryDirectory(prefix="gpumatch-scale-", dir=req.work_dir) as tmp, \
            Recording("scale", f"{req.workload} {shape.get('name') or ''} x{','.join(map(str, counts))}".strip(),
                      fields, config, use_store=req.use_store, store_path=req.store) as rec:
        out.run_id, out.store_path = rec.run_id, rec.store_path
        rungs_done: list[d.Rung] = []
        for i, n in enumerate(counts):
            say("rung", i, len(counts), f"{req.workload} on {n * req.nnodes}")
            _one_rung(rec, ctx, n, Path(tmp) / f"n{n}", rungs_done, out)
        out.ladder = _ladder(rec, ctx, rungs_done)
        summary = {"rungs": len(counts), "ok": len(rungs_done) or len({c["n_gpus"] for c in out.collectives}),
                   "failed": len(out.failures), "card": card, "device": device}
        closed = rec.close("completed", summary)
    say("done", len(counts), len(counts), "")
    out.status = closed.status
    if closed.error is not None:
        raise GpumatchError(f"results store not updated: {closed.error}",
                            f"what it did not take is in {', '.join(map(str, closed.fallback)) or 'nowhere'}")
    return out


@dataclass(frozen=True)
class _Ctx:
    req: ScaleRequest
    spec: Any
    device: str
    card: str | None
    why: str | None
    model_name: str | None
    topo: dict[str, Any]


def _failure_class(e: GpumatchError) -> str:
    text = f"{e} {getattr(e, 'log_tail', '')}".lower()
    return "OutOfMemoryError" if "out of memory" in text or "outofmemoryerror" in text else type(e).__name__


def _one_rung(rec: Recording, ctx: _Ctx, n: int, out_dir: Path, done: list[d.Rung], out: ScaleOutcome) -> None:
    from gpumatch.bench.dist.launch import launch
    from gpumatch.errors import DistLaunchError

    base = {"n_gpus": n * ctx.req.nnodes, "nproc_per_node": n, "workload": ctx.req.workload,
            "nnodes": ctx.req.nnodes}
    try:
        res = launch(ctx.spec, n, out_dir=out_dir, device=ctx.device, timeout_s=ctx.req.timeout_s,
                     nnodes=ctx.req.nnodes, rdzv_endpoint=ctx.req.rdzv_endpoint)
    except DistLaunchError as e:
        cls, tail = _failure_class(e), getattr(e, "log_tail", "")
        rec.add_failure(base, cls, str(e).split("\n", 1)[0][:500], tail)
        out.failures.append({**base, "error_class": cls, "message": str(e).split("\n", 1)[0][:500]})
        return
    rec.add_event(res.wall_s, "rung", {**base, "backend": res.backend, "device": res.device, "wall_s": res.wall_s,
                                       "ranks": len(res.ranks), "log_tail": res.log_tail[-2000:]})
    n_world = int((res.ranks[0].get("world_size") if res.ranks else None) or n * ctx.req.nnodes)
    if ctx.req.workload == "collectives":
        _record_collectives(rec, ctx, base, res.ranks, n_world, out)
    else:
        done.append(_record_steps(rec, ctx, base, res.ranks, n_world))


def _rank_cfg(base: dict[str, Any], r: dict[str, Any], n_world: int) -> dict[str, Any]:
    return {**base, "n_gpus": n_world, "rank": r.get("rank"), "hostname": r.get("hostname"),
            "device_name": r.get("device_name")}


def _record_steps(rec: Recording, ctx: _Ctx, base: dict[str, Any], ranks: list[dict[str, Any]],
                  n: int) -> d.Rung:
    shape = {"batch_per_gpu": ctx.req.batch_per_gpu, "seq": ctx.req.seq}
    exposed: list[float] = []
    for r in ranks:
        s, cfg = r["steps"], {**_rank_cfg(base, r, n), **shape}
        raw = {"step_time_s": s["step_time_s"], "compute_time_s": s.get("compute_time_s"),
               "comm_time_s": s.get("comm_time_s"), "loss": s.get("loss"), "tokens_per_step": s["tokens_per_step"],
               "precision": s.get("precision")}
        rec.add_result("step_time_s", d.median(s["step_time_s"]), "s", config=cfg,
                       extra={**raw, "n": len(s["step_time_s"]), "statistic": "median"})
        for key in ("compute_time_s", "comm_time_s"):
            if s.get(key):
                rec.add_result(key, d.median(s[key]), "s", config=cfg, extra={key: s[key], "statistic": "median"})
        x = d.exposed_comm_s(s["step_time_s"], s.get("compute_time_s") or [])
        if x is not None:
            exposed.append(x)
            rec.add_result("exposed_comm_s", x, "s", config=cfg, extra={"formula": d.EXPOSED_FORMULA})
        if s.get("tokens_per_s"):
            rec.add_result("tokens_per_s", float(s["tokens_per_s"]), "token/s", config=cfg,
                           extra={"tokens_per_step": s["tokens_per_step"]})
        if s.get("peak_memory_bytes") is not None:
            rec.add_result("peak_memory_bytes", float(s["peak_memory_bytes"]), "B", config=cfg)
    x_n, _, step_s = d.job_throughput(ranks, ctx.req.workload == "tp-decode", n)
    return d.Rung(n, x_n, step_s, max(exposed) if exposed else None)


def _record_collectives(rec: Recording, ctx: _Ctx, base: dict[str, Any], ranks: list[dict[str, Any]], n: int,
                        out: ScaleOutcome) -> None:
    from gpumatch.calibrate.collectives import predict_or_none

    refused: set[tuple[str, int]] = set()
    for r in ranks:
        for c in r.get("collectives") or []:
            cfg = {**_rank_cfg(base, r, n), "op": c["op"], "size_bytes": c["size_bytes"], "dtype": c.get("dtype")}
            if c.get("supported") is False or not c.get("time_s"):
                key = (str(c["op"]), int(c["size_bytes"]))
                if key not in refused:
                    refused.add(key)
                    reason = str(c.get("reason") or "no timings")
                    rec.add_failure({**cfg, "rank": None}, "unsupported", reason)
                    out.failures.append({**base, "op": c["op"], "size_bytes": c["size_bytes"],
                                         "error_class": "unsupported", "message": reason})
                continue
            raw = {"time_s": c["time_s"], "count": c.get("count"), "n": len(c["time_s"]), "statistic": "median"}
            rec.add_result("collective_time_s", d.median(c["time_s"]), "s", config=cfg, extra=raw)
            t = d.median(c["time_s"])
            factor = d.busbw_factor(str(c["op"]), n)
            rec.add_result("collective_algbw_bytes_per_s", c["size_bytes"] / t, "B/s", config=cfg,
                           extra={"formula": d.ALGBW_FORMULA})
            rec.add_result("collective_busbw_bytes_per_s", c["size_bytes"] / t * factor, "B/s", config=cfg,
                           extra={"formula": d.BUSBW_FORMULA, "busbw_factor": factor})
    pcie = pcie_only(ctx.topo, n)
    for row in d.collective_rows(ranks, n):
        cfg = {**base, "n_gpus": n, "rank": None, "scope": "job", "op": row["op"], "size_bytes": row["size_bytes"],
               "dtype": row["dtype"]}
        pred = predict_or_none(row["op"], row["size_bytes"], n, ctx.card, pcie)
        note = ctx.why or ("one rank: no communication to model" if n < 2 else None)
        row.update(beside(row["time_s"], pred, "gpumatch.estimate.comm on " + str(ctx.card), note))
        rec.add_result("ladder_collective_time_s", row["time_s"], "s", config=cfg,
                       extra={"formula": d.COLLECTIVE_TIME_FORMULA, "rank_median_time_s": row["rank_median_time_s"],
                              "pcie_tier": pcie, **{k: row.get(k) for k in ("predicted", "ratio", "predicted_by",
                                                                             "prediction_note")}})
        rec.add_result("ladder_algbw_bytes_per_s", row["algbw_bytes_per_s"], "B/s", config=cfg,
                       extra={"formula": d.ALGBW_FORMULA})
        pred_bus = None if pred is None else row["size_bytes"] / pred * row["busbw_factor"]
        rec.add_result("ladder_busbw_bytes_per_s", row["busbw_bytes_per_s"], "B/s", config=cfg,
                       extra={"formula": d.BUSBW_FORMULA, "busbw_factor": row["busbw_factor"],
                              **beside(row["busbw_bytes_per_s"], pred_bus, "gpumatch.estimate.comm", note)})
        out.collectives.append({k: v for k, v in row.items() if k != "rank_median_time_s"})


def _ladder(rec: Recording, ctx: _Ctx, rungs_done: list[d.Rung]) -> list[dict[str, Any]]:
    """The job-level ladder rows (:func:`gpumatch.lab.scale_derive.ladder`), recorded with predictions."""
    rows = d.ladder(rungs_done)
    tp = ctx.req.workload == "tp-decode"
    for row in rows:
        n = row["n_gpus"]
        cfg = {"n_gpus": n, "rank": None, "scope": "job", "workload": ctx.req.workload, "nnodes": ctx.req.nnodes,
               "batch_per_gpu": ctx.req.batch_per_gpu, "seq": ctx.req.seq}
        pred = workload_step_s(ctx.req.workload, ctx.model_name, ctx.card, n,
                               ctx.req.batch_per_gpu, ctx.req.seq)
        what = f"gpumatch estimate ({'tpot_s' if tp else 'step_s'}) on {ctx.card}"
        step_pred = beside(row["step_s"], pred, what, ctx.why)
        tokens = row["tokens_per_s"] * row["step_s"]
        tok_pred = beside(row["tokens_per_s"], None if pred is None else tokens / pred, what, ctx.why)
        row.update({"predicted_step_s": step_pred.get("predicted"), "step_ratio": step_pred.get("ratio"),
                    "predicted_tokens_per_s": tok_pred.get("predicted"), "ratio": tok_pred.get("ratio")})
        rec.add_result("ladder_step_s", row["step_s"], "s", config=cfg,
                       extra={"formula": "max over ranks of median(step_time_s)", **step_pred})
        rec.add_result("ladder_tokens_per_s", row["tokens_per_s"], "token/s", config=cfg,
                       extra={"formula": d.TP_THROUGHPUT_FORMULA if tp else d.THROUGHPUT_FORMULA, **tok_pred})
        for metric, key, unit, formula in (
                ("ladder_per_added_gpu_tokens_per_s", "per_added_gpu_tokens_per_s", "token/s", d.PER_ADDED_FORMULA),
                ("ladder_scaling_efficiency", "scaling_efficiency", "1", d.EFFICIENCY_FORMULA),
                ("ladder_delivers_gpus", "delivers_gpus", "1", d.DELIVERS_FORMULA),
                ("ladder_exposed_comm_s", "exposed_comm_s", "s", d.EXPOSED_FORMULA)):
            if row[key] is not None:
                rec.add_result(metric, row[key], unit, config=cfg, extra={"formula": formula})
    return rows
