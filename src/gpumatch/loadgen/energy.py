"""Energy per load level: the serving GPU's telemetry joined to a level's window.

A server that publishes its GPU samples (``gpumatch serve``: ``GET /gpumatch/telemetry?since=T``, see
:mod:`gpumatch.lab.serve_telemetry`) lets the load generator attribute energy to each level it ran; any other
server (vLLM, SGLang, ...) has no such endpoint and the level simply has no energy figures.

For a level's window [t0, t1] (UNIX seconds, from its first send to its last response):

- ``energy_j`` = difference of the NVML total-energy counter rows nearest inside the window's edges (read once
  a second), scaled from their span to the whole window (``energy_source`` ``counter``), else mean instant
  power × window (``power``), the counter being exact and the power integral a 10 Hz estimate
  (benchmark-method.md, section 2);
- ``energy_per_output_token_j`` = energy_j / output tokens completed in the level (gross);
- ``energy_net_per_output_token_j`` = (energy_j − idle_power_w × counted seconds) / output tokens
  (idle-subtracted: the server's idle power measured at its start, model loaded, no request);
- ``power_w_mean``, ``sm_clock_mhz_mean``, ``gpu_temp_c_max`` and the throttle fractions of
  :data:`gpumatch.lab.telemetry.REASON_BITS` (share of samples with the bits set).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from gpumatch.lab.telemetry import REASON_BITS

FETCH_TIMEOUT_S = 10.0
MIN_SAMPLES = 3
"""Fewer samples than this in a level's window: no energy figure (the window is too short for 10 Hz)."""


def fetch(base_url: str, since_unix_s: float, api_key: str | None = None) -> dict[str, Any] | None:
    """The server's telemetry document from ``since_unix_s`` on, or None when it publishes none."""
    return asyncio.run(_fetch(base_url, since_unix_s, api_key))


async def _fetch(base_url: str, since: float, api_key: str | None) -> dict[str, Any] | None:
    import aiohttp

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S),
                                         headers=headers) as s, \
                s.get(f"{base_url}/gpumatch/telemetry", params={"since": f"{since:.3f}"}) as r:
            if r.status != 200:
                return None
            doc = await r.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("available") else None


def level_energy(doc: dict[str, Any], t0: float, t1: float, output_tokens: int) -> dict[str, Any]:
    """The level's energy figures (module docstring) from a telemetry document; ``{"energy_note": why}`` when
    the window holds too few samples or no tokens."""
    samples = [s for s in doc.get("samples") or [] if t0 <= float(s.get("t_unix_s", -1.0)) <= t1]
    if len(samples) < MIN_SAMPLES or output_tokens <= 0:
        return {"energy_note": f"{len(samples)} telemetry samples and {output_tokens} output tokens in the window"}
    watts = [float(s["power_instant_w"]) for s in samples if s.get("power_instant_w") is not None]
    power = sum(watts) / len(watts) if watts else None
    energy, seconds, source = _counter(doc.get("energy") or [], t0, t1)
    if energy is None and power is not None:
        energy, seconds, source = power * (t1 - t0), t1 - t0, "power"
    out: dict[str, Any] = {"power_w_mean": power, "energy_j": energy, "energy_source": source,
                           "energy_window_s": seconds, "telemetry_samples": len(samples),
                           "sm_clock_mhz_mean": _mean(samples, "sm_clock_mhz"),
                           "gpu_temp_c_max": max((float(s["gpu_temp_c"]) for s in samples
                                                  if s.get("gpu_temp_c") is not None), default=None),
                           "idle_power_w": doc.get("idle_power_w")}
    reasons = [int(s["clock_event_reasons"]) for s in samples if s.get("clock_event_reasons") is not None]
    for name, bits in REASON_BITS.items():
        out[name] = sum(1 for r in reasons if r & bits) / len(reasons) if reasons else None
    if energy is not None:
        out["energy_per_output_token_j"] = energy / output_tokens
        idle = doc.get("idle_power_w")
        if idle is not None and seconds:
            out["energy_net_per_output_token_j"] = (energy - float(idle) * seconds) / output_tokens
    return out


def _counter(rows: Sequence[dict[str, Any]], t0: float, t1: float) -> tuple[float | None, float, str]:
    inside = sorted((float(r["t_unix_s"]), float(r["energy_j"])) for r in rows
                    if t0 <= float(r.get("t_unix_s", -1.0)) <= t1 and r.get("energy_j") is not None)
    if len(inside) < 2:
        return None, 0.0, ""
    (ta, ea), (tb, eb) = inside[0], inside[-1]
    return (eb - ea) * (t1 - t0) / (tb - ta) if tb > ta else None, t1 - t0, "counter"


def _mean(samples: Sequence[dict[str, Any]], key: str) -> float | None:
    vals = [float(s[key]) for s in samples if s.get(key) is not None]
    return sum(vals) / len(vals) if vals else None
