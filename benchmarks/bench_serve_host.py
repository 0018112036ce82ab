"""Host (CPU) cost of one ``gpumatch serve`` pass without the model's work: the engine profile's host figures.

What it times: :class:`gpumatch.bench.server.engine.Engine`'s pass (scheduling, the decode inputs built and copied
into tensors, the sampled ids handed to each request's callback, the Prometheus updates) with the forward replaced
by a tensor of zeros, each pass's tokens handed to an event loop thread that encodes their SSE chunks, for
decode-only passes of B running sequences. A least-squares line over B gives
``host_pass_s + host_seq_s * B`` (the ``gpumatch`` profile in src/gpumatch/estimate/data/engines.toml). On a GPU
the pass also waits for the sampled ids (a synchronisation), which this leaves out.

Usage: ``python benchmarks/bench_serve_host.py [--passes 400]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable

import numpy as np
import torch

from gpumatch.bench.llama import build_model
from gpumatch.bench.server.engine import Engine, EngineInfo, Event
from gpumatch.bench.server.runner import Runner
from gpumatch.bench.server.scheduler import Scheduler, Seq
from gpumatch.bench.shapes import tiny_shape


class _NoForward(Runner):
    def _forward(self, b):  # type: ignore[no-untyped-def]
        return torch.zeros(b.sample_rows.shape[0], dtype=torch.long)


def _event_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop


def _sse(ev: object) -> None:
    """What the HTTP side does per token (one chunk encoded as the stream sends it), on the event loop."""
    chunk = {"id": "cmpl-0", "object": "text_completion", "created": 0, "model": "tiny",
             "choices": [{"index": 0, "text": " t1", "logprobs": None, "finish_reason": None}]}
    (f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n").encode()


def _run_all(events: list[tuple[Callable[[Event], None], Event]]) -> None:
    for cb, ev in events:
        cb(ev)


def pass_time(batch: int, passes: int, loop: asyncio.AbstractEventLoop) -> float:
    """Median seconds of a decode-only pass of ``batch`` sequences (forward removed); each token goes to an event
    loop in another thread (one ``call_soon_threadsafe`` per pass) that encodes its SSE chunk, as the server does."""
    model = build_model(tiny_shape(), torch.device("cpu"), torch.float32)
    runner = _NoForward(model, batch, passes + 8, use_graphs=False)
    sched = Scheduler(batch, passes + 8, 1 << 20)
    info = EngineInfo("tiny", "cpu", "float32", 0, batch, passes + 8, 1 << 20, 0, 0)
    engine = Engine(runner, sched, info, None)
    engine.dispatch = lambda events: loop.call_soon_threadsafe(_run_all, events)
    for i in range(batch):
        seq = Seq(i, [1], passes + 2)
        engine._callbacks[i] = _sse
        sched.add(seq)
    engine._pass(sched.schedule())
    times = []
    for _ in range(passes):
        plan = sched.schedule()
        t0 = time.perf_counter()
        engine._pass(plan)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=400)
    args = ap.parse_args()
    batches = [1, 8, 32, 64, 128, 256]
    loop = _event_loop()
    times = [pass_time(b, args.passes, loop) for b in batches]
    for b, t in zip(batches, times, strict=True):
        print(f"B={b:4d}  host pass {t * 1e6:8.1f} us")
    slope, icpt = np.polyfit(batches, times, 1)
    print(f"fit: host_pass_s = {icpt:.3g}  host_seq_s = {slope:.3g}")


if __name__ == "__main__":
    main()
