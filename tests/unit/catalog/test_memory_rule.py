"""The usable-memory rule (gpumatch.catalog.memory) on synthetic SKUs: one case per branch of the rule.

Expected values are worked out by hand from the rule as the module docstring states it (DRAM = datasheet
"GB" as GiB; GDDR5/6/6X with ECC on lose 1/16; the driver reserve of the vendor, memory family and
architecture; whole MiB), not read back from the implementation.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpumatch.catalog.memory import MIB, MemoryFacts, ecc_on_by_default, memory_family, usable_memory

BASE = MemoryFacts(
    vendor="nvidia", segment="datacenter", architecture="Hopper", memory_type="HBM3", ecc=True, ecc_default=None,
    datasheet_bytes=80e9, datasheet_says="80 GB", datasheet_url="https://example.com/sheet",
)


def mib(facts: MemoryFacts) -> int:
    u = usable_memory(facts)
    assert u.usable_bytes % MIB == 0
    return u.usable_bytes // MIB


def test_a_reading_wins_over_the_datasheet() -> None:
    f = replace(BASE, reported_bytes=81559 * MIB, reported_by="nvidia-smi", reported_driver="590.48.01",
                reported_url="https://example.com/smi", reported_says="0MiB / 81559MiB")
    u = usable_memory(f)
    assert (u.rule, u.usable_bytes, u.source_url) == ("reading", 81559 * MIB, "https://example.com/smi")
    assert u.summary == "nvidia-smi 81559 MiB, driver 590.48.01"
    assert u.dram_bytes == 81920 * MIB


def test_hopper_hbm_is_binary_gib_less_the_hopper_reserve() -> None:
    # 81920 MiB * (1 - 0.004406) = 81559.06 -> 81559 MiB: what nvidia-smi prints for an H100 80GB
    assert mib(BASE) == 81559
    u = usable_memory(BASE)
    assert u.rule == "datasheet" and u.ecc_bytes == 0 and u.reserve_bytes == 361 * MIB


def test_ampere_and_volta_hbm_keep_every_mib() -> None:
    assert mib(replace(BASE, architecture="Ampere", memory_type="HBM2e")) == 81920
    assert mib(replace(BASE, architecture="Volta", memory_type="HBM2", datasheet_bytes=32e9)) == 32768


def test_blackwell_hbm_reserve() -> None:
    # 184320 * (1 - 0.005214) = 183358.96 -> 183358 MiB (B200 reads 183359)
    assert mib(replace(BASE, architecture="Blackwell", memory_type="HBM3e", datasheet_bytes=180e9)) == 183358


def test_datacenter_gddr6_loses_one_sixteenth_to_ecc_then_12_mib() -> None:
    f = replace(BASE, architecture="Ada Lovelace", memory_type="GDDR6", datasheet_bytes=48e9)
    assert mib(f) == 49152 - 3072 - 12 == 46068  # the A40 / L40S reading
    assert usable_memory(f).ecc_bytes == 3072 * MIB


def test_workstation_gddr6_keeps_ecc_off_unless_the_file_says_on() -> None:
    ws = replace(BASE, segment="workstation", architecture="Ampere", memory_type="GDDR6 (ECC)", datasheet_bytes=48e9)
    assert mib(ws) == 49140
    assert mib(replace(ws, ecc_default="on")) == 46068
    assert mib(replace(BASE, memory_type="GDDR6", datasheet_bytes=48e9, ecc_default="off")) == 49140


def test_consumer_card_without_ecc() -> None:
    f = replace(BASE, segment="consumer", architecture="Ada Lovelace", memory_type="GDDR6X", ecc=False,
                datasheet_bytes=24e9)
    assert mib(f) == 24576 - 12  # RTX 4090 reads 24564
    assert not usable_memory(f).ecc_on


def test_gddr7_has_no_ecc_carveout_and_a_fractional_reserve() -> None:
    f = replace(BASE, architecture="Blackwell", memory_type="GDDR7 (ECC)", datasheet_bytes=96e9)
    # 98304 * (1 - 0.004577) = 97854.07 -> 97854, ECC on (datacenter) and still no 1/16
    assert mib(f) == 97854
    assert usable_memory(f).ecc_on and usable_memory(f).ecc_bytes == 0


def test_amd_and_intel() -> None:
    amd = replace(BASE, vendor="amd", architecture="CDNA 3", memory_type="HBM3E", datasheet_bytes=256e9)
    assert mib(amd) == 262144 - 16
    gaudi = replace(BASE, vendor="intel", architecture="Gaudi 3", memory_type="HBM2e", datasheet_bytes=128e9)
    assert mib(gaudi) == 131072


def test_an_unknown_architecture_takes_the_largest_reserve_of_its_vendor_and_family() -> None:
    f = replace(BASE, architecture="Rubin", memory_type="HBM4", datasheet_bytes=288e9)
    u = usable_memory(f)
    # the Blackwell fraction is the largest NVIDIA HBM one: 294912 * (1 - 0.005214) = 293374.3
    assert u.usable_bytes // MIB == 293374
    assert "no reading for Rubin" in " ".join(u.steps)


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
    assert d["rule"] == "datasheet" and d["usable_bytes"] == 81559 * MIB and d["source_url"].startswith("https://")
    assert d["steps"] and all(isinstance(s, str) for s in d["steps"])
