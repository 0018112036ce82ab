"""The estimator's serving prediction for each load level, stored beside its measurement.

For a level, :func:`gpumatch.estimate.estimate` with ``task="serve"`` and the engine profile ``engine``
(``data/engines.toml``; ``vllm`` by default, ``gpumatch`` for gpumatch's own server where that profile exists):

- closed loop, concurrency ``C``: ``concurrency=C``, ``num_prompts`` = the level's requests, ``length_low`` = the range
  ratio: the pass-by-pass replay of the same benchmark (:mod:`gpumatch.estimate.replay`, first burst included);
- open loop, rate ``λ``: ``request_rate=λ`` (the engine's Poisson steady state, :mod:`gpumatch.estimate.serving`).

Predicted figures use the measurement's names: ``mean_ttft_ms``, ``mean_tpot_ms``, ``mean_e2el_ms``
(estimate ``ttft_s``, ``tpot_s``, ``e2e_s``), ``request_throughput`` (``requests_per_s``), ``output_throughput``
(``output_tokens_per_s``); ``ratio`` = measured / predicted for each. No prediction (and the reason) when the
model or the card is unknown to gpumatch, or the estimator refuses the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpumatch.errors import GpumatchError
from gpumatch.loadgen.runner import Level

PREDICTED = {"mean_ttft_ms": ("ttft_s", 1000.0), "mean_tpot_ms": ("tpot_s", 1000.0),
             "mean_e2el_ms": ("e2e_s", 1000.0), "request_throughput": ("requests_per_s", 1.0),
             "output_throughput": ("output_tokens_per_s", 1.0)}


@dataclass(frozen=True)
class PredictionSetup:
    """What the estimate needs besides the level: model (preset, alias or config.json), catalog card, engine,
    the nominal lengths and their range ratio."""

    model: str | None
    gpu: str | None
    engine: str
    prompt_tokens: int
    output_tokens: int
    range_ratio: float


def predict_level(setup: PredictionSetup, level: Level, num_prompts: int) -> dict[str, Any]:
    """``{"predicted": {...}, "predicted_by": ..., "basis": ...}`` or ``{"prediction_note": why not}``."""
    if setup.gpu is None:
        return {"prediction_note": "no card given (--gpu) or detected: no prediction"}
    if setup.model is None:
        return {"prediction_note": "no model architecture known (--arch): no prediction"}
    try:
        from gpumatch.estimate import Request, estimate

        opts: dict[str, Any] = {"task": "serve", "engine": setup.engine, "prompt": setup.prompt_tokens,
                                "gen": setup.output_tokens}
        if level.mode == "concurrency":
            opts.update(concurrency=int(level.value), num_prompts=num_prompts, length_low=setup.range_ratio)
        else:
            opts.update(request_rate=level.value)
        est = estimate(setup.model, setup.gpu, Request(**opts))
    except (GpumatchError, ImportError, ValueError, ZeroDivisionError) as e:
        return {"prediction_note": f"no prediction: {e}"}
    predicted = {k: float(est.metrics[src]) * scale for k, (src, scale) in PREDICTED.items()
                 if src in est.metrics and est.metrics[src] == est.metrics[src]}
    out: dict[str, Any] = {"predicted": predicted, "basis": est.basis,
                           "predicted_by": f"gpumatch estimate: {est.model} on {est.gpu}, engine {setup.engine}"}
    if est.warnings:
        out["prediction_warnings"] = list(est.warnings)
    return out


def ratios(summary: dict[str, Any], prediction: dict[str, Any]) -> dict[str, float]:
    """measured / predicted for each predicted figure the level measured."""
    out = {}
    for k, p in (prediction.get("predicted") or {}).items():
        m = summary.get(k)
        if isinstance(m, int | float) and p:
            out[k] = float(m) / p
    return out


def detect_gpu(base_url: str) -> str | None:
    """The catalog name of this machine's first GPU when the endpoint is on this machine (``nvidia-smi``), else
    None. A remote server's card cannot be seen from here: give ``--gpu``."""
    from urllib.parse import urlparse

    host = (urlparse(base_url).hostname or "").lower()
    if host not in ("localhost", "127.0.0.1", "::1", "0.0.0.0"):
        return None
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        got = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = got.stdout.strip().splitlines()[0] if got.returncode == 0 and got.stdout.strip() else None
    if name is None:
        return None
    from gpumatch.lab.predict import catalog_gpu

    return catalog_gpu(name)
