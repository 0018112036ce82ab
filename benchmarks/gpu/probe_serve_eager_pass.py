"""Probe: is an eager pass of ``gpumatch serve`` (a prefill or mixed pass: no CUDA graph) bound by its host dispatch?

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/probe_serve_eager_pass.py --out $OUT/eager-pass.json``.

The server's runner (:class:`gpumatch.bench.server.runner.Runner`, Llama-3.1-8B shape, bf16, random weights,
compiled stretches as ``gpumatch serve --compile``, 64 slots x 2048 tokens) runs passes of ``rows`` decode rows and
``chunks`` prompt chunks of 768 tokens each, three ways (median of ``--reps`` after ``--warmup`` passes of the same
shape, which also compile any new shape):

- ``wall_s``: the pass as the server runs it (``Runner.sample``: inputs built, forward, the sampled ids back);
- ``host_s``: the time to enqueue the forward (``Runner._forward``) while the GPU is still busy with a sleep kernel
  queued ahead, so enqueueing never waits for the GPU: the CPU's dispatch time alone;
- ``gpu_s``: CUDA events around the same forward, recorded behind the sleep: the kernels back to back, no host gap.

A pass is host-bound when ``host_s`` exceeds ``gpu_s``; then ``wall_s`` follows ``host_s``. ``host_s`` is valid
only while the pass launches fewer kernels than CUDA's launch queue holds (about a thousand pending): beyond that
enqueueing waits for the sleep kernel and ``host_s`` reads about the sleep (~1 s; the H100 run of 2026-12-07 saw
this for every pass but a single 768-token prompt). Writes one JSON file, rewritten after every case.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from gpumatch.bench.llama import build_model
from gpumatch.bench.server.runner import Runner
from gpumatch.bench.server.scheduler import Chunk, Plan, Seq
from gpumatch.bench.shapes import LLAMA_3_8B, tiny_shape

CASES = ((0, 1), (16, 1), (48, 1), (0, 4), (16, 4), (48, 4), (0, 10), (48, 10))
"""(decode rows, prompt chunks of :data:`CHUNK` tokens) per case."""
CHUNK = 768
DECODE_CONTEXT = 1000
"""Keys each decode row holds (the context bucket is 1024)."""


def _plan(rows: int, chunks: int, chunk: int, context: int) -> Plan:
    decode = []
    for i in range(rows):
        s = Seq(i, [1] * context, 8)
        s.slot, s.computed, s.out = i, context, [1]
        decode.append(s)
    parts = []
    for j in range(chunks):
        s = Seq(rows + j, [1] * chunk, 8)
        s.slot = rows + j
        parts.append(Chunk(s, 0, chunk))
    return Plan(tuple(decode), tuple(parts))


def _case(runner: Runner, rows: int, chunks: int, chunk: int, context: int, warmup: int, reps: int,
          sleep_cycles: int) -> dict[str, Any]:
    plan = _plan(rows, chunks, chunk, context)
    span = runner._bucket(runner.batch_buckets, plan.decode_span) if plan.decode else 0
    ctx = runner._bucket(runner.context_buckets, max((s.kv_tokens + 1 for s in plan.decode), default=1))
    wall, host, gpu = [], [], []
    with torch.inference_mode():
        for i in range(warmup + reps):
            t0 = time.perf_counter()
            runner.sample(plan)
            w = time.perf_counter() - t0
            batch = runner._batch(plan, span, ctx)
            torch.cuda.synchronize()
            torch.cuda._sleep(sleep_cycles)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            t0 = time.perf_counter()
            runner._forward(batch)
            h = time.perf_counter() - t0
            e1.record()
            torch.cuda.synchronize()
            if i >= warmup:
                wall.append(w)
                host.append(h)
                gpu.append(e0.elapsed_time(e1) / 1e3)
    return {"decode_rows": rows, "span": span, "context": ctx, "chunks": chunks, "prompt_tokens": chunks * chunk,
            "wall_s": statistics.median(wall), "host_s": statistics.median(host), "gpu_s": statistics.median(gpu),
            "wall_all_s": wall, "host_all_s": host, "gpu_all_s": gpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tiny", action="store_true", help="a tiny model (a check of the probe itself)")
    args = ap.parse_args()
    dev = torch.device("cuda")
    shape = tiny_shape() if args.tiny else LLAMA_3_8B
    chunk, context = (24, 40) if args.tiny else (CHUNK, DECODE_CONTEXT)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    t_start = time.perf_counter()
    model = build_model(shape, dev, torch.bfloat16)
    runner = Runner(model, 64, 2048, use_graphs=False, compile=True)
    doc: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "gpu": smi,
                           "torch": torch.__version__, "shape": model.s.name, "compiled": runner.compile_error is None,
                           "compile_error": runner.compile_error, "chunk_tokens": chunk, "decode_context": context,
                           "cases": []}
    for rows, chunks in CASES:
        row = _case(runner, rows, chunks, chunk, context, args.warmup, args.reps, int(2e9))
        doc["cases"].append(row)
        doc["wall_s"] = time.perf_counter() - t_start
        args.out.write_text(json.dumps(doc, indent=1))
        print(f"rows {rows:3d} chunks {chunks:2d}: wall {row['wall_s'] * 1e3:7.1f} ms  host "
              f"{row['host_s'] * 1e3:7.1f} ms  gpu {row['gpu_s'] * 1e3:7.1f} ms", flush=True)


if __name__ == "__main__":
    main()
