"""Drive one device run: microbenchmarks, 8B decode ladder, 8B prefill, 1B/3B training steps, LoRA/QLoRA steps.

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/run_suite.py --out $OUT``
Usage (CPU smoke test, tiny shapes): ``python benchmarks/gpu/run_suite.py --out /tmp/x --tiny``

Writes one JSON per group (micro.json, decode.json, prefill.json, train.json) as soon as the group ends,
each with the environment, the plan, and one dict per case (raw timings included); prints a compact
summary table last. Each group has a time budget; cases past it are recorded as 'skipped'.
Imports only gpumatch.bench (the device has no pydantic).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from gpumatch.bench import shapes
from gpumatch.bench.decode import (
    check_compiled,
    compile_stats,
    compiled_layer_fn,
    decode_case,
    free,
    make_caches,
    prefill_case,
)
from gpumatch.bench.env import environment
from gpumatch.bench.llama import build_model
from gpumatch.bench.micro import micro_suite
from gpumatch.bench.timing import device_of
from gpumatch.bench.train import train_case

SCHEMA = "gpumatch.bench/1"


def _heldout_plan() -> dict[str, Any]:
    """Second run (2026-12-02): shapes, contexts and batches the first run did not have, for held-out checks."""
    m1, m3 = shapes.LLAMA_3_2_1B, shapes.LLAMA_3_2_3B
    return {
        "decode_models": [shapes.LLAMA_3_2_3B, shapes.LLAMA_3_8B],
        "batches": [1, 3, 12, 48, 96], "contexts": [1024, 4096, 16384],
        "decode_variants": ["graph", "compiled-graph"], "eager_contexts": [],
        "prefill": [(1, 1024), (1, 4096), (2, 4096), (8, 1024), (3, 3000)],
        "prefill_models": [shapes.LLAMA_3_8B, shapes.LLAMA_3_2_3B],
        "gemms": [(m, n, k) for m in (1, 16, 64, 256, 1024, 4096) for (n, k) in ((5120, 3072), (3072, 8192))],
        "copies": [2**22, 2**26, 2**30], "train": [
            (m1, 2, 1024, "none", "fp32"), (m1, 16, 512, "none", "fp32"), (m1, 3, 3072, "none", "fp32"),
            (m1, 1, 8192, "full", "fp32"), (m1, 8, 1024, "full", "none"), (m1, 1, 2048, "none", "none"),
            (m3, 2, 1024, "none", "fp32"), (m3, 1, 2048, "none", "fp32"), (m3, 8, 1024, "full", "fp32"),
            (m3, 2, 4096, "full", "none"), (m3, 4, 1024, "none", "none"), (m3, 1, 8192, "full", "fp32"),
        ],
        "budgets_s": {"micro": 30, "decode": 150, "prefill": 40, "train": 110},
    }


def _heldout3_plan() -> dict[str, Any]:
    """Third run (2026-12-03): other models' shapes (Qwen2.5 0.5B-14B, Mistral-7B; few KV heads, 152k vocab),
    odd batches and contexts, on a fresh machine; nothing of it is used to fit anything."""
    q05, q15, q7, q14, m7 = (shapes.QWEN2_5_0_5B, shapes.QWEN2_5_1_5B, shapes.QWEN2_5_7B, shapes.QWEN2_5_14B,
                             shapes.MISTRAL_7B)
    return {
        "decode_models": [q7, q14], "batches": [1, 5, 24, 64], "contexts": [768, 6000],
        "decode_variants": ["graph", "compiled-graph"], "eager_contexts": [],
        "prefill": [(1, 768), (1, 6000), (4, 1536), (12, 512)],
        "prefill_models": [q7, m7, q14],
        "gemms": [(m, n, k) for m in (1, 64, 2048) for (n, k) in ((4608, 3584), (3584, 18944))],
        "copies": [2**26, 2**30], "train": [
            (q15, 4, 1024, "none", "fp32"), (q15, 2, 4096, "full", "fp32"), (q15, 8, 2048, "full", "none"),
            (q15, 16, 512, "none", "none"), (q05, 8, 2048, "none", "fp32"), (q05, 4, 4096, "full", "none"),
            (q05, 2, 1024, "none", "none"), (q15, 1, 8192, "none", "fp32"),
        ],
        "budgets_s": {"micro": 30, "decode": 200, "prefill": 60, "train": 150},
    }


def _heldout4_plan() -> dict[str, Any]:
    """Fourth run (2026-12-04): long context, 12k-32k tokens of prefill and decode at 16k-32k, on the 8B, the
    Qwen2.5-7B and the 3B shapes; predictions frozen in a commit before it ran (nothing of it is fitted on)."""
    m8, q7, m3 = shapes.LLAMA_3_8B, shapes.QWEN2_5_7B, shapes.LLAMA_3_2_3B
    return {
        "decode_models": [m8], "batches": [1, 8, 16], "contexts": [16384, 32768],
        "decode_variants": ["graph", "compiled-graph"], "eager_contexts": [],
        "prefill": [(1, 12288), (1, 16384), (1, 24576), (1, 32768), (2, 16384)],
        "prefill_models": [m8, q7, m3],
        "gemms": [(m, 4096, 4096) for m in (1, 4096)], "copies": [2**30], "train": [],
        "budgets_s": {"micro": 20, "decode": 200, "prefill": 150, "train": 0},
    }


def _heldout5_plan() -> dict[str, Any]:
    """Fifth run (2026-12-04): 7B-14B-class training on one H200 (bf16 master-less and AMP fp32 master, with and
    without full recompute), the sizes the earlier runs never trained; predictions frozen before it ran."""
    m8, q7, q14 = shapes.LLAMA_3_8B, shapes.QWEN2_5_7B, shapes.QWEN2_5_14B
    return {
        "decode_models": [], "batches": [], "contexts": [], "decode_variants": [], "eager_contexts": [],
        "prefill": [], "prefill_models": [], "gemms": [(4096, 4096, 4096)], "copies": [2**30],
        "train": [
            (m8, 1, 2048, "none", "none"), (m8, 2, 4096, "full", "none"), (m8, 4, 2048, "full", "none"),
            (q7, 1, 4096, "none", "none"), (q7, 2, 2048, "full", "none"), (m8, 1, 1024, "none", "fp32"),
            (m8, 1, 2048, "full", "fp32"), (q14, 1, 2048, "full", "none"),
        ],
        "budgets_s": {"micro": 20, "decode": 0, "prefill": 0, "train": 400},
    }


def _heldout6_plan() -> dict[str, Any]:
    """Sixth run: LoRA and QLoRA fine-tuning (bench/lora.py: frozen bf16 or NF4 base, fp32 adapters on all seven
    projections) on the Llama-3-8B and Qwen2.5-14B shapes, with and without full recompute, ranks 16 and 64;
    every case chosen to fit and to run in seconds; predictions frozen before it runs."""
    m8, q14 = shapes.LLAMA_3_8B, shapes.QWEN2_5_14B
    return {
        "decode_models": [], "batches": [], "contexts": [], "decode_variants": [], "eager_contexts": [],
        "prefill": [], "prefill_models": [], "gemms": [(4096, 4096, 4096)], "copies": [2**30], "train": [],
        "adapters": [
            (m8, 4, 2048, "none", "lora", 16), (m8, 4, 2048, "full", "lora", 16),
            (m8, 4, 2048, "none", "qlora", 16), (m8, 4, 2048, "full", "qlora", 16),
            (m8, 1, 4096, "none", "lora", 64), (m8, 8, 2048, "full", "qlora", 64),
            (q14, 2, 2048, "full", "lora", 64), (q14, 2, 2048, "full", "qlora", 64),
        ],
        "budgets_s": {"micro": 20, "decode": 0, "prefill": 0, "train": 200},
    }


PLANS = {"heldout": _heldout_plan, "heldout3": _heldout3_plan, "heldout4": _heldout4_plan,
         "heldout5": _heldout5_plan, "heldout6": _heldout6_plan}


def _plan(tiny: bool, name: str = "main") -> dict[str, Any]:
    if name in PLANS:
        return PLANS[name]()
    if tiny:
        small = shapes.tiny_shape()
        return {
            "decode_model": small, "decode_models": [small, shapes.tiny_shape(layers=1)],
            "prefill_models": [small, shapes.tiny_shape(layers=1)], "batches": [1, 2], "contexts": [16, 64],
            "decode_variants": ["compiled"], "eager_contexts": [16, 64],
            "prefill": [(1, 16), (2, 32)], "gemms": [(64, 64, 64), (8, 128, 64)], "copies": [2**16, 2**20],
            "train": [(small, 2, 32, "none", "fp32"), (small, 2, 32, "full", "none")],
            "adapters": [(small, 2, 32, "none", "lora", 4), (small, 2, 32, "full", "qlora", 4)],
            "budgets_s": {"micro": 60, "decode": 120, "prefill": 60, "train": 120},
        }
    m1, m3 = shapes.LLAMA_3_2_1B, shapes.LLAMA_3_2_3B
    train = [
        *((m1, b, s, "none", "fp32") for b, s in
          ((1, 1024), (4, 1024), (8, 1024), (1, 2048), (2, 2048), (4, 2048), (1, 4096), (2, 4096), (4, 4096))),
        (m1, 4, 1024, "full", "fp32"), (m1, 8, 2048, "full", "fp32"), (m1, 2, 4096, "full", "fp32"),
        (m1, 4, 1024, "none", "none"), (m1, 2, 4096, "none", "none"), (m1, 4, 2048, "full", "none"),
        *((m3, b, s, "none", "fp32") for b, s in ((1, 1024), (2, 2048), (4, 2048), (1, 4096), (2, 4096))),
        (m3, 4, 2048, "full", "fp32"), (m3, 4, 4096, "full", "fp32"),
        (m3, 2, 2048, "none", "none"), (m3, 1, 4096, "none", "none"), (m3, 4, 4096, "full", "none"),
        (m1, 8, 4096, "none", "fp32"), (m3, 8, 4096, "full", "fp32"),
    ]
    return {
        "decode_model": shapes.LLAMA_3_8B, "batches": [1, 2, 4, 8, 16, 32, 64, 128], "contexts": [512, 2048, 8192],
        "decode_variants": ["graph", "compiled-graph"], "eager_contexts": [2048],
        "prefill": [(1, 512), (1, 2048), (1, 8192), (4, 512), (16, 512), (4, 2048), (8, 2048), (2, 8192)],
        "gemms": None, "copies": None, "train": train,
        "budgets_s": {"micro": 45, "decode": 190, "prefill": 40, "train": 200},
    }


def _write(out: Path, group: str, env: dict[str, Any], plan: Any, rows: list[dict[str, Any]], t0: float) -> None:
    doc = {"schema": SCHEMA, "group": group, "environment": env, "plan": plan, "wall_s": time.time() - t0,
           "cases": rows}
    (out / f"{group}.json").write_text(json.dumps(doc, indent=1, default=str))


def run_micro(plan: dict[str, Any], dev: torch.device) -> list[dict[str, Any]]:
    kw: dict[str, Any] = {}
    if plan["gemms"] is not None:
        kw = {"gemms": plan["gemms"], "copies": plan["copies"]}
    return micro_suite(dev, **kw)


def run_decode(plan: dict[str, Any], dev: torch.device, budget_s: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for shape in plan.get("decode_models", [plan.get("decode_model")]):
        rows += _decode_model(plan, shape, dev, budget_s - (time.time() - t0))
    return rows


def _decode_model(plan: dict[str, Any], shape: dict[str, Any], dev: torch.device,
                  budget_s: float) -> list[dict[str, Any]]:
    t0 = time.time()
    model = build_model(shape, dev, torch.bfloat16)
    model.eval()
    compiled = compiled_layer_fn()
    rows: list[dict[str, Any]] = []
    try:
        check = check_compiled(model, compiled)
    except Exception as exc:  # recorded; the graph variant still runs
        check = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    rows.append({"kind": "decode-check", "status": "ok" if "error" not in check else "error", **check})
    print("  compiled check", check, flush=True)
    free(dev)
    kv_per_token = model.s.kv_bytes_per_token_bf16
    for ctx in plan["contexts"]:
        for batch in plan["batches"]:
            variants = list(plan["decode_variants"])
            if ctx in plan["eager_contexts"]:
                variants = ["eager", *variants]
            base = {"kind": "decode", "batch": batch, "context": ctx, "model": model.s.name}
            if time.time() - t0 > budget_s:
                rows += [{**base, "variant": v, "status": "skipped", "error": "group time budget spent"}
                         for v in variants]
                continue
            need = kv_per_token * batch * ctx
            if dev.type == "cuda":
                free_b, _ = torch.cuda.mem_get_info(dev)
                if need > free_b - 6 * 2**30:
                    rows += [{**base, "variant": v, "status": "skipped", "kv_cache_bytes": need,
                              "error": f"KV cache {need / 2**30:.1f} GiB exceeds free memory"} for v in variants]
                    continue
                torch.cuda.reset_peak_memory_stats(dev)
            caches = make_caches(model, batch, ctx)
            for row in decode_case(model, batch, ctx, variants, compiled=compiled, caches=caches):
                row.update(model=model.s.name, kv_cache_bytes=need)
                if dev.type == "cuda":
                    row["max_memory_allocated_bytes"] = int(torch.cuda.max_memory_allocated(dev))
                rows.append(row)
                _progress(row)
            del caches
            free(dev)
    rows.append({"kind": "decode-compile-stats", "status": "ok", **compile_stats()})
    del model
    free(dev)
    return rows


def run_prefill(plan: dict[str, Any], dev: torch.device, budget_s: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for shape in plan.get("prefill_models", [plan.get("decode_model")]):
        rows += _prefill_model(plan, shape, dev, budget_s - (time.time() - t0))
    return rows


def _prefill_model(plan: dict[str, Any], shape: dict[str, Any], dev: torch.device,
                   budget_s: float) -> list[dict[str, Any]]:
    t0 = time.time()
    model = build_model(shape, dev, torch.bfloat16)
    model.eval()
    rows = []
    for batch, seq in plan["prefill"]:
        if time.time() - t0 > budget_s:
            rows.append({"kind": "prefill", "batch": batch, "seq": seq, "status": "skipped", "model": model.s.name})
            continue
        row = prefill_case(model, batch, seq)
        row["model"] = model.s.name
        rows.append(row)
        _progress(row)
        free(dev)
    del model
    free(dev)
    return rows


def run_train(plan: dict[str, Any], dev: torch.device, budget_s: float) -> list[dict[str, Any]]:
    """The plan's full training cases, then its LoRA/QLoRA cases (``adapters``: shape, batch, seq, recompute,
    variant, rank; a bf16 base, so master 'none')."""
    t0 = time.time()
    cases = [(*case, "full", 0) for case in plan["train"]]
    cases += [(shape, b, s, rc, "none", variant, rank) for shape, b, s, rc, variant, rank in plan.get("adapters", [])]
    rows = []
    for shape, batch, seq, recompute, master, variant, rank in cases:
        if time.time() - t0 > budget_s:
            rows.append({"kind": "train", "model": shape["name"], "batch": batch, "seq": seq,
                         "recompute": recompute, "master": master, "variant": variant, "status": "skipped",
                         **({"lora_rank": rank} if rank else {})})
            continue
        row = train_case(shape, batch, seq, recompute, master, dev, max_s=6.0, variant=variant, lora_rank=rank)
        rows.append(row)
        _progress(row)
    return rows


def _progress(row: dict[str, Any]) -> None:
    med = row.get("timing", {}).get("median_s")
    keys = {k: row[k] for k in ("kind", "model", "batch", "context", "seq", "variant", "lora_rank", "recompute",
                                "master") if k in row}
    print(f"  {keys} {row.get('status')} median_ms={None if med is None else round(med * 1e3, 3)}",
          row.get("error", ""), flush=True)


def summary(results: dict[str, list[dict[str, Any]]]) -> str:
    lines = []
    for r in results.get("micro", []):
        if r["kind"] == "gemm" and r["m"] == r["n"] == r["k"]:
            lines.append(f"gemm {r['m']}^3 {r['tflops_per_s']:.0f} TFLOP/s")
        elif r["kind"] == "memory":
            lines.append(f"mem {r['size_bytes'] >> 20} MiB copy {r['copy_bytes_per_s'] / 1e12:.2f} TB/s "
                         f"read {r['read_bytes_per_s'] / 1e12:.2f} TB/s")
        elif r["kind"] == "launch":
            lines.append(f"launch eager {r['eager_op_s'] * 1e6:.1f} us graph/kernel "
                         f"{r.get('graph_kernel_s', float('nan')) * 1e6:.2f} us")
    dec: dict[tuple[int, int], dict[str, str]] = {}
    variants: list[str] = []
    for r in results.get("decode", []):
        if "variant" not in r:
            lines.append(f"{r['kind']}: {({k: v for k, v in r.items() if k != 'kind'})}"[:300])
            continue
        v = r["variant"]
        if v not in variants:
            variants.append(v)
        med = r.get("timing", {}).get("median_s")
        cell = f"{med * 1e3:.2f}" if med else r["status"][:4]
        dec.setdefault((r.get("model", ""), r["context"], r["batch"]), {})[v] = cell
    if dec:
        lines.append("decode ms: ctx batch " + " ".join(variants))
        lines += [f"  {n} {c} {b} " + " ".join(d.get(v, "-") for v in variants) for (n, c, b), d in dec.items()]
    for r in results.get("prefill", []):
        med = r.get("timing", {}).get("median_s")
        took = f"{med * 1e3:.1f} ms" if med else r["status"]
        lines.append(f"prefill {r.get('model')} b{r['batch']} s{r['seq']} {took}")
    for r in results.get("train", []):
        med = r.get("timing", {}).get("median_s")
        mem = r.get("max_memory_allocated_bytes", 0) / 2**30
        how = f"m={r['master']}" if r.get("variant", "full") == "full" else f"{r['variant']} r={r['lora_rank']}"
        lines.append(f"train {r['model']} b{r['batch']} s{r['seq']} rc={r['recompute']} {how} "
                     + (f"{med * 1e3:.0f} ms {mem:.1f} GiB" if med else r["status"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (CPU smoke test)")
    ap.add_argument("--groups", default="micro,decode,prefill,train")
    ap.add_argument("--device", default=None)
    ap.add_argument("--plan", default="main", choices=["main", *PLANS])
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    dev = device_of(args.device)
    plan = _plan(args.tiny, args.plan)
    env = environment()
    print(json.dumps({k: env.get(k) for k in ("gpu_name", "torch", "torch_cuda", "nvidia_smi")}), flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    runners = {"micro": lambda: run_micro(plan, dev),
               "decode": lambda: run_decode(plan, dev, plan["budgets_s"]["decode"]),
               "prefill": lambda: run_prefill(plan, dev, plan["budgets_s"]["prefill"]),
               "train": lambda: run_train(plan, dev, plan["budgets_s"]["train"])}
    for group in args.groups.split(","):
        t0 = time.time()
        print(f"== {group}", flush=True)
        try:
            results[group] = runners[group]()
        except Exception as exc:  # keep the other groups' results
            results[group] = [{"kind": group, "status": "error", "error": f"{type(exc).__name__}: {exc}"}]
            print(f"group {group} failed: {exc!r}", flush=True)
        _write(args.out, group, env, plan, results[group], t0)
        print(f"== {group} done in {time.time() - t0:.1f} s", flush=True)
    print(summary(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
