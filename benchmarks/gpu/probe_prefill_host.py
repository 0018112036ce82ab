"""Probe: is eager prefill host-bound? Host dispatch time vs device time of one prefill, per model and length.

Usage (device): ``PYTHONPATH=src python3 benchmarks/gpu/probe_prefill_host.py``. For each case it times
(a) the host: wall time to *enqueue* one prefill (no synchronize; the GPU is kept busy first with a long
sleep kernel so the queue never drains), and (b) the device: CUDA events around a prefill captured in a
CUDA graph (no host in the loop), and (c) the usual eager median with events. Prints one JSON line per case.
"""

from __future__ import annotations

import json
import time

import torch

from gpumatch.bench import shapes
from gpumatch.bench.decode import free
from gpumatch.bench.llama import build_model, rope_tables
from gpumatch.bench.timing import time_fn


def probe(shape: dict[str, object], seq: int, dev: torch.device) -> dict[str, object]:
    model = build_model(shape, dev, torch.bfloat16)
    rope = rope_tables(model.s, seq, dev, torch.bfloat16)
    tokens = torch.randint(0, model.s.vocab, (1, seq), device=dev)
    out: dict[str, object] = {"model": model.s.name, "seq": seq}
    with torch.inference_mode():
        eager = time_fn(lambda: model.prefill_logits(tokens, rope), dev, warmup=3, iters=8)
        out["eager_median_s"] = eager["median_s"]
        host = []
        for _ in range(5):
            torch.cuda._sleep(int(2e9))  # ~1 s of GPU work queued ahead, so enqueueing never waits
            t0 = time.perf_counter()
            model.prefill_logits(tokens, rope)
            host.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
        out["host_enqueue_s"] = sorted(host)[len(host) // 2]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                model.prefill_logits(tokens, rope)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model.prefill_logits(tokens, rope)
        out["device_graph_median_s"] = time_fn(graph.replay, dev, warmup=2, iters=8)["median_s"]
    return out


def main() -> None:
    dev = torch.device("cuda")
    for shape, seq in ((shapes.LLAMA_3_2_3B, 1024), (shapes.LLAMA_3_8B, 512), (shapes.LLAMA_3_8B, 1024),
                       (shapes.LLAMA_3_2_3B, 4096), (shapes.LLAMA_3_2_1B, 1024)):
        print(json.dumps(probe(shape, seq, dev)), flush=True)
        free(dev)


if __name__ == "__main__":
    main()
