"""Energy per load level (gpumatch.loadgen.energy): a level's window joined to the server's telemetry
document, from the energy counter or from the power samples, gross and idle-subtracted; a server without the
endpoint gives none. The figures are a telemetry window's (gpumatch.telemetry.window): one energy rule, one
idle subtraction, one clock-reason table. The document is served over real HTTP (aiohttp) the way
``gpumatch serve`` serves it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

aiohttp = pytest.importorskip("aiohttp")

from gpumatch.loadgen.energy import fetch, level_energy  # noqa: E402


def _doc(with_counter: bool = True) -> dict[str, Any]:
    """10 s at 10 Hz from t = 1000 s: 400 W, SW power cap (0x4) in the second half; the counter gains 400 J/s."""
    samples = [{"t_unix_s": 1000.0 + i / 10, "power_instant_w": 400.0, "sm_clock_mhz": 1900.0, "gpu_temp_c": 50,
                "clock_event_reasons": 0x4 if i >= 50 else 0} for i in range(100)]
    energy = [{"t_unix_s": 1000.0 + k, "energy_j": 5e6 + 400.0 * k} for k in range(11)] if with_counter else []
    return {"available": True, "idle_power_w": 100.0, "samples": samples, "energy": energy}


def test_counter_energy_gross_and_net() -> None:
    out = level_energy(_doc(), 1002.0, 1008.0, 1200)
    assert out["energy_source"] == "counter"
    assert out["energy_j"] == pytest.approx(400.0 * 6)
    assert out["energy_per_output_token_j"] == pytest.approx(2400.0 / 1200)
    assert out["energy_net_per_output_token_j"] == pytest.approx((2400.0 - 100.0 * 6) / 1200)
    assert out["power_cap_frac"] == pytest.approx(31 / 61) and out["thermal_frac"] == 0.0


def test_power_integral_without_a_counter_and_too_short_a_window() -> None:
    out = level_energy(_doc(with_counter=False), 1000.0, 1005.0, 500)
    assert out["energy_source"] == "integrated" and out["energy_j"] == pytest.approx(400.0 * 5)
    assert "energy_note" in level_energy(_doc(), 1000.0, 1000.15, 10)
    assert "energy_note" in level_energy(_doc(), 1000.0, 1005.0, 0)


@pytest.fixture
def server() -> Iterator[str]:
    """A real HTTP server: /gpumatch/telemetry answers the document rows at or after ?since=."""
    from aiohttp import web

    doc = _doc()

    async def telemetry(request: Any) -> Any:
        since = float(request.query.get("since", 0))
        return web.json_response({**doc, "samples": [s for s in doc["samples"] if s["t_unix_s"] >= since]})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_get("/gpumatch/telemetry", telemetry)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def test_fetched_over_http_and_none_from_a_server_without_it(server: str) -> None:
    doc = fetch(server, 1005.0)
    assert doc is not None and len(doc["samples"]) == 50
    assert level_energy(doc, 1005.0, 1009.0, 100)["energy_source"] == "counter"
    assert fetch(server + "/nothing-here", 0.0) is None
