"""Validated shape of one GPU SKU data file (TOML), and of price overlay files.

Every number is a :class:`Figure`: the value in SI units plus the source it came from and the
words that source uses ("BF16 Tensor Core 1,979 TFLOPS*, *with sparsity"), so that a reader can
check the dense value we derived. Unknown keys are errors (``extra="forbid"``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

Vendor = Literal["nvidia", "amd", "intel"]
Segment = Literal["datacenter", "workstation", "consumer"]
Cooling = Literal["passive", "active", "liquid"]
ScaleUp = Literal["nvlink", "nvlink-bridge", "infinity-fabric", "ethernet", "none"]
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Strict):
    """A public document; ``id`` is how figures refer to it."""

    url: str = Field(pattern=r"^https?://\S+$")
    title: str = Field(min_length=3)
    retrieved: dt.date
    publisher: str = ""


class Figure(_Strict):
    """One sourced number. ``value`` is SI (bytes, bytes/s, FLOP/s, W); ``says`` quotes the source."""

    value: float = Field(ge=0)
    source: str = Field(min_length=1)
    says: str = Field(min_length=2)
    uncertain: bool = False
    note: str = ""


class Memory(_Strict):
    """Card memory as the sources print it; :func:`gpumatch.catalog.memory.usable_memory` turns it into
    the usable bytes every estimate uses.

    ``capacity_bytes`` is the datasheet figure as printed, stored as SI ("80 GB" -> 80e9); vendors mean
    binary GiB by it, and the usable-memory rule reads it so. ``reported_bytes`` is the driver's total
    (nvidia-smi "81559 MiB" = 81559 * 2**20 bytes) where a public reading exists, taken in the card's
    default ECC mode; ``reported_by`` names the tool (nvidia-smi, rocm-smi, amd-smi, rocminfo, hl-smi)
    and ``reported_driver`` its driver version. ``reserved_bytes`` is what the same kind of reading holds
    back from processes (nvidia-smi -q "FB Memory Usage: Reserved"; needs ``reported_bytes``).
    ``process_bytes`` is the total one process is given (CUDA deviceQuery / ``cudaGetDeviceProperties``
    totalGlobalMem, ``torch.cuda.mem_get_info`` or the "total capacity" of PyTorch's out-of-memory
    message, HIP ``hipMemGetInfo`` / totalGlobalMem, Gaudi ``memory_stats()["Limit"]``); ``process_by``
    names the tool and ``process_driver`` its driver. ``ecc_default`` overrides whether ECC is on out of
    the box ("on" / "off"; default: on for datacenter cards with ECC, else off).
    """

    capacity_bytes: Figure
    reported_bytes: Figure | None = None
    reported_by: str = Field(default="", max_length=40)
    reported_driver: str = Field(default="", max_length=40)
    reserved_bytes: Figure | None = None
    process_bytes: Figure | None = None
    process_by: str = Field(default="", max_length=40)
    process_driver: str = Field(default="", max_length=40)
    ecc_default: Literal["on", "off"] | None = None
    type: str = Field(min_length=2)
    bandwidth_bytes_per_s: Figure
    l2_cache_bytes: Figure | None = None

    @model_validator(mode="after")
    def _readings_agree(self) -> Memory:
        """A reserve needs the total it is taken from and must be smaller; a process total is positive and
        cannot exceed the driver's total."""
        rep = self.reported_bytes
        if self.reserved_bytes is not None:
            if rep is None:
                raise ValueError("memory.reserved_bytes needs memory.reported_bytes (the total it is part of)")
            if self.reserved_bytes.value >= rep.value:
                raise ValueError("memory.reserved_bytes must be smaller than memory.reported_bytes")
        if self.process_bytes is not None:
            if self.process_bytes.value <= 0:
                raise ValueError("memory.process_bytes must be greater than 0")
            if rep is not None and self.process_bytes.value > rep.value:
                raise ValueError("memory.process_bytes cannot exceed memory.reported_bytes (the driver's total)")
        return self


class PeakFlops(_Strict):
    """Dense peak rates in FLOP/s (OP/s for int8). Absent = not supported by the hardware path.

    ``fp64`` and ``fp32`` are the non-tensor (vector) rates; ``fp64_tensor`` the FP64 tensor-core
    rate where one exists. On GeForce cards ``fp16``/``fp8`` are the FP32-accumulate rates and the
    FP16-accumulate ones go in ``fp16_acc16``/``fp8_acc16``.
    """

    fp64: Figure | None = None
    fp64_tensor: Figure | None = None
    fp32: Figure | None = None
    tf32: Figure | None = None
    fp16: Figure | None = None
    bf16: Figure | None = None
    fp8: Figure | None = None
    int8: Figure | None = None
    fp4: Figure | None = None
    fp16_acc16: Figure | None = None
    fp8_acc16: Figure | None = None


class Interconnect(_Strict):
    """Scale-up link and host link. ``scale_up_bytes_per_s`` is total bidirectional per GPU (0 if none)."""

    scale_up: ScaleUp
    scale_up_bytes_per_s: Figure
    pcie_gen: int = Field(ge=1, le=7)
    pcie_lanes: int = Field(ge=1, le=32)
    pcie_p2p: bool = Field(
        description="whether the vendor driver enables PCIe peer-to-peer between two such cards"
    )
    pcie_p2p_note: str = ""


PriceKind = Literal["on-demand", "reserved", "spot", "serverless", "list", "street"]
"""What a quote prices (see :mod:`gpumatch.catalog.prices` for how a plan uses them):

- ``on-demand``: a cloud's pay-as-you-go rate per GPU-hour, no commitment, not interruptible;
- ``reserved``: a committed rate per GPU-hour for ``term_months``;
- ``spot``: interruptible (spot, preemptible) capacity, or a community/peer marketplace (Vast.ai, Akash,
  RunPod Community Cloud) where hosts are third parties and the rate floats;
- ``serverless``: a per-second scale-to-zero worker rate turned into $/GPU-hour (cold starts not included);
  no plan basis uses it, because it is not the price of a machine you hold;
- ``list``: the vendor's price per card (MSRP, a price to distributors, a kit price divided by its cards);
- ``street``: what resellers, retailers or the used market ask per card (press reports included).
"""
HOURLY_KINDS: frozenset[str] = frozenset({"on-demand", "reserved", "spot", "serverless"})
LEGACY_PRICE_KINDS: dict[str, str] = {
    "cloud_on_demand": "on-demand", "cloud_reserved": "reserved", "launch_list": "list", "street": "street",
}
"""Spellings of gpumatch <= 0.x price overlays, still read (``cloud_reserved`` also needs ``term_months``)."""


def _kind(value: object) -> object:
    """Read the old spellings of price kinds (user overlay files written before the rename)."""
    return LEGACY_PRICE_KINDS.get(value, value) if isinstance(value, str) else value


class PriceQuote(_Strict):
    """A dated public price: per card (``usd``) or per GPU-hour (``usd_per_gpu_hour``).

    ``date`` is the date of the figure (when the source says it applied), not the day it was read;
    where only the reading day is known, ``note`` says so. ``term_months`` is the commitment of a
    reserved rate.
    """

    kind: Annotated[PriceKind, BeforeValidator(_kind)]
    usd: float | None = Field(default=None, gt=0, le=10_000_000, allow_inf_nan=False)
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)
    date: dt.date
    source: str
    says: str = Field(min_length=2)
    provider: str = ""
    term_months: int | None = Field(default=None, ge=1, le=120)
    uncertain: bool = False
    note: str = ""

    @model_validator(mode="after")
    def _one_price(self) -> PriceQuote:
        hourly = self.kind in HOURLY_KINDS
        if hourly and self.usd_per_gpu_hour is None:
            raise ValueError(f"{self.kind} quotes need usd_per_gpu_hour")
        if hourly and self.usd is not None:
            raise ValueError(f"{self.kind} quotes give usd_per_gpu_hour, not usd (a price per card)")
        if not hourly and self.usd is None:
            raise ValueError(f"purchase quotes ({self.kind}) need usd (per card)")
        if not hourly and self.usd_per_gpu_hour is not None:
            raise ValueError(f"purchase quotes ({self.kind}) give usd per card, not usd_per_gpu_hour")
        if self.kind == "reserved" and self.term_months is None:
            raise ValueError("reserved quotes need term_months (the commitment, e.g. 12)")
        if self.kind != "reserved" and self.term_months is not None:
            raise ValueError(f"term_months applies to reserved quotes, not {self.kind}")
        return self


class GpuFile(_Strict):
    """One SKU file under catalog/data/gpus/ or $GPUMATCH_HOME/catalog/gpus/."""

    schema_version: Literal[1] = 1
    name: str = Field(min_length=2, max_length=80)
    aliases: list[str] = Field(default_factory=list)
    vendor: Vendor
    segment: Segment
    form_factor: str = Field(min_length=2)
    architecture: str = Field(min_length=2)
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d+$")
    launch_year: int = Field(ge=2010, le=2035)
    memory: Memory
    peak_flops_per_s: PeakFlops
    sparsity_in_headline: bool
    tdp_w: Figure
    interconnect: Interconnect
    ecc: bool
    mig_instances: int = Field(ge=0, le=16, description="max MIG (or partition) instances; 0 = none")
    cooling: Cooling
    prices: list[PriceQuote] = Field(default_factory=list)
    sources: dict[str, Source]
    notes: str = ""

    @field_validator("aliases")
    @classmethod
    def _aliases_nonempty(cls, v: list[str]) -> list[str]:
        if any(not a.strip() for a in v):
            raise ValueError("aliases must be non-empty strings")
        return v

    @model_validator(mode="after")
    def _sources_resolve(self) -> GpuFile:
        for where, fig in self.figures():
            if fig.source not in self.sources:
                raise ValueError(f"{where}: source {fig.source!r} is not in [sources]")
        for i, q in enumerate(self.prices):
            if q.source not in self.sources:
                raise ValueError(f"prices[{i}]: source {q.source!r} is not in [sources]")
        if self.vendor == "nvidia" and self.compute_capability is None:
            raise ValueError("NVIDIA SKUs need compute_capability")
        return self

    def figures(self) -> list[tuple[str, Figure]]:
        """Every sourced number with its dotted field path."""
        out: list[tuple[str, Figure]] = [
            ("memory.capacity_bytes", self.memory.capacity_bytes),
            ("memory.bandwidth_bytes_per_s", self.memory.bandwidth_bytes_per_s),
            ("tdp_w", self.tdp_w),
            ("interconnect.scale_up_bytes_per_s", self.interconnect.scale_up_bytes_per_s),
        ]
        for key in ("reported_bytes", "reserved_bytes", "process_bytes"):
            fig = getattr(self.memory, key)
            if fig is not None:
                out.append((f"memory.{key}", fig))
        if self.memory.l2_cache_bytes is not None:
            out.append(("memory.l2_cache_bytes", self.memory.l2_cache_bytes))
        for key in PeakFlops.model_fields:
            fig = getattr(self.peak_flops_per_s, key)
            if fig is not None:
                out.append((f"peak_flops_per_s.{key}", fig))
        return out


class PriceFile(_Strict):
    """A price overlay: ``[[quotes]]`` each naming a GPU."""

    sources: dict[str, Source]
    quotes: list[PricedGpu]


class PricedGpu(PriceQuote):
    gpu: str = Field(min_length=1)


PriceFile.model_rebuild()
