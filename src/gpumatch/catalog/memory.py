"""Usable GPU memory: the one rule every capacity in gpumatch comes from.

``usable_memory(facts)`` returns the bytes one process is given on a card (the total of
``cudaMemGetInfo`` / ``hipMemGetInfo``, what PyTorch calls "total capacity"), the rule that gave them and
the source of each number. The driver's own total (nvidia-smi "Total") over-states this by what the
driver holds back: nvidia-smi -q lists it as ``FB Memory Usage: Reserved``, and CUDA deviceQuery's
totalGlobalMem equals Total less Reserved within 1 MiB on every pair of captures behind the catalog
(thamada/gls: A10, A40, A100 SXM4 80GB, H100 SXM, H100 NVL, L4, L40S, RTX 3090, 4090, 5090, RTX 6000 Ada;
this project's H200 on driver 580.159.04: Total 143771 - Reserved 616 = 143155 MiB = ``cudaMemGetInfo``
total, tests/data/measurements/2026-12-03-h200-usable-memory.json). Each process's CUDA context (~0.5 GiB)
comes out of this figure too; the estimators count it as overhead (``cuda_context_bytes``).

Four rules, the first that applies:

1. **process** (``rule = "process"``): a public process-side reading of the card, ``memory.process_bytes``:
   CUDA deviceQuery or ``cudaGetDeviceProperties`` totalGlobalMem (PyTorch ``total_memory``), the total of
   ``torch.cuda.mem_get_info`` or of PyTorch's out-of-memory message ("GPU 0 has a total capacity of
   79.25 GiB": two decimals, so +-5 MiB), HIP ``hipMemGetInfo`` / totalGlobalMem for AMD, Gaudi
   ``memory_stats()["Limit"]``. Where several exist, the SKU file keeps the newest driver's and lists the
   others in its note. Reserved memory moves with the driver (H200: 700 MiB on 550.90.12, 614-616 on
   580-590), so any stored figure is good to a few tens of MiB on another driver.
2. **driver-reserved** (``"driver-reserved"``): the driver's total (``memory.reported_bytes``: nvidia-smi,
   rocm-smi / rocminfo, hl-smi) less the Reserved figure of the same kind of reading
   (``memory.reserved_bytes``). No built-in SKU needs it (each with a Reserved line also has a process
   reading); it serves overlays that quote nvidia-smi -q.
3. **driver-fitted** (``"driver-fitted"``): the driver's total less the fitted process reserve (below).
4. **datasheet** (``"datasheet"``), where no reading exists:

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
   c. Driver reserve, DRAM to the driver's total, fitted to the driver readings (``DRIVER_RESERVES``, each
      fraction reserved/DRAM): NVIDIA Hopper HBM 0.4406 % (median of H100 SXM 361/81920, H100 NVL 426/96256,
      H200 613/144384, H20 433/98304 MiB); NVIDIA Blackwell HBM 0.5214 % (B200 961/184320); NVIDIA
      Volta/Ampere HBM 0 (V100 32768, A100 40960 and 81920 MiB on drivers since R470); NVIDIA GDDR5/6/6X
      12 MiB flat (A40, L40S, A10, RTX 4090, RTX 6000 Ada, RTX A6000 all read exactly DRAM less ECC less
      12 MiB; L4 less 6, T4 and RTX 3090 less 0); NVIDIA GDDR7 0.4577 % (mean of RTX 5090 161/32768 and RTX
      PRO 6000 417/98304); AMD 16 MiB per device (MI300X 196592 of 196608, each MI250X GCD 65520 of 65536);
      Intel Gaudi 0 (Gaudi 2 hl-smi 98304 of 98304).
   d. Process reserve, the driver's total to a process's total (``PROCESS_RESERVES``): per vendor, memory
      family and architecture, the median (rounded up) of driver total - process total over the built-in
      SKUs that publish both, in MiB. The data do not support a fraction: the reserve is a few hundred MiB
      on 16 GB and 180 GB cards alike (266-763 MiB on NVIDIA). NVIDIA Volta HBM 266 (V100 32GB); Ampere HBM
      638 (A100 80GB 763, A100 40GB 512); Hopper HBM 593 (H100 SXM 454, H20 591, H100 NVL 595, H200 615);
      Blackwell HBM 717 (B200); GDDR5/6/6X 490 (T4 266, RTX 4090 354, RTX 3090 422, L40S 479, RTX 6000 Ada
      500, A10 526, L4 556, A40 665); GDDR7 563 (RTX 5090 487, RTX PRO 6000 638); AMD 0 (HIP's total equals
      rocm-smi's VRAM total / rocminfo's pool on MI300X, 196592 MiB both, and MI250X, 65520 MiB per GCD
      both); Intel Gaudi 1413 (Gaudi 2: hl-smi 98304 MiB, PyTorch ``memory_stats`` Limit 94.62 GiB; one
      reading, unverified on Gaudi 3). The datasheet rule lands within 256 MiB of every process reading
      (worst: T4, 236 MiB under).

   An architecture not listed takes the largest reserve of its vendor and memory family. The result is
   rounded down to whole MiB, as drivers print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from gpumatch.catalog.schema import GpuFile
from gpumatch.units import MIB

R = TypeVar("R", bound=tuple[Any, ...])

Rule = Literal["process", "driver-reserved", "driver-fitted", "datasheet"]
RULE_TEXT: dict[str, str] = {
    "process": "process-side reading",
    "driver-reserved": "driver total less its Reserved",
    "driver-fitted": "driver total less the fitted process reserve",
    "datasheet": "datasheet rule",
}
"""How ``gpus show`` names each rule."""

# (vendor, memory family, architecture or "*") -> (fraction of DRAM, flat MiB, basis): DRAM to the driver's total
DRIVER_RESERVES: dict[tuple[str, str, str], tuple[float, int, str]] = {
    ("nvidia", "hbm", "Volta"): (0.0, 0, "V100 32768 MiB of 32768"),
    ("nvidia", "hbm", "Ampere"): (0.0, 0, "A100 40960 and 81920 MiB of the same, drivers R470+"),
    ("nvidia", "hbm", "Hopper"): (0.004406, 0, "median of H100 SXM, H100 NVL, H200 and H20 readings"),
    ("nvidia", "hbm", "Blackwell"): (0.005214, 0, "B200 183359 MiB of 184320"),
    ("nvidia", "gddr", "*"): (0.0, 12, "A40, L40S, A10, RTX 4090, RTX 6000 Ada read DRAM (less ECC) less 12 MiB"),
    ("nvidia", "gddr7", "*"): (0.004577, 0, "mean of RTX 5090 32607/32768 and RTX PRO 6000 97887/98304 MiB"),
    ("amd", "hbm", "*"): (0.0, 16, "MI300X 196592 MiB of 196608; MI250X GCD 65520 of 65536"),
    ("intel", "hbm", "*"): (0.0, 0, "Gaudi 2 hl-smi 98304 MiB of 98304"),
}

# (vendor, memory family, architecture or "*") -> (MiB, basis): the driver's total to one process's total
PROCESS_RESERVES: dict[tuple[str, str, str], tuple[int, str]] = {
    ("nvidia", "hbm", "Volta"): (266, "V100 32GB 32768 - 32502 MiB; one reading"),
    ("nvidia", "hbm", "Ampere"): (638, "median of A100 SXM4 80GB 763 and A100 40GB 512 MiB"),
    ("nvidia", "hbm", "Hopper"): (593, "median of H100 SXM 454, H20 591, H100 NVL 595, H200 615 MiB"),
    ("nvidia", "hbm", "Blackwell"): (717, "B200 183359 - 182642 MiB; one reading"),
    ("nvidia", "gddr", "*"): (490, "median of 8 GDDR6/6X cards, 266 (T4) to 665 (A40) MiB"),
    ("nvidia", "gddr7", "*"): (563, "median of RTX 5090 487 and RTX PRO 6000 638 MiB"),
    ("amd", "hbm", "*"): (0, "HIP's total = the VRAM total on MI300X and MI250X"),
    ("intel", "hbm", "*"): (1413, "Gaudi 2 hl-smi 98304 MiB - memory_stats Limit 94.62 GiB; one reading"),
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
    reserved_bytes: int | None = None
    reserved_says: str = ""
    reserved_url: str = ""
    process_bytes: int | None = None
    process_by: str = ""
    process_driver: str = ""
    process_says: str = ""
    process_url: str = ""
    process_note: str = ""


@dataclass(frozen=True)
class UsableMemory:
    """Usable bytes and how they were obtained. ``steps`` lists the rule's arithmetic in words.

    ``driver_total_bytes`` is the driver's total (read, or by the datasheet rule); ``held_back_bytes`` is
    what the driver keeps from processes (its total less ``usable_bytes``); ``reserve_bytes`` is the
    datasheet rule's DRAM-to-driver-total reserve.
    """

    usable_bytes: int
    rule: Rule
    source_url: str
    says: str
    summary: str
    dram_bytes: int
    ecc_on: bool
    ecc_bytes: int = 0
    reserve_bytes: int = 0
    driver_total_bytes: int | None = None
    held_back_bytes: int | None = None
    driver: str = ""
    tool: str = ""
    steps: tuple[str, ...] = ()

    @property
    def rule_text(self) -> str:
        """'process-side reading', 'driver total less its Reserved', ... (:data:`RULE_TEXT`)."""
        return RULE_TEXT[self.rule]

    def to_dict(self) -> dict[str, object]:
        """The JSON of ``gpus show`` / ``gpus list`` (key ``memory_usable``)."""
        return {
            "usable_bytes": self.usable_bytes,
            "rule": self.rule,
            "rule_text": self.rule_text,
            "summary": self.summary,
            "source_url": self.source_url,
            "says": self.says,
            "tool": self.tool,
            "driver": self.driver,
            "dram_bytes": self.dram_bytes,
            "ecc_on": self.ecc_on,
            "ecc_bytes": self.ecc_bytes,
            "reserve_bytes": self.reserve_bytes,
            "driver_total_bytes": self.driver_total_bytes,
            "held_back_bytes": self.held_back_bytes,
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


def _nearest(table: Mapping[tuple[str, str, str], R], vendor: str, family: str,
             architecture: str) -> tuple[R, bool]:
    """(entry, exact) of a reserve table for a card: its own (vendor, memory family, architecture or "*") entry,
    else the largest of its vendor and memory family, else of its vendor, else of all (compared on the figures,
    the basis text last in each entry left out)."""
    for arch in (architecture, "*"):
        if (vendor, family, arch) in table:
            return table[(vendor, family, arch)], True
    same = [v for (ven, fam, _), v in table.items() if ven == vendor and fam == family]
    if not same:
        same = [v for (ven, _, _), v in table.items() if ven == vendor] or list(table.values())
    return max(same, key=lambda v: v[:-1]), False


def reserve_for(vendor: str, family: str, architecture: str) -> tuple[float, int, str]:
    """(fraction, flat MiB, basis) of the DRAM-to-driver-total reserve (:func:`_nearest`)."""
    (fraction, flat, basis), exact = _nearest(DRIVER_RESERVES, vendor, family, architecture)
    return fraction, flat, basis if exact else f"no reading for {architecture}: the largest {vendor} reserve ({basis})"


def process_reserve_for(vendor: str, family: str, architecture: str) -> tuple[int, str]:
    """(MiB, basis) of the driver-total-to-process reserve (:func:`_nearest`)."""
    (mib, basis), exact = _nearest(PROCESS_RESERVES, vendor, family, architecture)
    return mib, basis if exact else f"no reading for {architecture}: the largest {vendor} process reserve ({basis})"


def usable_memory(facts: MemoryFacts) -> UsableMemory:
    """Bytes one process is given on this card, by the first rule that applies (module docstring)."""
    dram_mib = round(facts.datasheet_bytes / 1e9 * 1024)
    ecc_on = ecc_on_by_default(facts)
    if facts.process_bytes is not None:
        return _from_process(facts, dram_mib, ecc_on)
    if facts.reported_bytes is not None:
        return _from_driver(facts, dram_mib, ecc_on)
    return _from_datasheet(facts, dram_mib, ecc_on)


def _mib(n: int) -> str:
    """'81106 MiB' for whole MiB, else the bytes."""
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n} B"


def _from_process(facts: MemoryFacts, dram_mib: int, ecc_on: bool) -> UsableMemory:
    assert facts.process_bytes is not None
    tool = facts.process_by or "process"
    usable = facts.process_bytes // MIB * MIB
    driver = f", driver {facts.process_driver}" if facts.process_driver else ""
    steps = [f"{tool}: a process is given {_mib(usable)}{driver}"
             + ("" if usable == facts.process_bytes else f" ({facts.process_bytes} B, rounded down)")]
    held = None
    if facts.reported_bytes is not None:
        held = facts.reported_bytes - usable
        total = f"the driver's total ({facts.reported_by or 'driver'}) is {_mib(facts.reported_bytes)}"
        if held == 0:
            steps.append(f"{total}: the same figure")
        else:
            what = " (nvidia-smi -q lists it as 'Reserved')" if facts.vendor == "nvidia" else ""
            steps.append(f"{total}: {held / MIB:.0f} MiB of it is held back from processes{what}")
    if facts.process_note:
        steps.append(facts.process_note)
    return UsableMemory(
        usable_bytes=usable,
        rule="process",
        source_url=facts.process_url,
        says=facts.process_says,
        summary=f"{tool} {_mib(usable)}{driver}",
        dram_bytes=dram_mib * MIB,
        ecc_on=ecc_on,
        driver_total_bytes=facts.reported_bytes,
        held_back_bytes=held,
        driver=facts.process_driver,
        tool=tool,
        steps=tuple(steps),
    )


def _from_driver(facts: MemoryFacts, dram_mib: int, ecc_on: bool) -> UsableMemory:
    assert facts.reported_bytes is not None
    tool = facts.reported_by or "driver"
    total = facts.reported_bytes
    driver = f", driver {facts.reported_driver}" if facts.reported_driver else ""
    steps = [f"{tool} total {_mib(total)}{driver}"]
    rule: Rule
    if facts.reserved_bytes is not None:
        held, rule = facts.reserved_bytes, "driver-reserved"
        summary = f"{tool} {_mib(total)} - Reserved {_mib(held)}{driver}"
        steps.append(f"less the Reserved {_mib(held)} the same reading lists")
    else:
        family = memory_family(facts.memory_type)
        held_mib, basis = process_reserve_for(facts.vendor, family, facts.architecture)
        held, rule = held_mib * MIB, "driver-fitted"
        summary = f"{tool} {_mib(total)} - fitted reserve {held_mib} MiB{driver}"
        steps.append(f"less the fitted process reserve {held_mib} MiB ({basis})")
    if facts.reported_note:
        steps.append(facts.reported_note)
    return UsableMemory(
        usable_bytes=total - held,
        rule=rule,
        source_url=facts.reported_url,
        says=facts.reported_says,
        summary=summary,
        dram_bytes=dram_mib * MIB,
        ecc_on=ecc_on,
        driver_total_bytes=total,
        held_back_bytes=held,
        driver=facts.reported_driver,
        tool=tool,
        steps=tuple(steps),
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
    driver_total_mib = after_ecc - reserve_mib
    steps.append(f"driver reserve {fraction * 100:.4g} % + {flat_mib} MiB = {reserve_mib} MiB ({basis}): "
                 f"driver total {driver_total_mib} MiB")
    held_mib, held_basis = process_reserve_for(facts.vendor, family, facts.architecture)
    steps.append(f"process reserve {held_mib} MiB ({held_basis})")
    usable_mib = driver_total_mib - held_mib
    return UsableMemory(
        usable_bytes=usable_mib * MIB,
        rule="datasheet",
        source_url=facts.datasheet_url,
        says=facts.datasheet_says,
        summary=f"datasheet {gb:g} GB as {dram_mib} MiB" + (f" - ECC {ecc_mib}" if ecc_mib else "")
        + f" - driver reserve {reserve_mib} - process reserve {held_mib} MiB",
        dram_bytes=dram_mib * MIB,
        ecc_on=ecc_on,
        ecc_bytes=ecc_mib * MIB,
        reserve_bytes=reserve_mib * MIB,
        driver_total_bytes=driver_total_mib * MIB,
        held_back_bytes=held_mib * MIB,
        steps=tuple(steps),
    )


def facts_from_file(f: GpuFile) -> MemoryFacts:
    """The rule's inputs from one validated SKU file."""
    m = f.memory
    rep, res, proc = m.reported_bytes, m.reserved_bytes, m.process_bytes
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
        reserved_bytes=None if res is None else int(res.value),
        reserved_says="" if res is None else res.says,
        reserved_url="" if res is None else f.sources[res.source].url,
        process_bytes=None if proc is None else int(proc.value),
        process_by=m.process_by,
        process_driver=m.process_driver,
        process_says="" if proc is None else proc.says,
        process_url="" if proc is None else f.sources[proc.source].url,
        process_note="" if proc is None else proc.note,
    )
