"""Usable GPU memory: the one rule every capacity in gpumatch comes from.

``usable_memory(facts)`` returns the bytes one process can address on a card, the rule that gave
them and the source of each number. Two rules, in this order:

1. **reading** (``rule = "reading"``). Where a public reading of the driver's total exists (nvidia-smi
   ``memory.total`` / the ``MiB`` after the slash, rocm-smi / amd-smi / rocminfo / HIP ``totalGlobalMem``
   for AMD, hl-smi for Intel Gaudi), that figure is the capacity: ``memory.reported_bytes`` in the SKU
   file, with its URL, the quoted words and the driver version.
2. **datasheet** (``rule = "datasheet"``) where no reading exists:

   a. DRAM = the datasheet "GB" read as binary GiB. Vendors size memory in powers of two and print
      GiB as "GB": an "80 GB" HBM card has 80 x 2**30 bytes of DRAM (nvidia-smi shows A100 80GB as
      81920 MiB, Gaudi 2 "96 GB" as 98304 MiB, RTX 4090 "24576 MB" as 24576 MiB less 12).
   b. ECC carve-out: GDDR5/GDDR6/GDDR6X with ECC enabled keep the check bits in the same DRAM and lose
      1/16 (A40 and L40S: 46068 MiB of 49152; A10 23028 and L4 23034 of 24576; T4 15360 of 16384; RTX
      A6000 with ECC on: 46068). HBM carries ECC in its own bits: no loss (A100 PCIe reads 40960 MiB
      with ECC on and off). GDDR7 (Blackwell): no carve-out assumed, because the two GDDR7 readings
      (RTX 5090, RTX PRO 6000 Workstation) sit 0.4-0.5 % under the DRAM, not 1/16 (see the reserve).
      ECC is taken as on by default for datacenter cards that have it and off for workstation and
      consumer cards: NVIDIA ships RTX A6000 / RTX 6000 Ada / RTX PRO 6000 Workstation with ECC
      switchable and the public readings of those cards (RTX 6000 Ada 49140 MiB, "ECC Mode: Disabled")
      show it off; a SKU file may override with ``memory.ecc_default``.
   c. Driver reserve, fitted to the readings (each fraction is reserved/DRAM, the list in RESERVES):
      NVIDIA Hopper HBM 0.4406 % (median of H100 SXM 361/81920, H100 NVL 426/96256, H200 613/144384,
      H20 433/98304 MiB); NVIDIA Blackwell HBM 0.5214 % (B200 961/184320); NVIDIA Volta/Ampere HBM 0
      (V100 32768, A100 40960 and 81920 MiB on drivers since R470); NVIDIA GDDR5/6/6X 12 MiB flat (A40,
      L40S, A10, RTX 4090, RTX 6000 Ada, RTX A6000 all read exactly DRAM less ECC less 12 MiB; L4 less
      6, T4 and RTX 3090 less 0); NVIDIA GDDR7 0.4577 % (mean of RTX 5090 161/32768 and RTX PRO 6000
      417/98304); AMD 16 MiB per device (MI300X 196592 of 196608, each MI250X GCD 65520 of 65536);
      Intel Gaudi 0 (Gaudi 2 hl-smi 98304 of 98304). An architecture not listed takes the largest
      fraction of its vendor and memory family. The result is rounded down to whole MiB, as drivers print.

What this figure is not: the driver total still holds memory a process cannot allocate. nvidia-smi
reports it as ``Reserved`` (R510 and later: 454-763 MiB on the readings in the SKU files' notes; 616 MiB
on this project's H200, where ``cudaMemGetInfo`` total = total - reserved, tests/data/measurements/
2026-12-03-h200-usable-memory.json), and each process's CUDA context takes ~0.5 GiB more. The estimators
count the context as overhead; the reserve is inside this figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpumatch.catalog.schema import GpuFile

MIB = 2**20
GIB = 2**30
Rule = Literal["reading", "datasheet"]

# (vendor, memory family, architecture or "*") -> (fraction of DRAM, flat MiB, basis)
RESERVES: dict[tuple[str, str, str], tuple[float, int, str]] = {
    ("nvidia", "hbm", "Volta"): (0.0, 0, "V100 32768 MiB of 32768"),
    ("nvidia", "hbm", "Ampere"): (0.0, 0, "A100 40960 and 81920 MiB of the same, drivers R470+"),
    ("nvidia", "hbm", "Hopper"): (0.004406, 0, "median of H100 SXM, H100 NVL, H200 and H20 readings"),
    ("nvidia", "hbm", "Blackwell"): (0.005214, 0, "B200 183359 MiB of 184320"),
    ("nvidia", "gddr", "*"): (0.0, 12, "A40, L40S, A10, RTX 4090, RTX 6000 Ada read DRAM (less ECC) less 12 MiB"),
    ("nvidia", "gddr7", "*"): (0.004577, 0, "mean of RTX 5090 32607/32768 and RTX PRO 6000 97887/98304 MiB"),
    ("amd", "hbm", "*"): (0.0, 16, "MI300X 196592 MiB of 196608; MI250X GCD 65520 of 65536"),
    ("intel", "hbm", "*"): (0.0, 0, "Gaudi 2 hl-smi 98304 MiB of 98304"),
}


@dataclass(frozen=True)
class MemoryFacts:
    """What the rule reads about one SKU (from its data file). Bytes are SI as stored there."""

    vendor: str
    segment: str
    architecture: str
    memory_type: str
    ecc: bool
    ecc_default: str | None
    datasheet_bytes: float
    datasheet_says: str
    datasheet_url: str
    reported_bytes: int | None = None
    reported_by: str = ""
    reported_driver: str = ""
    reported_says: str = ""
    reported_url: str = ""
    reported_note: str = ""


@dataclass(frozen=True)
class UsableMemory:
    """Usable bytes and how they were obtained. ``steps`` lists the datasheet rule's arithmetic in words."""

    usable_bytes: int
    rule: Rule
    source_url: str
    says: str
    summary: str
    dram_bytes: int
    ecc_on: bool
    ecc_bytes: int = 0
    reserve_bytes: int = 0
    driver: str = ""
    tool: str = ""
    steps: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The JSON of ``gpus show`` / ``gpus list`` (key ``memory_usable``)."""
        return {
            "usable_bytes": self.usable_bytes,
            "rule": self.rule,
            "summary": self.summary,
            "source_url": self.source_url,
            "says": self.says,
            "tool": self.tool,
            "driver": self.driver,
            "dram_bytes": self.dram_bytes,
            "ecc_on": self.ecc_on,
            "ecc_bytes": self.ecc_bytes,
            "reserve_bytes": self.reserve_bytes,
            "steps": list(self.steps),
        }


def memory_family(memory_type: str) -> str:
    """'hbm' (HBM2/2e/3/3e), 'gddr7', or 'gddr' (GDDR5/6/6X); from the SKU's memory type string."""
    t = memory_type.strip().lower()
    if t.startswith("hbm"):
        return "hbm"
    if t.startswith("gddr7"):
        return "gddr7"
    if t.startswith("gddr"):
        return "gddr"
    return "hbm"


def ecc_on_by_default(facts: MemoryFacts) -> bool:
    """The SKU file's ``ecc_default`` if set, else on for datacenter cards with ECC, off for the rest."""
    if facts.ecc_default is not None:
        return facts.ecc_default == "on"
    return facts.ecc and facts.segment == "datacenter"


def reserve_for(vendor: str, family: str, architecture: str) -> tuple[float, int, str]:
    """(fraction, flat MiB, basis) of the driver reserve; unknown architectures take the vendor's largest."""
    for arch in (architecture, "*"):
        if (vendor, family, arch) in RESERVES:
            return RESERVES[(vendor, family, arch)]
    same = [v for (ven, fam, _), v in RESERVES.items() if ven == vendor and fam == family]
    if not same:
        same = [v for (ven, _, _), v in RESERVES.items() if ven == vendor] or list(RESERVES.values())
    worst = max(same, key=lambda v: (v[0], v[1]))
    return worst[0], worst[1], f"no reading for {architecture}: the largest {vendor} reserve ({worst[2]})"


def usable_memory(facts: MemoryFacts) -> UsableMemory:
    """Bytes one process can address on this card, by the reading or the datasheet rule (module docstring)."""
    dram_mib = round(facts.datasheet_bytes / 1e9 * 1024)
    ecc_on = ecc_on_by_default(facts)
    if facts.reported_bytes is not None:
        return _from_reading(facts, dram_mib, ecc_on)
    return _from_datasheet(facts, dram_mib, ecc_on)


def _from_reading(facts: MemoryFacts, dram_mib: int, ecc_on: bool) -> UsableMemory:
    assert facts.reported_bytes is not None
    tool = facts.reported_by or "driver"
    mib = facts.reported_bytes / MIB
    shown = f"{mib:.0f} MiB" if mib == int(mib) else f"{facts.reported_bytes} B"
    driver = f", driver {facts.reported_driver}" if facts.reported_driver else ""
    return UsableMemory(
        usable_bytes=facts.reported_bytes,
        rule="reading",
        source_url=facts.reported_url,
        says=facts.reported_says,
        summary=f"{tool} {shown}{driver}",
        dram_bytes=dram_mib * MIB,
        ecc_on=ecc_on,
        driver=facts.reported_driver,
        tool=tool,
        steps=(f"{tool} total {shown}{driver}",) + ((facts.reported_note,) if facts.reported_note else ()),
    )


def _from_datasheet(facts: MemoryFacts, dram_mib: int, ecc_on: bool) -> UsableMemory:
    family = memory_family(facts.memory_type)
    gb = facts.datasheet_bytes / 1e9
    steps = [f"datasheet {gb:g} GB {facts.memory_type} read as {gb:g} GiB = {dram_mib} MiB"]
    ecc_mib = 0
    if ecc_on and family == "gddr":
        ecc_mib = dram_mib // 16
        steps.append(f"ECC on by default on GDDR: less 1/16 = {ecc_mib} MiB")
    elif family == "gddr" and facts.ecc:
        steps.append("ECC off by default (workstation/consumer card): no carve-out; with ECC on, 1/16 less")
    after_ecc = dram_mib - ecc_mib
    fraction, flat_mib, basis = reserve_for(facts.vendor, family, facts.architecture)
    reserve_mib = after_ecc - math.floor(after_ecc * (1.0 - fraction)) + flat_mib
    steps.append(f"driver reserve {fraction * 100:.4g} % + {flat_mib} MiB = {reserve_mib} MiB ({basis})")
    usable_mib = after_ecc - reserve_mib
    return UsableMemory(
        usable_bytes=usable_mib * MIB,
        rule="datasheet",
        source_url=facts.datasheet_url,
        says=facts.datasheet_says,
        summary=f"datasheet {gb:g} GB as {dram_mib} MiB" + (f" - ECC {ecc_mib}" if ecc_mib else "")
        + f" - reserve {reserve_mib} MiB",
        dram_bytes=dram_mib * MIB,
        ecc_on=ecc_on,
        ecc_bytes=ecc_mib * MIB,
        reserve_bytes=reserve_mib * MIB,
        steps=tuple(steps),
    )


def facts_from_file(f: GpuFile) -> MemoryFacts:
    """The rule's inputs from one validated SKU file."""
    m = f.memory
    rep = m.reported_bytes
    return MemoryFacts(
        vendor=f.vendor,
        segment=f.segment,
        architecture=f.architecture,
        memory_type=m.type,
        ecc=f.ecc,
        ecc_default=m.ecc_default,
        datasheet_bytes=m.capacity_bytes.value,
        datasheet_says=m.capacity_bytes.says,
        datasheet_url=f.sources[m.capacity_bytes.source].url,
        reported_bytes=None if rep is None else int(rep.value),
        reported_by=m.reported_by,
        reported_driver=m.reported_driver,
        reported_says="" if rep is None else rep.says,
        reported_url="" if rep is None else f.sources[rep.source].url,
        reported_note="" if rep is None else rep.note,
    )
