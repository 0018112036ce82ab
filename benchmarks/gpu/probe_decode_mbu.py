"""Probe: where batch-1 decode of the Llama-3-8B shape spends its time on one GPU, and what the split-KV
decode attention changes (issue 13's target: 80% MBU). Writes one JSON file.

Run on the device: ``python benchmarks/gpu/probe_decode_mbu.py --out $OUT/decode-mbu.json``.

Parts: (1) copy and read bandwidth (the MBU denominator); (2) each weight GEMV of one layer and the LM head
alone (x (1,K) · Wᵀ, bf16): its bytes / time; (3) the decode step for attention ``sdpa`` and ``split`` under
``graph`` and ``compiled-graph`` at (batch, context) (1, 2048), (1, 8192), (16, 2048); (4) a kernel-time
table of one eager and one compiled step (torch.profiler, CUDA time summed per kernel name).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

import torch
import torch.nn.functional as F

from gpumatch.bench.decode import compiled_layer_fn, decode_case, free, make_caches
from gpumatch.bench.llama import build_model, decode_step, rope_tables, set_decode_attention
from gpumatch.bench.shapes import LLAMA_3_8B, LlamaShape
from gpumatch.bench.timing import time_fn


def bandwidth(dev: torch.device) -> dict[str, float]:
    n = 4 << 30
    src = torch.empty(n, dtype=torch.uint8, device=dev).random_()
    dst = torch.empty_like(src)
    copy = time_fn(lambda: dst.copy_(src), dev, warmup=3, iters=20)["median_s"]
    x = src.view(torch.bfloat16)
    read = time_fn(lambda: x.sum(), dev, warmup=3, iters=20)["median_s"]
    return {"copy_bytes_per_s": 2 * n / copy, "read_bytes_per_s": n / read}


def gemv(dev: torch.device, s: LlamaShape) -> list[dict[str, Any]]:
    shapes = {"wqkv": ((s.heads + 2 * s.kv_heads) * s.head_dim, s.hidden), "wo": (s.hidden, s.heads * s.head_dim),
              "w13": (2 * s.ffn, s.hidden), "w2": (s.hidden, s.ffn), "lm_head": (s.vocab, s.hidden)}
    out = []
    for name, (n, k) in shapes.items():
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(4)]
        x = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
        i = [0]

        def fn(ws: list[torch.Tensor] = ws, x: torch.Tensor = x, i: list[int] = i) -> torch.Tensor:
            i[0] = (i[0] + 1) % len(ws)
            return F.linear(x, ws[i[0]])

        t = time_fn(fn, dev, warmup=5, iters=50)["median_s"]
        out.append({"name": name, "n": n, "k": k, "s": t, "bytes_per_s": 2 * n * k / t})
        del ws
    free(dev)
    return out


def kernel_table(fn: Any, dev: torch.device, top: int = 14) -> list[dict[str, Any]]:
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
        cuda_us = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if cuda_us:
            rows.append({"kernel": ev.key[:90], "us_per_step": cuda_us / 5, "calls_per_step": ev.count / 5})
    rows.sort(key=lambda r: -r["us_per_step"])
    return rows[:top]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    dev = torch.device("cuda")
    s = LlamaShape.from_dict(LLAMA_3_8B)
    t0 = time.time()
    result: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                              "gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                              "shape": LLAMA_3_8B}
    result["bandwidth"] = bandwidth(dev)
    free(dev)
    result["gemv"] = gemv(dev, s)
    model = build_model(LLAMA_3_8B, dev, torch.bfloat16)
    weight_bytes = 2 * sum(p.numel() for n, p in model.named_parameters() if not n.startswith("embed")
                           or s.tied) + 2 * s.hidden
    result["weight_bytes_read_per_step"] = weight_bytes
    compiled = compiled_layer_fn()
    rows = []
    for attn in ("split", "sdpa"):
        set_decode_attention(model, attn)
        for batch, ctx in ((1, 2048), (1, 8192), (16, 2048)):
            caches = make_caches(model, batch, ctx)
            for r in decode_case(model, batch, ctx, ("graph", "compiled-graph"), compiled=compiled, caches=caches,
                                 iters=50):
                kv = 2 * s.layers * s.kv_heads * s.head_dim * 2 * batch * ctx
                if r["status"] == "ok":
                    r["mbu_vs_copy"] = (weight_bytes + kv) / r["timing"]["median_s"] / \
                        result["bandwidth"]["copy_bytes_per_s"]
                r["attention"] = attn
                r.pop("timing_raw", None)
                rows.append(r)
                print(attn, batch, ctx, r.get("variant"), r.get("timing", {}).get("median_s"), r.get("mbu_vs_copy"),
                      flush=True)
            del caches
            free(dev)
    result["decode"] = rows
    tables = {}
    caches = make_caches(model, 1, 2048)
    rope_all = rope_tables(s, 2048, dev, torch.bfloat16)
    tok = torch.randint(0, s.vocab, (1, 1), device=dev)
    pos = torch.tensor([2047], device=dev)
    for attn in ("split", "sdpa"):
        set_decode_attention(model, attn)
        with torch.inference_mode():
            tables[f"eager-{attn}"] = kernel_table(lambda: decode_step(model, tok, pos, rope_all, caches), dev)
            tables[f"compiled-{attn}"] = kernel_table(
                lambda: decode_step(model, tok, pos, rope_all, caches, compiled), dev)
    result["kernels_b1_ctx2048"] = tables
    result["wall_s"] = time.time() - t0
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(json.dumps({"bandwidth": result["bandwidth"], "gemv": result["gemv"]}, indent=1))
    for k, v in tables.items():
        print(k)
        for r in v[:8]:
            print(f"  {r['us_per_step']:8.1f} us {r['calls_per_step']:5.0f}x {r['kernel']}")


if __name__ == "__main__":
    main()
