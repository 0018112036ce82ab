"""Every built-in SKU's usable memory, pinned (issue 10, item 1), and proof that one rule feeds every estimate.

The table gives each SKU's expected usable MiB, the rule that must give it and where the number comes from:
``reading`` rows cite the public driver total (nvidia-smi / rocminfo / HIP / hl-smi) stored in the SKU file;
``datasheet`` rows have no public reading and follow gpumatch.catalog.memory's rule (DRAM = datasheet GB as
GiB, less 1/16 for GDDR6 with ECC on, less the driver reserve fitted to the readings). A change to a reading,
to the rule or to a datasheet figure fails here by name.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from gpumatch.catalog import GpuFile, load_catalog
from gpumatch.catalog.memory import MIB, facts_from_file, usable_memory
from gpumatch.estimate.api import estimate
from gpumatch.estimate.candidates import gpu_table

DATA_DIR = Path(str(resources.files("gpumatch.catalog") / "data" / "gpus"))
MEASURED = Path(__file__).parent / "measurements" / "2026-12-03-h200-usable-memory.json"

# name: (usable MiB, rule, basis)
EXPECTED: dict[str, tuple[int, str, str]] = {
    "A10": (23028, "reading", "nvidia-smi 23028MiB, driver 550.90.12 (thamada/gls A10_smi.py)"),
    "A100 PCIe 40GB": (40960, "datasheet", "40 GiB HBM2, Ampere reserve 0"),
    "A100 PCIe 80GB": (81920, "datasheet", "80 GiB HBM2e, Ampere reserve 0"),
    "A100 SXM4 40GB": (40960, "reading", "nvidia-smi 40960MiB, driver 595.71.05 (bottlerocket-kernel-kit#424)"),
    "A100 SXM4 80GB": (81920, "reading", "nvidia-smi 81920MiB, driver 555.42.02 (thamada/gls; 450.x printed 81252)"),
    "A40": (46068, "reading", "nvidia-smi 46068MiB, driver 570.133.20 (ubccr/ccr-examples)"),
    "B200 180GB": (183359, "reading", "nvidia-smi 183359MiB, driver 580.95.05 (TensorRT-LLM#10278)"),
    "Gaudi 2": (98304, "reading", "hl-smi 98304MiB, driver 1.18.0 (HabanaAI/vllm-fork#484)"),
    "Gaudi 3": (131072, "datasheet", "128 GiB HBM2e, Gaudi reserve 0 (from the Gaudi 2 reading)"),
    "GeForce RTX 3090": (24576, "reading", "nvidia-smi 24576MiB, driver 560.35.03 (thamada/gls)"),
    "GeForce RTX 4090": (24564, "reading", "nvidia-smi 24564MiB, driver 550.163.01 (RLinf#255)"),
    "GeForce RTX 5090": (32607, "reading", "nvidia-smi memory.total 32,607 MiB, driver 610.88 (nibor1896/Crow#105)"),
    "H100 NVL 94GB": (95830, "reading", "nvidia-smi 95830MiB, driver 550.54.14 (thamada/gls; gpu-admin-tools#4)"),
    "H100 PCIe 80GB": (81559, "datasheet", "80 GiB HBM2e less the Hopper reserve 0.4406 %"),
    "H100 SXM5 80GB": (81559, "reading", "nvidia-smi 81559MiB, driver 590.48.01 (nvidia_gpu_exporter capture)"),
    "H20 96GB": (97871, "reading", "nvidia-smi 97871MiB, driver 550.54.14 (DeepGEMM#268)"),
    "H200 NVL 141GB": (143747, "datasheet", "141 GiB HBM3e less the Hopper reserve 0.4406 %"),
    "H200 SXM 141GB": (143771, "reading", "nvidia-smi 143771MiB, driver 590.48.01 (nvidia_gpu_exporter capture)"),
    "Instinct MI250X": (131040, "reading", "rocminfo 67092480 KB per GCD x 2 (openmm#3940)"),
    "Instinct MI300X": (196592, "reading", "HIP totalGlobalMem 196592 MiB (thamada/gls); rocm-smi 206141652992 B"),
    "Instinct MI325X": (262128, "datasheet", "256 GiB HBM3E less AMD's 16 MiB"),
    "L20": (46068, "datasheet", "48 GiB GDDR6, ECC on: less 1/16, less 12 MiB"),
    "L4": (23034, "reading", "nvidia-smi 23034MiB, driver 570.133.20 (speaches#438)"),
    "L40": (46068, "datasheet", "48 GiB GDDR6, ECC on: less 1/16, less 12 MiB"),
    "L40S": (46068, "reading", "nvidia-smi 46068 MiB, driver 595.71.05 (akash provider-configs#99)"),
    "RTX 6000 Ada Generation": (49140, "reading", "nvidia-smi 49140MiB, ECC off, driver 550.127.05 (thamada/gls)"),
    "RTX A6000": (49140, "datasheet", "48 GiB GDDR6, ECC off by default (46068 with ECC on), less 12 MiB"),
    "RTX PRO 6000 Blackwell Server Edition": (97854, "datasheet", "96 GiB GDDR7 less the GDDR7 reserve 0.4577 %"),
    "RTX PRO 6000 Blackwell Workstation Edition": (97887, "reading", "nvidia-smi 97887MiB, driver 580.105.08 "
                                                   "(vllm#27542)"),
    "T4": (15360, "reading", "nvidia-smi 15360MiB (modal-client#2797)"),
    "V100 SXM2 32GB": (32768, "reading", "nvidia-smi 32768MiB, driver 525.105.17 (Wan2.1#5)"),
}


def _files() -> dict[str, GpuFile]:
    out = {}
    for p in sorted(DATA_DIR.glob("*.toml")):
        f = GpuFile.model_validate(tomllib.loads(p.read_text(encoding="utf-8")))
        out[f.name] = f
    return out


FILES = _files()


def test_the_table_covers_every_sku() -> None:
    assert set(EXPECTED) == set(FILES) == {g.name for g in load_catalog().gpus}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_usable_memory_per_sku(name: str) -> None:
    want_mib, want_rule, basis = EXPECTED[name]
    u = load_catalog().get(name).memory_usable
    assert (u.usable_bytes, u.rule) == (want_mib * MIB, want_rule), basis
    assert u.source_url.startswith("https://")
    if u.rule == "reading":
        assert u.tool, f"{name}: a reading names the tool that printed it"


@pytest.mark.parametrize("name", sorted(n for n, v in EXPECTED.items() if v[1] == "reading"))
def test_the_datasheet_rule_reproduces_each_reading_within_0_1_percent(name: str) -> None:
    """The rule's reserves are fitted to the readings; dropping the reading must land within 0.1 % of it
    (a wrong reading, a wrong datasheet GB or a mis-fitted reserve shows here)."""
    facts = facts_from_file(FILES[name])
    assert facts.reported_bytes is not None
    by_rule = usable_memory(replace(facts, reported_bytes=None)).usable_bytes
    assert abs(by_rule - facts.reported_bytes) <= 1e-3 * facts.reported_bytes, (name, by_rule // MIB)


def test_the_estimators_and_the_planner_take_the_rule_and_nothing_else() -> None:
    """One path: the GPU table the planner builds and the estimate API both carry usable_memory()'s bytes."""
    specs = load_catalog().gpus
    table = gpu_table(specs)
    expected = [usable_memory(facts_from_file(FILES[g.name])).usable_bytes for g in specs]
    assert table.fields["capacity_bytes"].tolist() == [float(b) for b in expected]
    # and the datasheet figure is not what they use (it differs on every SKU)
    assert all(float(g.memory_bytes) != c for g, c in zip(specs, table.fields["capacity_bytes"], strict=True))
    for name in ("RTX A6000", "H100 PCIe 80GB", "Instinct MI300X"):
        e = estimate("llama-3.1-8b", name, task="infer")
        assert float(e.memory.items["capacity_bytes"]) == EXPECTED[name][0] * MIB


def test_gpus_json_carries_usable_bytes_rule_and_source() -> None:
    d = load_catalog().get("H100 PCIe").to_dict()
    assert d["memory_usable_bytes"] == 81559 * MIB == d["memory_usable"]["usable_bytes"]
    assert d["memory_usable"]["rule"] == "datasheet" and d["memory_usable"]["source_url"].startswith("https://")
    assert d["memory_bytes"] == 80e9  # the datasheet figure as printed stays


def test_driver_total_less_reserved_is_what_cuda_reports_on_this_projects_h200() -> None:
    """Reference (tests/data/measurements/2026-12-03-h200-usable-memory.json, driver 580.159.04): the
    catalog's H200 figure is nvidia-smi's total; cudaMemGetInfo's total is that less nvidia-smi's 'Reserved'.
    Tolerance 1 MiB: nvidia-smi prints whole MiB. The estimators must count reserved + context as overhead."""
    dev = json.loads(MEASURED.read_text())["devices"][0]
    smi = dev["smi_before_context"]
    catalog = load_catalog().get("H200 SXM").memory_usable.usable_bytes
    assert int(smi["memory.total"]) * MIB == catalog
    cuda_total = dev["mem_get_info_total_bytes"]
    assert abs(catalog - int(smi["memory.reserved"]) * MIB - cuda_total) < MIB  # nvidia-smi rounds to MiB
    assert catalog - cuda_total > 500 * MIB
