"""The usable-memory rule (gpumatch.catalog.memory) on synthetic SKUs: one case per branch of the rule.

Expected values are worked out by hand from the rule as the module docstring states it (a process-side reading
first; else the driver's total less its Reserved, else less the fitted process reserve; else DRAM = datasheet
"GB" as GiB, GDDR5/6/6X with ECC on lose 1/16, the driver reserve of the vendor, memory family and architecture,
then the process reserve; whole MiB), not read back from the implementation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from gpumatch.catalog.memory import (
    MemoryFacts,
    ecc_on_by_default,
    memory_family,
    process_reserve_for,
    usable_memory,
)
from gpumatch.catalog.schema import Memory
from gpumatch.units import MIB

BASE = MemoryFacts(
    vendor="nvidia", segment="datacenter", architecture="Hopper", memory_type="HBM3", ecc=True, ecc_default=None,
    datasheet_bytes=80e9, datasheet_says="80 GB", datasheet_url="https://example.com/sheet",
)
SMI = replace(BASE, reported_bytes=81559 * MIB, reported_by="nvidia-smi", reported_driver="590.48.01",
              reported_url="https://example.com/smi", reported_says="0MiB / 81559MiB")


def mib(facts: MemoryFacts) -> int:
    u = usable_memory(facts)
    assert u.usable_bytes % MIB == 0
    return u.usable_bytes // MIB


def test_a_process_side_reading_wins_over_the_driver_total_and_the_datasheet() -> None:
    f = replace(SMI, reserved_bytes=479 * MIB, process_bytes=81105 * MIB, process_by="CUDA deviceQuery",
                process_driver="565.57.01", process_url="https://example.com/dq", process_says="81106 MBytes")
    u = usable_memory(f)
    assert (u.rule, u.usable_bytes, u.source_url) == ("process", 81105 * MIB, "https://example.com/dq")
    assert u.summary == "CUDA deviceQuery 81105 MiB, driver 565.57.01" and u.rule_text == "process-side reading"
    assert (u.driver_total_bytes, u.held_back_bytes) == (81559 * MIB, 454 * MIB)
    assert "454 MiB of it is held back" in " ".join(u.steps)


def test_a_process_reading_in_bytes_is_rounded_down_to_whole_mib() -> None:
    u = usable_memory(replace(BASE, process_bytes=85045477376, process_by="CUDA deviceQuery"))  # 81105.69 MiB
    assert u.usable_bytes == 81105 * MIB and u.driver_total_bytes is None and u.held_back_bytes is None
    assert "85045477376 B, rounded down" in u.steps[0]


def test_amd_process_total_equal_to_the_driver_total_holds_nothing_back() -> None:
    amd = replace(BASE, vendor="amd", architecture="CDNA 3", reported_bytes=196592 * MIB, reported_by="rocm-smi",
                  process_bytes=196592 * MIB, process_by="HIP deviceQuery")
    u = usable_memory(amd)
    assert u.held_back_bytes == 0 and "the same figure" in " ".join(u.steps)


def test_driver_total_less_its_reserved() -> None:
    # this project's H200: nvidia-smi Total 143771, Reserved 616 -> 143155 MiB = cudaMemGetInfo's total
    u = usable_memory(replace(SMI, reported_bytes=143771 * MIB, reserved_bytes=616 * MIB))
    assert (u.rule, u.usable_bytes, u.held_back_bytes) == ("driver-reserved", 143155 * MIB, 616 * MIB)
    assert "Reserved 616 MiB" in u.summary and u.source_url == "https://example.com/smi"


def test_driver_total_without_reserved_less_the_fitted_reserve() -> None:
    u = usable_memory(SMI)
    assert (u.rule, u.usable_bytes) == ("driver-fitted", (81559 - 593) * MIB)  # Hopper: 593 MiB
    assert u.summary == "nvidia-smi 81559 MiB - fitted reserve 593 MiB, driver 590.48.01"


def test_hopper_hbm_is_binary_gib_less_the_driver_and_the_process_reserve() -> None:
    # 81920 MiB * (1 - 0.004406) = 81559.06 -> 81559 (nvidia-smi's H100 80GB total), less 593 -> 80966
    u = usable_memory(BASE)
    assert u.rule == "datasheet" and u.usable_bytes == 80966 * MIB
    assert (u.ecc_bytes, u.reserve_bytes, u.driver_total_bytes, u.held_back_bytes) == (
        0, 361 * MIB, 81559 * MIB, 593 * MIB)


def test_ampere_and_volta_hbm() -> None:
    assert mib(replace(BASE, architecture="Ampere", memory_type="HBM2e")) == 81920 - 638
    assert mib(replace(BASE, architecture="Volta", memory_type="HBM2", datasheet_bytes=32e9)) == 32768 - 266


def test_blackwell_hbm() -> None:
    # 184320 * (1 - 0.005214) = 183358.96 -> 183358 (B200 reads 183359), less 717 -> 182641 (PyTorch: 182642)
    assert mib(replace(BASE, architecture="Blackwell", memory_type="HBM3e", datasheet_bytes=180e9)) == 182641


def test_datacenter_gddr6_loses_one_sixteenth_to_ecc_then_12_mib_then_the_gddr_reserve() -> None:
    f = replace(BASE, architecture="Ada Lovelace", memory_type="GDDR6", datasheet_bytes=48e9)
    assert mib(f) == 49152 - 3072 - 12 - 490 == 45578  # driver total 46068 (A40 / L40S), L40S process 45589
    assert usable_memory(f).ecc_bytes == 3072 * MIB


def test_workstation_gddr6_keeps_ecc_off_unless_the_file_says_on() -> None:
    ws = replace(BASE, segment="workstation", architecture="Ampere", memory_type="GDDR6 (ECC)", datasheet_bytes=48e9)
    assert mib(ws) == 49140 - 490
    assert mib(replace(ws, ecc_default="on")) == 46068 - 490
    assert mib(replace(BASE, memory_type="GDDR6", datasheet_bytes=48e9, ecc_default="off")) == 49140 - 490


def test_consumer_card_without_ecc() -> None:
    f = replace(BASE, segment="consumer", architecture="Ada Lovelace", memory_type="GDDR6X", ecc=False,
                datasheet_bytes=24e9)
    assert mib(f) == 24576 - 12 - 490  # RTX 4090 reads 24564, deviceQuery 24210
    assert not usable_memory(f).ecc_on


def test_gddr7_has_no_ecc_carveout_and_a_fractional_reserve() -> None:
    f = replace(BASE, architecture="Blackwell", memory_type="GDDR7 (ECC)", datasheet_bytes=96e9)
    # 98304 * (1 - 0.004577) = 97854.07 -> 97854, ECC on (datacenter) and still no 1/16; less 563
    assert mib(f) == 97854 - 563
    assert usable_memory(f).ecc_on and usable_memory(f).ecc_bytes == 0


def test_amd_and_intel() -> None:
    amd = replace(BASE, vendor="amd", architecture="CDNA 3", memory_type="HBM3E", datasheet_bytes=256e9)
    assert mib(amd) == 262144 - 16
    gaudi = replace(BASE, vendor="intel", architecture="Gaudi 3", memory_type="HBM2e", datasheet_bytes=128e9)
    assert mib(gaudi) == 131072 - 1413


def test_an_unknown_architecture_takes_the_largest_reserves_of_its_vendor_and_family() -> None:
    f = replace(BASE, architecture="Rubin", memory_type="HBM4", datasheet_bytes=288e9)
    u = usable_memory(f)
    # the Blackwell fraction is the largest NVIDIA HBM one: 294912 * (1 - 0.005214) = 293374.3 -> 293374;
    # the Blackwell process reserve (717) is the largest NVIDIA HBM one
    assert u.usable_bytes // MIB == 293374 - 717
    assert " ".join(u.steps).count("no reading for Rubin") == 2


def test_the_process_reserve_falls_back_to_the_vendor_then_to_all() -> None:
    assert process_reserve_for("intel", "gddr", "Xe")[0] == 1413  # no Intel GDDR: Intel's largest
    assert process_reserve_for("acme", "hbm", "X1")[0] == 1413  # unknown vendor: the largest of all


@pytest.mark.parametrize(("text", "family"), [("HBM2e", "hbm"), ("HBM3E", "hbm"), ("GDDR6 (ECC)", "gddr"),
                                              ("GDDR6X", "gddr"), ("GDDR7", "gddr7"), ("gddr5", "gddr")])
def test_memory_family(text: str, family: str) -> None:
    assert memory_family(text) == family


def test_ecc_default_by_segment() -> None:
    assert ecc_on_by_default(BASE)
    assert not ecc_on_by_default(replace(BASE, segment="workstation"))
    assert not ecc_on_by_default(replace(BASE, ecc=False))


def test_to_dict_names_rule_and_source() -> None:
    d = usable_memory(BASE).to_dict()
    assert d["rule"] == "datasheet" and d["usable_bytes"] == 80966 * MIB and d["source_url"].startswith("https://")
    assert d["rule_text"] == "datasheet rule" and d["held_back_bytes"] == 593 * MIB
    assert d["steps"] and all(isinstance(s, str) for s in d["steps"])


# ---- the data-file fields (catalog.schema.Memory) ------------------------------------------------------------

def _fig(mib_: float) -> dict[str, Any]:
    return {"value": mib_ * MIB, "source": "s", "says": "quoted"}


def _memory(**extra: Any) -> Memory:
    return Memory.model_validate({"capacity_bytes": {"value": 80e9, "source": "s", "says": "80 GB"}, "type": "HBM3",
                                  "bandwidth_bytes_per_s": {"value": 3.35e12, "source": "s", "says": "3.35 TB/s"},
                                  **extra})


def test_the_schema_accepts_consistent_readings() -> None:
    m = _memory(reported_bytes=_fig(81559), reserved_bytes=_fig(454), process_bytes=_fig(81105),
                process_by="CUDA deviceQuery", process_driver="565.57.01")
    assert m.process_bytes is not None and m.process_bytes.value == 81105 * MIB


@pytest.mark.parametrize(("extra", "words"), [
    ({"reserved_bytes": _fig(454)}, "needs memory.reported_bytes"),
    ({"reported_bytes": _fig(81559), "reserved_bytes": _fig(81559)}, "smaller than"),
    ({"reported_bytes": _fig(81559), "process_bytes": _fig(81560)}, "cannot exceed"),
    ({"process_bytes": _fig(0)}, "greater than 0"),
])
def test_the_schema_refuses_inconsistent_readings(extra: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        _memory(**extra)
