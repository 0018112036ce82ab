"""One suite case of ``gpumatch bench run``, run in the process that calls it (the lab runs it in a child).

:func:`run_case` takes a plain case dict (``{"id", "kind", "params"}``, built by :mod:`gpumatch.lab.suites`) and
returns a plain outcome dict: ``status`` (``ok`` or ``skipped``), ``reason`` (why it was skipped), ``results``
(``{metric, value, unit, config, extra}``: SI values, the timing's ``n`` and the percentiles ``n`` supports in
``extra``, the raw timings there too) and ``failures`` (a part of the case that failed while the rest ran:
``{config, error_class, message}``). Anything else (an out-of-memory error, a crash) propagates: the caller
records it. Kinds: ``gemm``, ``copy``, ``pinned``, ``launch``, ``decode``, ``prefill``, ``train``, ``soak``,
``kernelpath``, ``convergence``, ``quality`` and ``fault`` (fails on purpose: tests of the lab's failure handling).

Metrics (unit): ``gemm_flops_per_s`` (flop/s), ``copy_bytes_per_s`` and ``read_bytes_per_s`` (B/s: copy counts
read + write), ``h2d_bytes_per_s``/``d2h_bytes_per_s`` (B/s), ``launch_eager_s``/``launch_graph_kernel_s`` (s),
``decode_step_s`` (s; = TPOT of a static batch), ``decode_tokens_per_s``, ``prefill_s`` (s; = TTFT of that
prompt without queueing), ``prefill_tokens_per_s``, ``train_step_s``, ``train_tokens_per_s``,
``train_peak_memory_bytes`` (B), ``soak_flops_per_s``, ``soak_warmup_s``, ``quality_perplexity`` (1),
``quality_top1_agreement`` (1: a fraction), ``quality_kl_nat`` (nat), ``quality_tokens`` (token).
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import torch

from gpumatch.bench.gemm import Unsupported, gemm, pinned_copy
from gpumatch.bench.stats import thermal_steady
from gpumatch.bench.work import prefill_flops, train_flops
from gpumatch.stats import median, reported_percentiles

Outcome = dict[str, Any]


def _result(metric: str, value: float, unit: str, config: dict[str, Any],
            timing: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    ext = dict(extra)
    if timing is not None:
        ext.update(reported_percentiles(timing["raw_s"]))
        ext["raw_s"] = timing["raw_s"]
    return {"metric": metric, "value": float(value), "unit": unit, "config": config, "extra": ext}


def _power(row: dict[str, Any]) -> dict[str, Any]:
    """The power window of a timed row (:func:`gpumatch.bench.timing.power_window`) as result extras."""
    w = row.get("power_window")
    return {"power_window_monotonic_s": w["monotonic_s"], "power_window_iters": w["iters"]} if w else {}


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _gemm(p: dict[str, Any], dev: torch.device) -> Outcome:
    out = []
    for m, n, k in p["shapes"]:
        row = gemm(m, n, k, p["precision"], dev, iters=int(p.get("iters", 30)))
        out.append(_result("gemm_flops_per_s", row["flops_per_s"], "flop/s",
                           {"m": m, "n": n, "k": k, "precision": p["precision"]}, row["timing"]))
    return {"results": out}


def _copy(p: dict[str, Any], dev: torch.device) -> Outcome:
    from gpumatch.bench.micro import copy_case

    out = []
    for size in p["sizes"]:
        row = copy_case(int(size), dev, iters=int(p.get("iters", 30)))
        cfg = {"size_bytes": row["size_bytes"]}
        out.append(_result("copy_bytes_per_s", row["copy_bytes_per_s"], "B/s", cfg, row["copy_timing"]))
        out.append(_result("read_bytes_per_s", row["read_bytes_per_s"], "B/s", cfg, row["read_timing"]))
    return {"results": out}


def _pinned(p: dict[str, Any], dev: torch.device) -> Outcome:
    row = pinned_copy(int(p["size_bytes"]), dev)
    cfg = {"size_bytes": int(p["size_bytes"])}
    return {"results": [_result("h2d_bytes_per_s", row["h2d_bytes_per_s"], "B/s", cfg, row["h2d_timing"]),
                        _result("d2h_bytes_per_s", row["d2h_bytes_per_s"], "B/s", cfg, row["d2h_timing"])]}


def _launch(p: dict[str, Any], dev: torch.device) -> Outcome:
    from gpumatch.bench.micro import launch_case

    row = launch_case(dev)
    out = [_result("launch_eager_s", row["eager_op_s"], "s", {"op": "add_"}, row["eager_op_timing"])]
    if "graph_kernel_s" in row:
        per_kernel = {"raw_s": [t / row["graph_kernels"] for t in row["graph_many_timing"]["raw_s"]]}
        out.append(_result("launch_graph_kernel_s", row["graph_kernel_s"], "s",
                           {"kernels_in_graph": row["graph_kernels"]}, per_kernel,
                           graph_replay_p50_s=row["graph_many_timing"]["median_s"]))
    return {"results": out}


def _model(p: dict[str, Any], dev: torch.device) -> Any:
    """The case's bf16 model: random (seeded) weights, or ``p["weights"]`` (a checked local folder, its tensor ->
    file map in ``p["files"]``) loaded into it."""
    from gpumatch.bench.llama import build_model

    torch.manual_seed(int(p.get("seed", 0)))
    model = build_model(p["model"], dev, torch.bfloat16, init=not p.get("weights"))
    if p.get("weights"):
        from gpumatch.bench.weights import load_weights

        load_weights(model, p["weights"], p["files"])
    model.eval()
    return model


def _decode(p: dict[str, Any], dev: torch.device) -> Outcome:
    """Decode steps at ``batch`` (or each of ``batches``, one model for all; the ``fused`` and ``whole`` variants
    compile once per batch) and ``context`` with decode ``attention`` (default ``auto``); a batch that runs out of
    memory is a failed part (class ``oom``) and the next batch runs."""
    from gpumatch.bench.decode import compiled_for, free
    from gpumatch.bench.llama import set_decode_attention

    variant = p["variant"]
    if variant.endswith("graph") and dev.type != "cuda":
        raise Unsupported("CUDA graphs need a CUDA device")
    model = _model(p, dev)
    set_decode_attention(model, str(p.get("attention", "auto")))
    compiled = compiled_for(variant)
    batches = [int(b) for b in p.get("batches", [p.get("batch")])]
    out: Outcome = {"results": [], "failures": []}
    for batch in batches:
        cfg = {"model": model.s.name, "batch": batch, "context": int(p["context"]), "variant": variant}
        try:
            got = _decode_one(model, batch, int(p["context"]), variant, compiled, int(p.get("iters", 100)), cfg,
                              float(p.get("power_window_s", 0.0)))
        except Exception as e:
            if len(batches) == 1 or not _is_oom(e):
                raise
            got = {"failures": [{"config": cfg, "error_class": "oom", "message": f"{type(e).__name__}: {e}"[:500]}]}
        free(dev)
        out["results"] += got.get("results", [])
        out["failures"] += got.get("failures", [])
    return out


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.cuda.OutOfMemoryError | MemoryError) or "can't allocate memory" in str(e)


def _decode_one(model: Any, batch: int, ctx: int, variant: str, compiled: Any, iters: int,
                cfg: dict[str, Any], power_window_s: float = 0.0) -> Outcome:
    from gpumatch.bench.decode import decode_case, make_caches

    caches = make_caches(model, batch, ctx)
    row = decode_case(model, batch, ctx, [variant], iters=iters, compiled=compiled, caches=caches,
                      power_window_s=power_window_s)[0]
    if row["status"] != "ok":
        return {"failures": [{"config": cfg, "error_class": "error", "message": row["error"]}]}
    parts = decode_bytes(model, batch, ctx)
    step = row["timing"]["median_s"]
    extra = {"bytes_per_step": parts["total_bytes"], "bytes_parts": parts, "setup_s": row.get("setup_s"),
             "attention": model.layers[0].attn.decode_attention, **_power(row)}
    return {"results": [
        _result("decode_step_s", step, "s", cfg, row["timing"], **extra),
        _result("decode_tokens_per_s", batch / step, "token/s", cfg),
    ]}


def decode_bytes(model: Any, batch: int, ctx: int) -> dict[str, int]:
    """:func:`gpumatch.bench.work.decode_bytes` of ``model``'s shape in its parameters' element size."""
    from gpumatch.bench.work import decode_bytes as count

    return count(model.s, batch, ctx, model.embed.weight.element_size())


def decode_bytes_per_step(model: Any, batch: int, ctx: int) -> int:
    """:func:`decode_bytes`' total."""
    return decode_bytes(model, batch, ctx)["total_bytes"]


def _prefill(p: dict[str, Any], dev: torch.device) -> Outcome:
    from gpumatch.bench.decode import prefill_case

    model = _model(p, dev)
    row = prefill_case(model, int(p["batch"]), int(p["seq"]), iters=int(p.get("iters", 10)),
                       power_window_s=float(p.get("power_window_s", 0.0)))
    if row["status"] == "oom":
        raise MemoryError(row.get("error", "out of memory"))
    cfg = {"model": model.s.name, "batch": int(p["batch"]), "seq": int(p["seq"])}
    flops = prefill_flops(model.s, int(p["batch"]), int(p["seq"]))
    return {"results": [_result("prefill_s", row["timing"]["median_s"], "s", cfg, row["timing"], **_power(row),
                                flops_per_step=flops),
                        _result("prefill_tokens_per_s", row["tokens_per_s"], "token/s", cfg)]}


def _train(p: dict[str, Any], dev: torch.device) -> Outcome:
    from gpumatch.bench.train import train_case

    torch.manual_seed(int(p.get("seed", 0)))
    row = train_case(p["model"], int(p["batch"]), int(p["seq"]), p["recompute"], p["master"], dev,
                     iters=int(p.get("iters", 10)), max_s=float(p.get("max_s", 10.0)),
                     power_window_s=float(p.get("power_window_s", 0.0)))
    if row["status"] == "oom":
        raise MemoryError(row.get("error", "out of memory"))
    cfg = {"model": row["model"], "batch": row["batch"], "seq": row["seq"], "recompute": row["recompute"],
           "master": row["master"]}
    step = row["timing"]["median_s"]
    out = [_result("train_step_s", step, "s", cfg, row["timing"], params=row["params"],
                   flops_per_step=train_flops(p["model"], row["batch"], row["seq"]),
                   first_step_s=row.get("first_step_s"), warmup_steps=1, **_power(row)),
           _result("train_tokens_per_s", row["tokens_per_s"], "token/s", cfg)]
    if "max_memory_reserved_bytes" in row:
        out.append(_result("train_peak_memory_bytes", row["max_memory_reserved_bytes"], "B", cfg))
    return {"results": out}


def _temperature() -> float | None:
    """The GPU's temperature (°C) through torch (pynvml under it), or None where it cannot be read."""
    try:
        return float(torch.cuda.temperature())
    except Exception:  # no NVML, no GPU, an old torch: the soak then warms up for its fixed minimum
        return None


def _soak(p: dict[str, Any], dev: torch.device) -> Outcome:
    """A sustained GEMM loop: warm up until the temperature is steady (or ``max_warmup_s``), then run
    ``duration_s``; each ~``chunk_s`` chunk is one flop/s sample. Warm-up samples are reported apart."""
    m = int(p["size"])
    a = torch.randn(m, m, device=dev, dtype=torch.bfloat16 if dev.type == "cuda" else torch.float32)
    flops = 2.0 * m**3
    t0 = time.monotonic()
    times: list[float] = []
    temps: list[float] = []
    warm: list[float] = []
    steady: list[float] = []
    warmup_s: float | None = None
    while True:
        now = time.monotonic() - t0
        if warmup_s is None and (now >= float(p["max_warmup_s"]) or (
                now >= float(p["min_warmup_s"]) and thermal_steady(times, temps))):
            warmup_s = now
        if warmup_s is not None and now - warmup_s >= float(p["duration_s"]):
            break
        rate = _soak_chunk(a, flops, dev, float(p.get("chunk_s", 1.0)))
        (warm if warmup_s is None else steady).append(rate)
        temp = _temperature()
        if temp is not None:
            times.append(time.monotonic() - t0)
            temps.append(temp)
    cfg = {"size": m, "duration_s": float(p["duration_s"])}
    extra: dict[str, Any] = {"warmup_samples": len(warm), "warmup_flops_per_s": warm, "temps_c": temps[-120:],
             "steady_detected": bool(times) and thermal_steady(times, temps)}
    out = [_result("soak_warmup_s", warmup_s or 0.0, "s", cfg, **extra)]
    if steady:
        row = _result("soak_flops_per_s", median(steady), "flop/s", cfg,
                      raw_flops_per_s=steady, first_flops_per_s=warm[0] if warm else None)
        row["extra"].update(reported_percentiles(steady, "_flops_per_s"))
        out.append(row)
    return {"results": out}


def _soak_chunk(a: torch.Tensor, flops: float, dev: torch.device, chunk_s: float) -> float:
    start, done = time.perf_counter(), 0
    while time.perf_counter() - start < chunk_s:
        for _ in range(4):
            torch.mm(a, a)
        done += 4
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
    return done * flops / (time.perf_counter() - start)


def _kernelpath(p: dict[str, Any], dev: torch.device) -> Outcome:
    """The workload's own GEMMs at its precision against aligned shapes (:mod:`gpumatch.bench.kernelpath`): per
    GEMM its flop/s and its ratio to the aligned shape; flagged ones carry their reasons."""
    from gpumatch.bench import kernelpath

    rows = kernelpath.kernel_path_suite(p["model"], p["precision"], int(p["tokens"]), dev,
                                        iters=int(p.get("iters", 10)))
    out, failures = [], []
    for r in rows:
        cfg = {"gemm": r["name"], "m": r["m"], "n": r["n"], "k": r["k"], "precision": p["precision"],
               "tokens": int(p["tokens"])}
        if r.get("status") != "ok":
            failures.append({"config": cfg, "error_class": str(r.get("status", "error")),
                             "message": "; ".join(r.get("reasons", [])) or str(r.get("error", ""))})
            continue
        why = {"flagged": bool(r["flagged"]), "reasons": list(r["reasons"]), "ran_precision": r["ran_precision"],
               "tensor_path": r.get("tensor_path"), "kernels": r.get("kernels")}
        out.append(_result("kernel_path_flops_per_s", r["tflops_per_s"] * 1e12, "flop/s", cfg, r["timing"], **why))
        out.append(_result("kernel_path_ratio", r["ratio_to_aligned"], "1", cfg, **why))
    return {"results": out, "failures": failures}


def _convergence(p: dict[str, Any], dev: torch.device) -> Outcome:
    """Loss curves per variant on a learnable Markov source (:mod:`gpumatch.bench.convergence`): the loss reached,
    the time to the common loss and the source's entropy (the floor), per variant."""
    from gpumatch.bench import convergence

    source = convergence.MarkovSource(states=int(p.get("states", 64)))
    kw = {k: p[k] for k in ("steps", "batch", "seq", "lr") if k in p}
    rows, comparison = convergence.convergence_suite(p["model"], dev, variants=[tuple(v) for v in p["variants"]],
                                                     source=source, **kw)
    out, failures = [], []
    by_variant = {(v["precision"], v["recompute"]): v for v in comparison.get("variants", [])}
    for r in rows:
        cfg = {"precision": r["precision"], "recompute": r["recompute"], "steps": r.get("steps")}
        if r.get("status") != "ok":
            failures.append({"config": cfg, "error_class": str(r.get("status")), "message": str(r.get("reason", ""))})
            continue
        cmp = by_variant.get((r["precision"], r["recompute"]), {})
        extra = {"entropy_nats": r["entropy_nats"], "curve": r["curve"], "time_to_common_loss_s":
                 cmp.get("time_to_common_loss_s"), "loss_at_common_time": cmp.get("loss_at_common_time")}
        out.append(_result("convergence_final_loss", r["final_loss"], "nat", cfg, **extra))
        out.append(_result("convergence_tokens_per_s", r["tokens_per_s"], "token/s", cfg))
    return {"results": out, "failures": failures}


def _quality(p: dict[str, Any], dev: torch.device) -> Outcome:
    """Perplexity, top-1 agreement with bf16, KL(bf16 || variant) and the tokens scored, per weight-only variant
    on the user's text (:mod:`gpumatch.bench.quality`); a variant whose perplexity is not finite is a failure."""
    from gpumatch.bench.quality import AGREE_FORMULA, KL_FORMULA, PPL_FORMULA, quality_case

    got = quality_case(p, dev)
    fp8_gemm = dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= (8, 9)
    common = {"method": "simulated weight-only: quantize then dequantize each block Linear weight to bf16, "
                        "bf16 GEMMs; embedding, norms and LM head as stored",
              "device_fp8_gemm": fp8_gemm, "fp8_cast_on": dev.type, "kl_skipped": got["kl_skipped"]}
    out, failures = [], []
    for r in got["rows"]:
        cfg = {"model": p["model"].get("name"), "variant": r["variant"], "window": int(p["window"]),
               "stride": int(p["stride"]), "tokens": r["tokens"]}
        extra = {**common, "windows": r["windows"], "nll_mean_nat": r["nll_mean_nat"],
                 "quantized_tensors": r["quantized_tensors"], "weight_rel_error": r["weight_rel_error"]}
        if not math.isfinite(r["perplexity"]):
            failures.append({"config": cfg, "error_class": "error",
                             "message": f"perplexity not finite (mean NLL {r['nll_mean_nat']} nat)"})
            continue
        out.append(_result("quality_perplexity", r["perplexity"], "1", cfg, formula=PPL_FORMULA, **extra))
        out.append(_result("quality_top1_agreement", r["top1_agreement"], "1", cfg, formula=AGREE_FORMULA))
        if r["kl_nat"] is not None:
            out.append(_result("quality_kl_nat", r["kl_nat"], "nat", cfg, formula=KL_FORMULA))
        out.append(_result("quality_tokens", r["tokens"], "token", cfg, windows=r["windows"]))
    return {"results": out, "failures": failures}


def _fault(p: dict[str, Any], dev: torch.device) -> Outcome:
    """Fail on purpose (tests): ``memory`` raises MemoryError, ``kill`` SIGKILLs this process, ``hang`` sleeps
    past any timeout, ``raise`` raises RuntimeError, ``skip`` is unsupported."""
    mode = p["mode"]
    print(f"fault case: {mode}", flush=True)
    if mode == "memory":
        raise MemoryError("the batch does not fit (fault case)")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(3600)
    if mode == "skip":
        raise Unsupported("this case is skipped on purpose (fault case)")
    raise RuntimeError(f"fault case {mode!r}")


KINDS: dict[str, Callable[[dict[str, Any], torch.device], Outcome]] = {
    "gemm": _gemm, "copy": _copy, "pinned": _pinned, "launch": _launch, "decode": _decode,
    "prefill": _prefill, "train": _train, "soak": _soak, "kernelpath": _kernelpath, "convergence": _convergence,
    "quality": _quality, "fault": _fault,
}


def run_case(case: dict[str, Any]) -> Outcome:
    """Run one case dict (module docstring); an unsupported case comes back ``skipped`` with its reason."""
    dev = _device()
    try:
        outcome = KINDS[case["kind"]](dict(case.get("params", {})), dev)
    except Unsupported as e:
        return {"status": "skipped", "reason": str(e), "results": [], "failures": []}
    return {"status": "ok", "results": outcome.get("results", []), "failures": outcome.get("failures", [])}
