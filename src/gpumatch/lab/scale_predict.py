"""The estimators' prediction beside each rung of a scaling ladder (lab may import estimate; bench never does).

- Collectives: :func:`gpumatch.calibrate.collectives.predict_or_none`, the ring/alpha-beta model of
  :mod:`gpumatch.estimate.comm` on the run's catalog card (PCIe tier when the measured topology has no NVLink
  between the GPUs).
- DDP / FSDP: :func:`gpumatch.estimate.estimate` ``task="train"`` with ``dp = n`` (``zero = 3`` for FSDP's full
  shard, else 0), ``batch`` = sequences per GPU, ``seq``: its ``step_s`` (data-parallel gradient all-reduce or
  FSDP gathers included, :mod:`gpumatch.estimate.training`).
- TP decode: ``task="infer"`` with ``tp = n``, ``batch``, ``prompt = seq - 1``, ``gen = 1``: its ``tpot_s`` (the
  per-layer TP all-reduces included), the mapping :mod:`gpumatch.lab.predict` uses for ``decode_step_s``.

No card (a CPU run, or a card the catalog does not know): no prediction, and :func:`no_prediction_reason` says so.
"""

from __future__ import annotations

from typing import Any

from gpumatch.calibrate.collectives import pcie_only
from gpumatch.errors import GpumatchError

__all__ = ["beside", "no_prediction_reason", "pcie_only", "workload_step_s"]


def no_prediction_reason(card: str | None, device: str, gpu_name: str | None) -> str | None:
    """Why the run has no predictions (None when it has a card)."""
    if card is not None:
        return None
    if device != "cuda":
        return "CPU processes (gloo): the estimators model GPUs, so there is no prediction"
    return f"the catalog does not know the card {gpu_name!r}: no prediction"


def workload_step_s(workload: str, model: str | None, card: str | None, n: int, batch: int,
                    seq: int) -> float | None:
    """The estimator's step seconds for one rung (module docstring), or None (no card, no named model, refused)."""
    if card is None or model is None:
        return None
    from gpumatch.estimate import Request, estimate

    try:
        if workload in ("ddp", "fsdp"):
            est = estimate(model, card, Request(task="train", dp=n, zero=3 if workload == "fsdp" else 0,
                                                micro_batch=batch, seq=seq), with_scaling=False)
            value = est.metrics.get("step_s")
        elif workload == "tp-decode":
            est = estimate(model, card, Request(task="infer", tp=n, concurrency=batch, prompt=max(seq - 1, 1), gen=1),
                           with_scaling=False)
            value = est.metrics.get("tpot_s")
        else:
            return None
    except (GpumatchError, KeyError, ValueError, ZeroDivisionError):
        return None
    return float(value) if value and value > 0 else None


def beside(measured: float, predicted: float | None, what: str, note: str | None) -> dict[str, Any]:
    """``predicted``, ``ratio`` = measured / predicted and who predicted; or the note why there is none."""
    if predicted is None or predicted <= 0:
        return {"predicted": None, "prediction_note": note or f"the estimator offers no {what} for this rung"}
    return {"predicted": predicted, "ratio": measured / predicted, "predicted_by": what}
