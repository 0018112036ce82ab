"""Serve runs in a real store, made the way a user makes them, for the report's serving tests.

- run 1: ``gpumatch bench serve`` (:func:`gpumatch.loadgen.bench.run_serve_bench`) over loopback HTTP against
  the load generator's fake OpenAI server (:func:`gpumatch.loadgen.loopback.make_app`: a fixed TTFT and
  inter-token gap) that also publishes ``/gpumatch/telemetry`` from :class:`gpumatch.lab.serve_telemetry.
  ServerTelemetry` replaying a recorded H200 trace (idle, then a GEMM at the power cap) through the fake device:
  closed-loop levels c=1, 4, 16 and open-loop 25/s and 100/s, 100 requests each (enough for a p99), the card and
  model given so each level stores gpumatch's prediction, an SLO in the run's settings;
- run 2: ``gpumatch runs import`` of the committed ``vllm bench serve --save-result`` file (closed loop, c=8);
- run 3: ``gpumatch runs import`` of the committed GuideLLM ``benchmarks.json`` (synchronous, then 4/s).

The latencies are the fake server's, not a GPU's: the tests check structure and rendering, never a speed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "traces" / "h200-2026-12-03-monitor-gemm.csv"
IMPORTS = (ROOT / "tests" / "data" / "imports" / "vllm-bench-serve.json",
           ROOT / "tests" / "data" / "imports" / "guidellm-benchmarks.json")
SLO_TTFT_S, SLO_TPOT_S = 0.050, 0.012


@contextmanager
def fake_gpu_server() -> Iterator[str]:
    """The loopback OpenAI server plus ``/gpumatch/telemetry`` (replayed H200 samples), in a thread; its URL."""
    from aiohttp import web

    from gpumatch.lab.serve_telemetry import ServerTelemetry
    from gpumatch.loadgen.loopback import LoopbackConfig, make_app
    from gpumatch.telemetry.fake import FakeBackend

    tele = ServerTelemetry(FakeBackend.from_file(TRACE), 0, interval_s=0.05).start()
    tele.measure_idle(3.0)  # the settled idle power: the clocks fall 1 s into the trace, then 1 s of lag
    app = make_app(LoopbackConfig(itl_s=0.002, ttft_s=0.02))

    async def telemetry(request: web.Request) -> web.Response:
        since = request.query.get("since")
        return web.json_response(tele.query(float(since) if since else None))

    app.router.add_get("/gpumatch/telemetry", telemetry)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()
        tele.stop()


def build_serve_store(store: Path) -> dict[str, Any]:
    """Runs 1-3 of the module docstring in ``store``; the ``bench serve`` run's :class:`ServeRun`."""
    from gpumatch.cli.app import main
    from gpumatch.loadgen.bench import ServeRequest, run_serve_bench
    from gpumatch.loadgen.metrics import Slo

    with fake_gpu_server() as url:
        run = run_serve_bench(ServeRequest(url, "llama-3.1-8b", num_prompts=100, prompt_tokens=128, output_tokens=16,
                                           concurrency=(1, 4, 16), rates=(25.0, 100.0), gpu="H200 SXM",
                                           arch="llama-3.1-8b", slo=Slo(ttft_s=SLO_TTFT_S, tpot_s=SLO_TPOT_S),
                                           selftest=False, store=store))
    assert run.run_id == 1 and run.status == "completed", (run.run_id, run.status, run.store_error)
    for path in IMPORTS:
        assert main(["runs", "import", str(path), "--store", str(store)]) == 0
    return {"run": run}
