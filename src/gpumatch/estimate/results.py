"""Frozen result values of the scalar API, with the JSON contract of ``gpumatch estimate --format json``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpumatch.units import GIB

MEMORY_KEYS = (
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "kv_cache_bytes",
    "overhead_bytes",
    "total_bytes",
    "capacity_bytes",
)
MEMORY_DETAIL_KEYS = (
    "logits_bytes",
    "autocast_copies_bytes",
    "tied_embedding_grad_bytes",
    "cuda_context_bytes",
    "comm_buffer_bytes",
    "fragmentation_bytes",
    "gather_buffer_bytes",
    "offloaded_bytes",
    "not_at_peak_bytes",
)
INFER_KEYS = (
    "prefill_s", "ttft_s", "tpot_s", "tokens_per_s", "tokens_per_s_per_replica", "decode_tokens_per_s",
    "prefill_tokens_per_s", "e2e_s", "output_tokens_per_s", "itl_s", "requests_per_s",
)
TRAIN_KEYS = ("step_s", "tokens_per_s", "mfu", "bubble_s", "optimizer_s")
BREAKDOWN_KEYS = ("compute_s", "memory_s", "comm_s", "host_s")
RUN_KEYS = ("power_w", "power_idle_w", "power_peak_w", "facility_power_w", "energy_j_per_token",
            "energy_j_per_token_facility", "usd_per_million_tokens", "usd_per_hour", "scaling_efficiency",
            "effective_gpus", "run_tokens", "run_hours", "energy_kwh_per_run", "gpu_energy_kwh_per_run", "usd_per_run")
"""Figures of a configuration that runs: null in the JSON of one that does not fit (it would not run at all)."""
NOT_RUN_KEEP = ("power_idle_w", "power_peak_w", "run_tokens")
"""Of :data:`RUN_KEYS`, those that describe the card or the request, not a run: kept when it does not fit."""


def _clean(v: float) -> float | None:
    return None if math.isnan(v) or math.isinf(v) else v


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU bytes by item; ``fits`` = ``total_bytes <= capacity_bytes``."""

    items: dict[str, float]

    def __getattr__(self, name: str) -> float:
        try:
            return float(self.__dict__["items"][name])
        except KeyError:
            raise AttributeError(name) from None

    @property
    def fits(self) -> bool:
        return self.items["total_bytes"] <= self.items["capacity_bytes"]

    @property
    def margin_bytes(self) -> float:
        return self.items["capacity_bytes"] - self.items["total_bytes"]

    @property
    def peak_rule(self) -> str:
        """Why the items add up to more than the total (empty when they add up): the peak rule of
        :func:`gpumatch.estimate.engine.memory_items`."""
        extra = self.items.get("not_at_peak_bytes", 0.0)
        if extra <= 0.0:
            return ""
        tied = self.items.get("tied_embedding_grad_bytes", 0.0)
        head = f"total = items - {extra / GIB:.2f} GiB: "
        tied_note = ("a tied embedding's second gradient (counted in the gradients) exists only at the end of "
                     "backward")
        if extra <= tied * (1.0 + 1e-9):
            return head + tied_note + ", not at the peak"
        return (head + "gradients and activations do not peak together (one GPU, no gradient accumulation: backward "
                "frees activations as it creates gradients, so the peak holds the larger of the two)"
                + (f"; {tied_note}" if tied > 0.0 else ""))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: self.items[k] for k in MEMORY_KEYS}
        d["detail"] = {k: self.items.get(k, 0.0) for k in MEMORY_DETAIL_KEYS}
        d["peak_rule"] = self.peak_rule or None
        return d


@dataclass(frozen=True)
class PriceBasis:
    """Which quotes a cost figure uses (:func:`gpumatch.catalog.prices.select_price`, the planner's rule).

    ``kind``: the price basis (on-demand, reserved, spot, purchase). ``usd_per_gpu_hour``: what one GPU costs per
    hour on that basis (purchase: amortized capex + energy + facility per GPU). ``date``: the months of the
    quotes used; ``provider``: who (or "median of N providers"); ``source_url``: the first quote's source.
    ``choice``: the full selection (figure, spread, every quote) as JSON.
    """

    kind: str
    usd_per_gpu_hour: float
    date: str
    source_url: str
    provider: str = ""
    choice: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    """One configuration's estimate. ``metrics`` holds the time/throughput/power/cost numbers (SI names)."""

    task: str
    model: str
    gpu: str
    count: int
    layout: dict[str, Any]
    precision: dict[str, Any]
    basis: str
    provenance: str
    memory: MemoryEstimate
    metrics: dict[str, float]
    bound: str
    price: PriceBasis | None = None
    warnings: tuple[str, ...] = field(default=())
    uncertainty_basis: str = ""
    fit_hint: str = ""
    """When it does not fit: the first change that fits, with its cost (empty when it fits or nothing tried does)."""
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """(low, high) of each time, memory, throughput, energy and cost figure (SI; :mod:`gpumatch.estimate.intervals`)."""
    interval_basis: dict[str, str] = field(default_factory=dict)
    """Why each interval is as wide as it is ("H200 SXM 141GB decode, n=8, -3%/+3%" or "extrapolated ...")."""
    serving: dict[str, Any] | None = None
    """Task ``serve`` with an engine: the steady state's assumptions (:meth:`gpumatch.estimate.serving.Serving.
    assumptions`); None for the static model and for training."""

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def training(self) -> bool:
        return "step_s" in self.metrics

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of issue 3 plus extra keys (layout, margin, breakdown, warnings, price)."""
        mem = self.memory
        cap = mem.items["capacity_bytes"]
        d: dict[str, Any] = {
            "fits": self.fits,
            "basis": self.basis,
            "provenance": self.provenance,
            "task": self.task,
            "model": self.model,
            "gpu": self.gpu,
            "count": self.count,
            "layout": dict(self.layout),
            "precision": dict(self.precision),
            "memory": mem.to_dict(),
            "margin_bytes": mem.margin_bytes,
            "margin_fraction": mem.margin_bytes / cap if cap else None,
        }
        keys = TRAIN_KEYS if self.training else INFER_KEYS
        runs = self.fits

        def run_value(k: str) -> float | None:
            return _clean(self.metrics[k]) if runs or k in NOT_RUN_KEEP else None

        d.update({k: run_value(k) for k in keys})
        d["bound"] = self.bound if runs else None
        d["breakdown"] = {k: self.metrics[k] for k in BREAKDOWN_KEYS} if runs else None
        d.update({k: run_value(k) for k in RUN_KEYS if k in self.metrics})
        u = self.metrics.get("uncertainty_fraction")
        if u is not None and runs:
            timed = [k for k in ("prefill_s", "ttft_s", "tpot_s", "step_s") if k in keys]
            d["uncertainty"] = {
                "time_fraction": u,
                "basis": self.uncertainty_basis,
                "ranges": {k: [self.metrics[k] * (1 - u), self.metrics[k] * (1 + u)] for k in timed},
            }
        d.update(self._intervals_dict(d))
        if not self.training:
            d["serving"] = dict(self.serving) if self.serving is not None and runs else (
                {"engine": "static"} if runs else None)
        d["fit_hint"] = self.fit_hint or None
        d["price"] = None if self.price is None else dict(self.price.__dict__)
        d["warnings"] = list(self.warnings)
        return d

    def _intervals_dict(self, d: dict[str, Any]) -> dict[str, Any]:
        """``intervals`` {figure: [low, high]} and ``interval_basis`` {figure: why} for the figures ``d`` shows."""
        shown = {k: v for k, v in self.intervals.items()
                 if (d["memory"].get(k) if k in MEMORY_KEYS else d.get(k)) is not None}
        return {"intervals": {k: [lo, hi] for k, (lo, hi) in shown.items()},
                "interval_basis": {k: self.interval_basis.get(k, "") for k in shown}}
