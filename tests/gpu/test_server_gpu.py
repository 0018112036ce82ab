"""``gpumatch serve`` on a CUDA GPU (skipped elsewhere): decode graphs give the eager tokens; the server streams
with exact counts and reports NVML telemetry and its idle window."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

torch = pytest.importorskip("torch")
aiohttp = pytest.importorskip("aiohttp")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _generate(use_graphs: bool) -> tuple[list[list[int]], list[str], int]:
    from gpumatch.bench.llama import build_model
    from gpumatch.bench.server.runner import Runner
    from gpumatch.bench.server.scheduler import Scheduler, Seq
    from gpumatch.bench.shapes import tiny_shape

    torch.manual_seed(0)
    model = build_model(tiny_shape(layers=4), torch.device("cuda"), torch.float32)
    runner = Runner(model, 8, 256, use_graphs=use_graphs)
    assert runner.graph_error is None
    sched = Scheduler(8, 256, 32)
    rng = random.Random(3)
    seqs = [Seq(i, [rng.randrange(512) for _ in range(rng.randint(2, 40))], rng.randint(1, 60)) for i in range(12)]
    for s in seqs:
        sched.add(s)
    kinds = []
    while sched.running or sched.waiting:
        plan = sched.schedule()
        kinds.append(plan.kind)
        sched.apply(plan, runner.step(plan))
    return [s.out for s in seqs], kinds, len(runner.graphs)


def test_decode_graphs_give_the_eager_tokens() -> None:
    eager, kinds, none = _generate(False)
    graphs, kinds_g, n = _generate(True)
    assert none == 0 and n == 4 * 5  # batch buckets 1, 2, 4, 8 x context buckets 16, 32, 64, 128, 256
    assert kinds == kinds_g and "decode" in kinds and "mixed" in kinds
    assert graphs == eager


def test_server_streams_on_the_gpu_with_telemetry() -> None:
    from gpumatch.lab.serve import ServeOptions, ServerThread

    opts = ServeOptions(tiny=True, port=0, max_num_seqs=4, max_model_len=128, max_num_batched_tokens=16, idle_s=3.0)

    async def one(sess: aiohttp.ClientSession, url: str, n: int) -> dict[str, int]:
        body = {"prompt": "a b c d", "max_tokens": n, "stream": True, "stream_options": {"include_usage": True}}
        usage: dict[str, int] = {}
        async with sess.post(url + "/v1/completions", json=body) as r:
            async for raw in r.content:
                line = raw.decode().strip()
                if line.startswith("data: {"):
                    usage = json.loads(line[6:]).get("usage") or usage
        return usage

    with ServerThread(opts) as s:
        async def main() -> tuple[list[dict[str, int]], dict[str, object]]:
            async with aiohttp.ClientSession() as sess:
                got = await asyncio.gather(*[one(sess, s.url, 10 + i) for i in range(6)])
                async with sess.get(s.url + "/gpumatch/telemetry?since=0") as r:
                    return list(got), await r.json()

        usages, tele = asyncio.run(main())
        assert s.listening is not None and s.listening.info["cuda_graphs"] > 0
    assert [u["completion_tokens"] for u in usages] == [10 + i for i in range(6)]
    if s.listening.telemetry == "nvml":
        assert tele["available"] and tele["samples"] and tele["energy"] and tele["idle_window_s"] == 3.0
        # the settled idle power (telemetry.window): None when this test process's CUDA context (the test above)
        # kept the clocks up, else an idle card's draw
        idle = s.listening.idle_power_w
        assert idle is None or 20.0 < idle < 300.0
