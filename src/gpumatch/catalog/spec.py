"""Runtime GPU spec: a frozen, SI-valued view of one validated SKU file."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from gpumatch.catalog.memory import UsableMemory, facts_from_file, usable_memory
from gpumatch.catalog.schema import PRECISIONS, GpuFile, PriceQuote


@dataclass(frozen=True)
class Price:
    """One dated price quote, SI/USD. Exactly one of ``usd`` / ``usd_per_gpu_hour`` is set.

    ``kind`` is one of :data:`gpumatch.catalog.schema.PriceKind`; ``term_months`` is set for reserved rates.
    """

    kind: str
    usd: float | None
    usd_per_gpu_hour: float | None
    date: dt.date
    source_url: str
    says: str
    provider: str = ""
    uncertain: bool = False
    note: str = ""
    term_months: int | None = None

    @property
    def amount(self) -> float:
        """The figure in its own unit: USD per GPU-hour for hourly kinds, USD per card for purchase kinds."""
        value = self.usd_per_gpu_hour if self.usd_per_gpu_hour is not None else self.usd
        return float(value) if value is not None else float("nan")


@dataclass(frozen=True)
class GpuSpec:
    """What the estimators need of a GPU, in SI units. ``peak_flops_per_s`` is dense; None = unsupported."""

    name: str
    aliases: tuple[str, ...]
    vendor: str
    segment: str
    form_factor: str
    architecture: str
    compute_capability: str | None
    launch_year: int
    memory_bytes: int
    memory_reported_bytes: int | None
    memory_type: str
    memory_usable: UsableMemory
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict[str, float | None]
    fp16_acc16_flops_per_s: float | None
    fp8_acc16_flops_per_s: float | None
    fp64_tensor_flops_per_s: float | None
    sparsity_in_headline: bool
    tdp_w: float
    scale_up: str
    nvlink_bytes_per_s: float
    pcie_gen: int
    pcie_lanes: int
    pcie_p2p: bool
    ecc: bool
    mig_instances: int
    cooling: str
    prices: tuple[Price, ...]
    sources: tuple[dict[str, str], ...]
    provenance: dict[str, dict[str, Any]] = field(repr=False, compare=False)
    uncertain_fields: tuple[str, ...] = ()
    origin: str = "builtin"
    notes: str = ""

    @property
    def memory_usable_bytes(self) -> int:
        """Usable bytes per GPU, by :func:`gpumatch.catalog.memory.usable_memory` (reading, else datasheet rule).

        ``memory_bytes`` is the datasheet figure as printed (SI); never use it as a capacity.
        """
        return self.memory_usable.usable_bytes

    @property
    def pcie_bytes_per_s(self) -> float:
        """Per-direction PCIe bandwidth: 2.5/5/8/16/32/64 GT/s per lane by generation, 128b/130b coding from gen 3.

        Source: PCI-SIG base specifications (gen1 2.5 GT/s 8b/10b, gen2 5 GT/s 8b/10b, gen3 8 GT/s,
        gen4 16, gen5 32, gen6 64 GT/s with 128b/130b-class coding).
        """
        gts = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}[self.pcie_gen]
        efficiency = 0.8 if self.pcie_gen <= 2 else 128 / 130
        return gts * 1e9 * efficiency / 8 * self.pcie_lanes

    def peak(self, precision: str) -> float | None:
        """Dense peak FLOP/s for a compute precision key of ``PRECISIONS``; None if unsupported."""
        return self.peak_flops_per_s.get(precision)

    def latest_price(self, kind: str) -> Price | None:
        """The newest quote of one kind ('on-demand', 'spot', 'list', ...). Plans and estimates do not use this:
        they take :func:`gpumatch.catalog.prices.select_price` (one basis, median of providers)."""
        quotes = [p for p in self.prices if p.kind == kind]
        return max(quotes, key=lambda p: p.date) if quotes else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``gpumatch gpus show``."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "segment": self.segment,
            "form_factor": self.form_factor,
            "architecture": self.architecture,
            "compute_capability": self.compute_capability,
            "launch_year": self.launch_year,
            "memory_bytes": self.memory_bytes,
            "memory_reported_bytes": self.memory_reported_bytes,
            "memory_usable_bytes": self.memory_usable_bytes,
            "memory_usable": self.memory_usable.to_dict(),
            "memory_type": self.memory_type,
            "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
            "tdp_w": self.tdp_w,
            "peak_flops_per_s": dict(self.peak_flops_per_s),
            "fp16_acc16_flops_per_s": self.fp16_acc16_flops_per_s,
            "fp8_acc16_flops_per_s": self.fp8_acc16_flops_per_s,
            "fp64_tensor_flops_per_s": self.fp64_tensor_flops_per_s,
            "sparsity_in_headline": self.sparsity_in_headline,
            "scale_up": self.scale_up,
            "nvlink_bytes_per_s": self.nvlink_bytes_per_s,
            "pcie_gen": self.pcie_gen,
            "pcie_lanes": self.pcie_lanes,
            "pcie_p2p": self.pcie_p2p,
            "ecc": self.ecc,
            "mig_instances": self.mig_instances,
            "cooling": self.cooling,
            "prices": [_price_dict(p) for p in self.prices],
            "uncertain_fields": list(self.uncertain_fields),
            "sources": [dict(s) for s in self.sources],
            "provenance": self.provenance,
            "origin": self.origin,
            "notes": self.notes,
        }


def _price_dict(p: Price) -> dict[str, Any]:
    return {
        "kind": p.kind,
        "usd": p.usd,
        "usd_per_gpu_hour": p.usd_per_gpu_hour,
        "date": p.date.isoformat(),
        "source_url": p.source_url,
        "says": p.says,
        "provider": p.provider,
        "uncertain": p.uncertain,
        "note": p.note,
        "term_months": p.term_months,
    }


def price_from_quote(q: PriceQuote, source_url: str) -> Price:
    return Price(
        kind=q.kind,
        usd=q.usd,
        usd_per_gpu_hour=q.usd_per_gpu_hour,
        date=q.date,
        source_url=source_url,
        says=q.says,
        provider=q.provider,
        uncertain=q.uncertain,
        note=q.note,
        term_months=q.term_months,
    )


def spec_from_file(f: GpuFile, origin: str) -> GpuSpec:
    """Flatten a validated file into SI numbers, keeping per-field provenance."""
    pf = f.peak_flops_per_s

    def val(key: str) -> float | None:
        fig = getattr(pf, key)
        return None if fig is None else fig.value

    provenance = {
        where: {
            "value": fig.value,
            "source_url": f.sources[fig.source].url,
            "says": fig.says,
            "uncertain": fig.uncertain,
            **({"note": fig.note} if fig.note else {}),
        }
        for where, fig in f.figures()
    }
    return GpuSpec(
        name=f.name,
        aliases=tuple(f.aliases),
        vendor=f.vendor,
        segment=f.segment,
        form_factor=f.form_factor,
        architecture=f.architecture,
        compute_capability=f.compute_capability,
        launch_year=f.launch_year,
        memory_bytes=int(f.memory.capacity_bytes.value),
        memory_reported_bytes=None if f.memory.reported_bytes is None else int(f.memory.reported_bytes.value),
        memory_type=f.memory.type,
        memory_usable=usable_memory(facts_from_file(f)),
        memory_bandwidth_bytes_per_s=f.memory.bandwidth_bytes_per_s.value,
        peak_flops_per_s={k: val(k) for k in PRECISIONS},
        fp16_acc16_flops_per_s=val("fp16_acc16"),
        fp8_acc16_flops_per_s=val("fp8_acc16"),
        fp64_tensor_flops_per_s=val("fp64_tensor"),
        sparsity_in_headline=f.sparsity_in_headline,
        tdp_w=f.tdp_w.value,
        scale_up=f.interconnect.scale_up,
        nvlink_bytes_per_s=f.interconnect.scale_up_bytes_per_s.value,
        pcie_gen=f.interconnect.pcie_gen,
        pcie_lanes=f.interconnect.pcie_lanes,
        pcie_p2p=f.interconnect.pcie_p2p,
        ecc=f.ecc,
        mig_instances=f.mig_instances,
        cooling=f.cooling,
        prices=tuple(price_from_quote(q, f.sources[q.source].url) for q in f.prices),
        sources=tuple(
            {"id": k, "url": s.url, "title": s.title, "retrieved": s.retrieved.isoformat()}
            for k, s in f.sources.items()
        ),
        provenance=provenance,
        uncertain_fields=tuple(w for w, fig in f.figures() if fig.uncertain),
        origin=origin,
        notes=f.notes,
    )
