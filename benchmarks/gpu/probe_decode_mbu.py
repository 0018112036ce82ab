"""Probe: decode MBU of the Llama-3-8B shape (bf16, random weights) per variant, attention kernel and shape, in
one call (issue 27 item 1: at least 80% MBU at batch 1 and 16, context 2048 and 8192). Writes one JSON file,
rewritten after every case so a call cut short still returns what it measured.

Run on the device: ``python benchmarks/gpu/probe_decode_mbu.py --out $OUT/decode-mbu.json``.

Parts: (1) the card, its clocks and power limit as found (nvidia-smi, read only); (2) the ceilings: a 4 GiB
device-to-device copy (bytes read + written) and the catalog's HBM figure; (3) per (batch, context) and variant
(``graph``: the eager step in a CUDA graph; ``compiled-graph``, the earlier best (dynamic per-layer compile);
``fused-graph`` with attention ``split`` / ``flex`` at batch 1, ``sdpa`` / ``flex`` at batch 16;
``whole-graph``, the gpt-fast-style whole-step compilation, at batch 1 only) the step time, its bytes
(:func:`gpumatch.bench.cases.decode_bytes`) and MBU against both ceilings, and the relative L2 error of its logits
against the eager step on the same caches; (4) a kernel-time table of one ``fused`` step at batch 1, context 2048.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import torch

from gpumatch.bench.cases import decode_bytes
from gpumatch.bench.decode import check_compiled, compiled_for, decode_case, free, make_caches
from gpumatch.bench.llama import build_model, decode_step, rope_tables, set_decode_attention
from gpumatch.bench.shapes import LLAMA_3_8B, tiny_shape
from gpumatch.bench.timing import time_fn

SHAPES: tuple[tuple[int, int], ...] = ((1, 2048), (1, 8192), (16, 2048), (16, 8192))
ATTENTION = {1: ("split", "flex"), 16: ("sdpa", "flex")}
"""Attention kernels tried per batch (``fused-graph``); any other batch runs the bench's ``auto`` rule only."""
CATALOG_HBM = {"H200": 4.8e12, "H100": 3.35e12}
"""Datasheet HBM bandwidth (B/s) of the SXM parts, as the catalog has them (catalog/data)."""


def smi() -> str:
    q = "name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active"
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"], capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"


def copy_bandwidth(dev: torch.device) -> float:
    """Bytes read + written per second of a 4 GiB device-to-device copy (median of 20)."""
    n = 4 << 30
    src = torch.empty(n, dtype=torch.uint8, device=dev).random_()
    dst = torch.empty_like(src)
    t = time_fn(lambda: dst.copy_(src), dev, warmup=3, iters=20)["median_s"]
    return float(2 * n / t)


def kernel_table(fn: Any, dev: torch.device, top: int = 24) -> list[dict[str, Any]]:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize(dev)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize(dev)
    rows = []
    for ev in prof.key_averages():
        us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if us:
            rows.append({"kernel": ev.key[:90], "us_per_step": us / 5, "calls_per_step": ev.count / 5})
    rows.sort(key=lambda r: -r["us_per_step"])
    return rows[:top]


def run_case(model: Any, batch: int, ctx: int, variant: str, attn: str, compiled: Any, ceil: dict[str, float],
             ) -> dict[str, Any]:
    set_decode_attention(model, attn)
    caches = make_caches(model, batch, ctx)
    row = decode_case(model, batch, ctx, [variant], compiled=compiled, caches=caches, iters=50)[0]
    del caches
    free(model.embed.weight.device)
    row["attention"] = attn
    by = decode_bytes(model, batch, ctx)
    row["bytes"] = by
    if row["status"] == "ok":
        step = row["timing"]["median_s"]
        row["achieved_bytes_per_s"] = by["total_bytes"] / step
        row["mbu_vs_copy"] = row["achieved_bytes_per_s"] / ceil["copy_bytes_per_s"]
        if ceil.get("catalog_hbm_bytes_per_s"):
            row["mbu_vs_catalog"] = row["achieved_bytes_per_s"] / ceil["catalog_hbm_bytes_per_s"]
        if variant not in ("graph", "eager"):
            torch.manual_seed(batch * 7 + ctx)
            row["check"] = check_compiled(model, compiled, batch, ctx, variant)
            free(model.embed.weight.device)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=400.0)
    ap.add_argument("--whole", action="store_true", help="also the whole-step compilation at batch 1")
    ap.add_argument("--cpu-smoke", action="store_true", help="a 2-layer model on the CPU (the script's code path)")
    ap.add_argument("--shapes", default="", help="batch x context pairs, e.g. 1x2048,16x2048 (default: all four)")
    args = ap.parse_args()
    global SHAPES
    if args.shapes:
        SHAPES = tuple((int(b), int(c)) for b, c in (p.split("x") for p in args.shapes.split(",")))
    dev = torch.device("cpu" if args.cpu_smoke else "cuda")
    shape = tiny_shape() if args.cpu_smoke else LLAMA_3_8B
    if args.cpu_smoke:
        SHAPES = ((1, 64), (16, 32))
    t0 = time.time()
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    hbm = next((v for k, v in CATALOG_HBM.items() if k in name), None)
    res: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "gpu": name,
                           "torch": torch.__version__, "shape": shape, "nvidia_smi_before": smi()}
    res["ceilings"] = {"copy_bytes_per_s": copy_bandwidth(dev) if dev.type == "cuda" else 1e10,
                       "catalog_hbm_bytes_per_s": hbm}
    free(dev)
    print(res["nvidia_smi_before"], "\n", res["ceilings"], flush=True)
    torch.manual_seed(0)
    model = build_model(shape, dev, torch.float32 if args.cpu_smoke else torch.bfloat16)
    model.eval()
    rows: list[dict[str, Any]] = []
    res["decode"] = rows

    def save() -> None:
        res["wall_s"] = time.time() - t0
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, default=str)

    plan: list[tuple[int, int, str, str]] = []
    for b, c in SHAPES:
        plan.append((b, c, "eager" if args.cpu_smoke else "graph", "auto"))
        plan.append((b, c, "compiled" if args.cpu_smoke else "compiled-graph", "auto"))
        plan += [(b, c, "fused" if args.cpu_smoke else "fused-graph", a) for a in ATTENTION.get(b, ("auto",))]
    if args.whole:
        plan.append((*SHAPES[0], "whole" if args.cpu_smoke else "whole-graph", "flex"))
    family = {"compiled": compiled_for("compiled"), "fused": compiled_for("fused"),
              "whole": compiled_for("whole") if args.whole else None}
    fused = family["fused"]
    for b, c, variant, attn in plan:
        if time.time() - t0 > args.budget_s:
            res.setdefault("skipped", []).append([b, c, variant, attn])
            continue
        compiled = family.get(variant.split("-")[0])
        try:
            row = run_case(model, b, c, variant, attn, compiled, res["ceilings"])
        except Exception as e:  # a failed case is a result too
            row = {"batch": b, "context": c, "variant": variant, "attention": attn, "status": "error",
                   "error": f"{type(e).__name__}: {str(e)[:400]}"}
            free(dev)
        rows.append(row)
        print(f"b{b:<3} c{c:<5} {variant:12} {attn:6} {row['status']:5} "
              f"{row.get('timing', {}).get('median_s', 0) * 1e3:7.3f} ms  mbu_copy {row.get('mbu_vs_copy', 0):.3f} "
              f"mbu_cat {row.get('mbu_vs_catalog') or 0:.3f} setup {row.get('setup_s', 0):5.1f} s "
              f"err {row.get('check', {}).get('compiled_vs_eager_rel_l2', '-')} {row.get('error', '')}", flush=True)
        save()
    if time.time() - t0 < args.budget_s and dev.type == "cuda":
        set_decode_attention(model, "split")
        caches = make_caches(model, 1, 2048)
        rope_all = rope_tables(model.s, 2048, dev, torch.bfloat16)
        tok = torch.randint(0, model.s.vocab, (1, 1), device=dev)
        pos = torch.tensor([2047], device=dev)
        layer_fn, head_fn = fused
        with torch.inference_mode():
            res["kernels_fused_split_b1_c2048"] = kernel_table(
                lambda: decode_step(model, tok, pos, rope_all, caches, layer_fn, head_fn), dev)
        for r in res["kernels_fused_split_b1_c2048"][:16]:
            print(f"  {r['us_per_step']:8.1f} us {r['calls_per_step']:5.0f}x {r['kernel']}")
    res["nvidia_smi_after"] = smi()
    save()
    print(res["nvidia_smi_after"])


if __name__ == "__main__":
    main()
