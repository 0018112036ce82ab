"""Energy per load level: the serving GPU's telemetry joined to a level's window.

A server that publishes its GPU samples (``gpumatch serve``: ``GET /gpumatch/telemetry?since=T``, see
:mod:`gpumatch.lab.serve_telemetry`) lets the load generator attribute energy to each level it ran; any other
server (vLLM, SGLang, ...) has no such endpoint and the level simply has no energy figures.

A level's window [t0, t1] (UNIX seconds, from its first send to its last response) is a telemetry window
(:func:`gpumatch.telemetry.window.make_window`) of the rows the server published, so its figures follow the
one rule of each in :mod:`gpumatch.telemetry.window`:

- ``energy_j``: the mean power from NVML's total-energy counter between the rows nearest the window's edges
  (read once a second) times the window (``energy_source`` ``counter``), else from the trapezoid of the sampled
  power (``integrated``);
- ``energy_per_output_token_j`` = energy_j / output tokens completed in the level (gross);
- ``energy_net_per_output_token_j`` = (energy_j − idle_power_w × window) / output tokens (idle-subtracted: the
  server's settled idle power, measured at its start with no request);
- ``power_w_mean``, ``sm_clock_mhz_mean``, ``gpu_temp_c_max`` and the clock-reason shares of
  :data:`gpumatch.telemetry.types.REASON_GROUPS` (share of samples with the bits set).
"""

from __future__ import annotations

from typing import Any

from gpumatch.loadgen.server_info import get_json
from gpumatch.telemetry.types import SAMPLE_FIELDS, EdgeCounters, Sample
from gpumatch.telemetry.window import MIN_WINDOW_SAMPLES, make_window


def fetch(base_url: str, since_unix_s: float, api_key: str | None = None) -> dict[str, Any] | None:
    """The server's telemetry document from ``since_unix_s`` on, or None when it publishes none."""
    doc = get_json(f"{base_url}/gpumatch/telemetry", api_key, {"since": f"{since_unix_s:.3f}"})
    return doc if isinstance(doc, dict) and doc.get("available") else None


def level_energy(doc: dict[str, Any], t0: float, t1: float, output_tokens: int) -> dict[str, Any]:
    """The level's energy figures (module docstring) from a telemetry document; ``{"energy_note": why}`` when
    the window holds fewer than :data:`~gpumatch.telemetry.window.MIN_WINDOW_SAMPLES` samples or no tokens."""
    g = make_window("level", t0, t1, _samples(doc), _edges(doc)).gpu(int(doc.get("gpu_index") or 0))
    if g.n_samples < MIN_WINDOW_SAMPLES or output_tokens <= 0:
        return {"energy_note": f"{g.n_samples} telemetry samples and {output_tokens} output tokens in the window"}
    idle = doc.get("idle_power_w")
    out: dict[str, Any] = {**g.summary(), "energy_j": g.energy_j, "energy_source": g.energy_source,
                           "energy_window_s": g.duration_s, "telemetry_samples": g.n_samples, "idle_power_w": idle}
    del out["n_samples"]
    if g.energy_j is not None:
        out["energy_per_output_token_j"] = g.energy_j / output_tokens
        net = g.net_energy_j(None if idle is None else float(idle))
        if net is not None:
            out["energy_net_per_output_token_j"] = net / output_tokens
    return out


def _samples(doc: dict[str, Any]) -> list[Sample]:
    """The document's sample rows as telemetry samples on the UNIX clock (``t_s`` = ``t_unix_s``)."""
    index = int(doc.get("gpu_index") or 0)
    out = []
    for r in doc.get("samples") or []:
        if r.get("t_unix_s") is None:
            continue
        fields = {k: r.get(k) for k in SAMPLE_FIELDS if k not in ("t_s", "gpu_index")}
        out.append(Sample(t_s=float(r["t_unix_s"]), gpu_index=index, **fields))
    return sorted(out, key=lambda s: s.t_s)


def _edges(doc: dict[str, Any]) -> list[EdgeCounters]:
    """The document's energy rows (J) as edge readings of the energy counter (mJ) on the UNIX clock."""
    index = int(doc.get("gpu_index") or 0)
    return [EdgeCounters(t_s=float(r["t_unix_s"]), gpu_index=index, energy_mj=round(float(r["energy_j"]) * 1000))
            for r in doc.get("energy") or [] if r.get("t_unix_s") is not None and r.get("energy_j") is not None]
