"""Every built-in SKU's usable memory, pinned (issue 10, item 1), and proof that one rule feeds every estimate.

The figure is what one process is given on the card (``cudaMemGetInfo`` / ``hipMemGetInfo`` total), not the
driver's total. The table gives each SKU's expected MiB, the rule that must give it and where the number comes
from: ``process`` rows cite a public process-side reading stored in the SKU file (CUDA deviceQuery
totalGlobalMem, PyTorch ``total_memory`` or its out-of-memory "total capacity", HIP ``mem_get_info`` /
deviceQuery, Gaudi ``memory_stats`` Limit); ``datasheet`` rows have none and follow gpumatch.catalog.memory's
rule (DRAM = datasheet GB as GiB, less 1/16 for GDDR6 with ECC on, less the driver reserve, less the process
reserve, both fitted to the readings). A change to a reading, to the rule or to a datasheet figure fails here
by name.
"""

from __future__ import annotations

import json
import math
import statistics
import tomllib
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from gpumatch.catalog import GpuFile, load_catalog
from gpumatch.catalog.memory import PROCESS_RESERVES, facts_from_file, memory_family, usable_memory
from gpumatch.estimate import Request
from gpumatch.estimate.api import estimate
from gpumatch.estimate.vectorized import gpu_table
from gpumatch.units import MIB

DATA_DIR = Path(str(resources.files("gpumatch.catalog") / "data" / "gpus"))
MEASURED = Path(__file__).parent / "measurements" / "2026-12-03-h200-usable-memory.json"

GLS = "thamada/gls deviceQuery"
# name: (usable MiB, rule, basis)
EXPECTED: dict[str, tuple[int, str, str]] = {
    "A10": (22502, "process", f"{GLS} 23595909120 B, 550.90.12 (nvidia-smi 23028 - Reserved 526)"),
    "A100 PCIe 40GB": (40322, "datasheet", "40 GiB HBM2 - Ampere process reserve 638"),
    "A100 PCIe 80GB": (81282, "datasheet", "80 GiB HBM2e - Ampere process reserve 638"),
    "A100 SXM4 40GB": (40448, "process", "PyTorch OOM 'total capacity of 39.50 GiB' (TianheWu/CoSeR#10)"),
    "A100 SXM4 80GB": (81157, "process", f"{GLS} 85100068864 B, 555.42.02 (81920 - Reserved 763)"),
    "A40": (45403, "process", f"{GLS} 47608692736 B, 550.127.05 (46068 - Reserved 665)"),
    "B200 180GB": (182642, "process", "PyTorch total_memory=182642MB (ai-bot-pro/achatbot, Modal)"),
    "Gaudi 2": (96891, "process", "memory_stats Limit 94.62 GiB (ray-project/ray Gaudi notebook); hl-smi 98304"),
    "Gaudi 3": (129659, "datasheet", "128 GiB HBM2e - the Gaudi 2 process reserve 1413"),
    "GeForce RTX 3090": (24154, "process", f"{GLS} 25327697920 B, 560.35.03 (24576 - Reserved 422)"),
    "GeForce RTX 4090": (24210, "process", f"{GLS} 25386352640 B, 550.127.05 (24564 - Reserved 354)"),
    "GeForce RTX 5090": (32120, "process", f"{GLS} 33680457728 B, 570.124.06 (32607 - Reserved 487)"),
    "H100 NVL 94GB": (95235, "process", f"{GLS} 99861594112 B, 550.54.14 (95830 - Reserved 594)"),
    "H100 PCIe 80GB": (80966, "datasheet", "80 GiB HBM2e - Hopper driver reserve 361 - process reserve 593"),
    "H100 SXM5 80GB": (81105, "process", f"{GLS} 85045477376 B, 565.57.01 (81559 - Reserved 454)"),
    "H20 96GB": (97280, "process", "PyTorch OOM 'total capacity of 95.00 GiB' (modelscope/DiffSynth-Studio#1238)"),
    "H200 NVL 141GB": (143154, "datasheet", "141 GiB HBM3e - Hopper driver reserve 637 - process reserve 593"),
    "H200 SXM 141GB": (143156, "process", "PyTorch total_memory=143156MB (ai-bot-pro/achatbot, Modal); ours 143155"),
    "Instinct MI250X": (131040, "process", "HIP mem_get_info 63.984375 GiB per GCD x 2 (jaglinux/pytorch-notes)"),
    "Instinct MI300X": (196592, "process", "HIP deviceQuery 196592 MiB (thamada/gls) = rocm-smi VRAM total"),
    "Instinct MI325X": (262128, "datasheet", "256 GiB HBM3E - AMD's 16 MiB, process reserve 0"),
    "L20": (45599, "process", "PyTorch OOM 'total capacity of 44.53 GiB' (Tencent-Hunyuan/HunyuanCustom#36)"),
    "L4": (22478, "process", f"{GLS} 23570219008 B, 550.90.07 (23034 - Reserved 556)"),
    "L40": (45466, "process", "PyTorch OOM 'total capacity of 44.40 GiB' (NVlabs/Eagle#68)"),
    "L40S": (45589, "process", f"{GLS} 47803596800 B, 550.127.05 (46068 - Reserved 479)"),
    "RTX 6000 Ada Generation": (48640, "process", f"{GLS} 51002867712 B, ECC off, 550.127.05 (49140 - 500)"),
    "RTX A6000": (48650, "datasheet", "48 GiB GDDR6, ECC off by default, - 12 MiB - GDDR process reserve 490"),
    "RTX PRO 6000 Blackwell Server Edition": (97291, "datasheet", "96 GiB GDDR7 - GDDR7 driver reserve 450 - 563"),
    "RTX PRO 6000 Blackwell Workstation Edition": (97249, "process", "ds4 'total=94.97 GiB' (antirez/ds4#431)"),
    "T4": (15094, "process", "PyTorch OOM 'total capacity of 14.74 GiB' on a Colab T4 (zai-org/CogVideo#741)"),
    "V100 SXM2 32GB": (32502, "process", "PyTorch OOM '31.74 GiB total capacity' (haotian-liu/LLaVA#812)"),
}


def _files() -> dict[str, GpuFile]:
    out = {}
    for p in sorted(DATA_DIR.glob("*.toml")):
        f = GpuFile.model_validate(tomllib.loads(p.read_text(encoding="utf-8")))
        out[f.name] = f
    return out


FILES = _files()
WITH_PROCESS = sorted(n for n, f in FILES.items() if f.memory.process_bytes is not None)


def test_the_table_covers_every_sku() -> None:
    assert set(EXPECTED) == set(FILES) == {g.name for g in load_catalog().gpus}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_usable_memory_per_sku(name: str) -> None:
    want_mib, want_rule, basis = EXPECTED[name]
    u = load_catalog().get(name).memory_usable
    assert (u.usable_bytes, u.rule) == (want_mib * MIB, want_rule), basis
    assert u.source_url.startswith("https://")
    if u.rule == "process":
        assert u.tool, f"{name}: a process-side reading names the tool that printed it"


@pytest.mark.parametrize("name", sorted(n for n, f in FILES.items()
                                         if f.memory.reserved_bytes is not None and f.memory.process_bytes is not None))
def test_driver_total_less_reserved_is_what_a_process_is_given(name: str) -> None:
    """Reference: on every card whose nvidia-smi -q 'Reserved' and process-side total are both public (thamada/gls
    pairs nvidia-smi -q with CUDA deviceQuery of the same card; H200: the nvidia_gpu_exporter capture and a Modal
    H200), Total - Reserved = the process total. Tolerance 1 MiB: nvidia-smi prints whole MiB."""
    m = FILES[name].memory
    assert m.reported_bytes is not None and m.reserved_bytes is not None and m.process_bytes is not None
    total_less_reserved = m.reported_bytes.value - m.reserved_bytes.value
    assert abs(total_less_reserved - m.process_bytes.value) <= MIB, (name, total_less_reserved / MIB)


def test_the_fitted_process_reserves_are_the_medians_of_the_readings() -> None:
    """PROCESS_RESERVES[key] = the median, rounded up, of driver total - process total over the SKUs of that vendor,
    memory family and architecture (or '*') that publish both; every key rests on at least one reading."""
    pairs: dict[tuple[str, str, str], list[float]] = {}
    for f in FILES.values():
        facts = facts_from_file(f)
        if facts.reported_bytes is None or facts.process_bytes is None:
            continue
        family = memory_family(facts.memory_type)
        key = (f.vendor, family, f.architecture)
        key = key if key in PROCESS_RESERVES else (f.vendor, family, "*")
        pairs.setdefault(key, []).append((facts.reported_bytes - facts.process_bytes // MIB * MIB) / MIB)
    assert set(pairs) == set(PROCESS_RESERVES)
    for key, held in pairs.items():
        assert PROCESS_RESERVES[key][0] == math.ceil(statistics.median(held)), (key, sorted(held))


@pytest.mark.parametrize("name", WITH_PROCESS)
def test_the_datasheet_rule_lands_within_256_mib_of_each_process_reading(name: str) -> None:
    """Drop every reading of a SKU: the datasheet rule (DRAM, ECC, driver reserve, process reserve) must land within
    256 MiB of the process-side figure (the reserves' residuals: at most 236 MiB, T4). A wrong reading, a wrong
    datasheet GB or a mis-fitted reserve shows here."""
    facts = facts_from_file(FILES[name])
    assert facts.process_bytes is not None
    bare = replace(facts, reported_bytes=None, reserved_bytes=None, process_bytes=None)
    by_rule = usable_memory(bare).usable_bytes
    assert abs(by_rule - facts.process_bytes) <= 256 * MIB, (name, by_rule // MIB, facts.process_bytes // MIB)


def test_the_estimators_and_the_planner_take_the_rule_and_nothing_else() -> None:
    """One path: the GPU table the planner builds and the estimate API both carry usable_memory()'s bytes."""
    specs = load_catalog().gpus
    table = gpu_table(specs)
    expected = [usable_memory(facts_from_file(FILES[g.name])).usable_bytes for g in specs]
    assert table.fields["capacity_bytes"].tolist() == [float(b) for b in expected]
    # and neither the datasheet figure nor the driver's total is what they use
    assert all(float(g.memory_bytes) != c for g, c in zip(specs, table.fields["capacity_bytes"], strict=True))
    assert all(g.memory_reported_bytes is None or float(g.memory_reported_bytes) > c
               for g, c in zip(specs, table.fields["capacity_bytes"], strict=True) if g.vendor == "nvidia")
    for name in ("RTX A6000", "H100 PCIe 80GB", "Instinct MI300X", "H200 SXM 141GB"):
        e = estimate("llama-3.1-8b", name, Request(task="infer"))
        assert float(e.memory.items["capacity_bytes"]) == EXPECTED[name][0] * MIB


def test_gpus_json_carries_usable_bytes_rule_and_source() -> None:
    d = load_catalog().get("H100 PCIe").to_dict()
    assert d["memory_usable_bytes"] == 80966 * MIB == d["memory_usable"]["usable_bytes"]
    assert d["memory_usable"]["rule"] == "datasheet" and d["memory_usable"]["source_url"].startswith("https://")
    assert d["memory_usable"]["driver_total_bytes"] == 81559 * MIB
    assert d["memory_usable"]["held_back_bytes"] == 593 * MIB
    assert d["memory_bytes"] == 80e9  # the datasheet figure as printed stays


def test_the_h200_figure_is_what_cuda_gives_a_process_on_this_projects_h200() -> None:
    """Reference (tests/data/measurements/2026-12-03-h200-usable-memory.json and
    2026-12-03-h200-nvidia-smi-q-memory.txt, driver 580.159.04): cudaMemGetInfo total = 143155 MiB = nvidia-smi
    Total 143771 - Reserved 616. The catalog's H200 SXM figure (a public process-side reading) must be that within
    1 MiB (another driver; PyTorch rounds down to MiB), and must sit below the driver's total by the reserve, not
    equal it."""
    dev = json.loads(MEASURED.read_text())["devices"][0]
    smi = dev["smi_before_context"]
    cuda_total = dev["mem_get_info_total_bytes"]
    assert abs(int(smi["memory.total"]) * MIB - int(smi["memory.reserved"]) * MIB - cuda_total) < MIB
    u = load_catalog().get("H200 SXM").memory_usable
    assert abs(u.usable_bytes - cuda_total) <= MIB, (u.usable_bytes / MIB, cuda_total / MIB)
    assert u.driver_total_bytes == int(smi["memory.total"]) * MIB
    assert u.held_back_bytes is not None and u.held_back_bytes > 500 * MIB
    # what one process could allocate after its CUDA context: below the figure by the context (~0.5 GiB)
    assert 400 * MIB < u.usable_bytes - dev["fill"]["allocated_bytes"] < 700 * MIB


def test_amd_gives_a_process_the_driver_total_and_gaudi_does_not() -> None:
    """Item 2: HIP's total (deviceQuery, mem_get_info) equals rocm-smi / rocminfo's VRAM total on MI300X (196592 MiB)
    and MI250X (65520 MiB per GCD); Gaudi 2's memory_stats Limit (94.62 GiB) is 1413 MiB under hl-smi's 98304."""
    for name in ("Instinct MI300X", "Instinct MI250X"):
        u = load_catalog().get(name).memory_usable
        assert u.rule == "process" and u.held_back_bytes == 0 and u.usable_bytes == u.driver_total_bytes
    gaudi = load_catalog().get("Gaudi 2").memory_usable
    assert gaudi.driver_total_bytes == 98304 * MIB and gaudi.held_back_bytes == 1413 * MIB
