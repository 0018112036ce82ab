"""Reference checks for the GeForce, workstation, AMD Instinct and Intel Gaudi SKUs of the catalog.

Each row of REFERENCE is a vendor figure (dense, SI) with the document that prints it; the catalog
must agree within 3 %. The trap tests pin the rules of docs "Catalog traps" and "The consumer
(GeForce) accumulate trap" (shared/notes/estimator-formulas.md), so that a later edit cannot store a
sparse headline, halve AMD's already-dense figures, or put a GeForce FP16-accumulate rate where the
FP32-accumulate rate belongs.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpumatch.catalog import GpuSpec, load_catalog

GEFORCE = ("GeForce RTX 3090", "GeForce RTX 4090", "GeForce RTX 5090")
WORKSTATION = (
    "RTX A6000",
    "RTX 6000 Ada Generation",
    "RTX PRO 6000 Blackwell Workstation Edition",
    "RTX PRO 6000 Blackwell Server Edition",
)
AMD = ("Instinct MI250X", "Instinct MI300X", "Instinct MI325X")
GAUDI = ("Gaudi 2", "Gaudi 3")

FIELD: dict[str, Callable[[GpuSpec], float | None]] = {
    "memory": lambda g: float(g.memory_bytes),
    "bandwidth": lambda g: g.memory_bandwidth_bytes_per_s,
    "tdp": lambda g: g.tdp_w,
    "link": lambda g: g.nvlink_bytes_per_s,
    "fp16_acc16": lambda g: g.fp16_acc16_flops_per_s,
    "fp8_acc16": lambda g: g.fp8_acc16_flops_per_s,
    "fp64_tensor": lambda g: g.fp64_tensor_flops_per_s,
}

GA102 = "NVIDIA Ampere GA102 whitepaper V2"
ADA = "NVIDIA Ada GPU architecture whitepaper, Appendix A"
RTXBW = "NVIDIA RTX Blackwell whitepaper, Table 3"
ROCM300 = "ROCm docs, MI300 microarchitecture, peak-performance table"
HC24 = "Intel, Gaudi 3 at Hot Chips 2024 (Gaudi generations table)"

REFERENCE = [
    ("GeForce RTX 3090", "bf16", 71.2e12, f"{RTXBW}: BF16 with FP32 Accumulate 71.2/142.4"),
    ("GeForce RTX 3090", "fp16_acc16", 142e12, f"{GA102}: FP16 with FP16 Accumulate 142/284"),
    ("GeForce RTX 3090", "int8", 284e12, f"{GA102}: INT8 Tensor 284/568"),
    ("GeForce RTX 3090", "bandwidth", 936e9, f"{GA102}: Memory Bandwidth 936 GB/sec"),
    ("GeForce RTX 3090", "link", 112.5e9, f"{GA102}: four x4 NVLink links, 112.5 GB/sec total between two GPUs"),
    ("GeForce RTX 4090", "bf16", 165.2e12, f"{ADA}: BF16 with FP32 Accumulate 165.2/330.4"),
    ("GeForce RTX 4090", "fp8", 330.3e12, f"{ADA}: FP8 with FP32 Accumulate 330.3/660.6"),
    ("GeForce RTX 4090", "fp8_acc16", 660.6e12, f"{ADA}: FP8 with FP16 Accumulate 660.6/1321.2"),
    ("GeForce RTX 4090", "tf32", 82.6e12, f"{ADA}: TF32 Tensor 82.6/165.2"),
    ("GeForce RTX 4090", "tdp", 450, f"{ADA}: Total Graphics Power 450 W"),
    ("GeForce RTX 5090", "bf16", 209.5e12, f"{RTXBW}: BF16 with FP32 Accumulate 209.5/419"),
    ("GeForce RTX 5090", "fp16_acc16", 419e12, f"{RTXBW}: FP16 with FP16 Accumulate 419/838"),
    ("GeForce RTX 5090", "fp4", 1676e12, f"{RTXBW}: FP4 1676/3352; product page 3352 AI TOPS"),
    ("GeForce RTX 5090", "bandwidth", 1792e9, f"{RTXBW}: Memory Bandwidth 1792 GB/sec"),
    ("GeForce RTX 5090", "memory", 32e9, "RTX 5090 product page: 32 GB GDDR7"),
    ("RTX A6000", "bf16", 154.8e12, f"{GA102}: RTX A6000 BF16 with FP32 Accumulate 154.8/309.6"),
    ("RTX A6000", "link", 112.5e9, "RTX A6000 spec table: NVLink Interconnect 112.5 GB/s (bidirectional)"),
    ("RTX A6000", "memory", 48e9, "RTX A6000 spec table: 48 GB GDDR6 with ECC"),
    (
        "RTX 6000 Ada Generation",
        "fp8",
        728.5e12,
        "RTX 6000 Ada datasheet: Tensor 1457.0 TFLOPS (FP8 with sparsity) / 2",
    ),
    ("RTX 6000 Ada Generation", "bandwidth", 960e9, "RTX 6000 Ada datasheet: Memory bandwidth 960 GB/s"),
    ("RTX PRO 6000 Blackwell Workstation Edition", "bf16", 503.8e12, "RTX PRO Blackwell whitepaper Table 4: 503.8"),
    (
        "RTX PRO 6000 Blackwell Workstation Edition",
        "fp4",
        2000e12,
        "RTX PRO 6000 WS datasheet: 4000 AI TOPS (FP4 sparse)",
    ),
    ("RTX PRO 6000 Blackwell Workstation Edition", "fp32", 125e12, "RTX PRO 6000 WS datasheet: 125 TFLOPS"),
    ("RTX PRO 6000 Blackwell Server Edition", "bandwidth", 1597e9, "RTX PRO 6000 Server datasheet: 1597 GB/s"),
    ("RTX PRO 6000 Blackwell Server Edition", "fp32", 120e12, "RTX PRO 6000 Server datasheet: 120 TFLOPS"),
    ("Instinct MI250X", "bf16", 383e12, "AMD MI200 spec table: FP16 | bf16 (Peak) up to 383.0 TF"),
    ("Instinct MI250X", "fp64_tensor", 95.7e12, "AMD MI200 spec table: FP64 | FP32 Matrix up to 95.7 TF"),
    ("Instinct MI250X", "bandwidth", 3.2e12, "AMD MI200 spec table: 3.2 TB/sec"),
    ("Instinct MI300X", "bf16", 1307.4e12, f"{ROCM300}: Matrix BF16 1307.4"),
    ("Instinct MI300X", "fp8", 2614.9e12, f"{ROCM300}: Matrix FP8 2614.9"),
    ("Instinct MI300X", "fp64", 81.7e12, f"{ROCM300}: Vector FP64 81.7"),
    ("Instinct MI300X", "bandwidth", 5.3e12, f"{ROCM300}: peak memory bandwidth 5.3 TB per second"),
    ("Instinct MI300X", "tdp", 750, "MLPerf v4.1: AMD Instinct MI300X-NPS1-SPX-192GB-750W"),
    ("Instinct MI325X", "memory", 256e9, "AMD MI325X: 256 GB HBM3E"),
    ("Instinct MI325X", "bandwidth", 6e12, "AMD MI325X: 6 TB/s"),
    ("Instinct MI325X", "bf16", 1307.4e12, "AMD MI325X: FP16/BF16 1307.4 TFLOPS"),
    ("Gaudi 2", "bf16", 432e12, f"{HC24}: Peak Compute (BF16) 432 TFLOPs"),
    ("Gaudi 2", "bandwidth", 2.46e12, f"{HC24}: Peak HBM BW 2.46 TB/s"),
    ("Gaudi 2", "link", 600e9, f"{HC24}: Embedded NIC BW (bi-directional) 4.8 Tb/s"),
    ("Gaudi 3", "bf16", 1835e12, f"{HC24}: BF16 Matrix TFLOPs 1835"),
    ("Gaudi 3", "fp8", 1835e12, f"{HC24}: FP8 Matrix TFLOPs 1835"),
    ("Gaudi 3", "link", 1200e9, f"{HC24}: Networking 1200 GB/s bidirectional (24x 200GbE)"),
    ("Gaudi 3", "tdp", 900, f"{HC24}: TDP (OAM) 900W (Air)"),
    # Added by the catalog audit of 2026-12 (each row re-checked against the cited document, 3 % tolerance).
    ("GeForce RTX 3090", "tf32", 35.6e12, f"{GA102}: Peak TF32 Tensor TFLOPS 35.6/71"),
    ("GeForce RTX 3090", "tdp", 350, f"{GA102}: Graphics Card Power 350 W"),
    ("GeForce RTX 4090", "int8", 660.6e12, f"{ADA}: Peak INT8 Tensor TOPS 660.6/1321.2"),
    ("GeForce RTX 4090", "bandwidth", 1008e9, f"{ADA}: Memory Bandwidth 1008 GB/sec"),
    ("GeForce RTX 5090", "int8", 838e12, f"{RTXBW}: Peak INT8 Tensor TOPS 838/1676"),
    ("GeForce RTX 5090", "tdp", 575, f"{RTXBW}: Total Graphics Power 575 W"),
    ("RTX A6000", "bandwidth", 768e9, "RTX A6000 spec table (ServeTheHome copy): Memory Bandwidth 768 GB/s"),
    ("RTX A6000", "tdp", 300, "RTX A6000 spec table: Max Power Consumption 300W"),
    ("RTX 6000 Ada Generation", "fp32", 91.1e12, "RTX 6000 Ada datasheet: Single-precision performance 91.1 TFLOPS"),
    ("RTX 6000 Ada Generation", "tdp", 300, "RTX 6000 Ada datasheet: Total board power 300 W"),
    ("RTX PRO 6000 Blackwell Workstation Edition", "bandwidth", 1792e9, "RTX PRO 6000 WS datasheet: 1792 GB/s"),
    ("RTX PRO 6000 Blackwell Workstation Edition", "tdp", 600, "RTX PRO 6000 WS datasheet: Total board power 600 W"),
    ("Instinct MI250X", "memory", 128e9, "AMD MI200 spec table: 128GB HBM2e"),
    ("Instinct MI300X", "memory", 192e9, "AMD MI300X: 192 GB HBM3"),
    ("Instinct MI300X", "tf32", 653.7e12, f"{ROCM300}: TF32 653.7 (dense; 1307.4 with sparsity on AMD's product page)"),
    ("Instinct MI325X", "tdp", 1000, "AMD MI325X: 1000W"),
    ("Gaudi 2", "tdp", 600, f"{HC24}: TDP (OAM) Gaudi 2 600W"),
    ("Gaudi 2", "memory", 96e9, f"{HC24}: HBM Capacity Gaudi 2 96 GB"),
    ("Gaudi 3", "memory", 128e9, f"{HC24}: HBM Capacity 128 GB"),
    ("Gaudi 3", "bandwidth", 3.67e12, f"{HC24}: HBM Bandwidth 3.67 TB/s"),
]


def _value(gpu: GpuSpec, field: str) -> float | None:
    return FIELD[field](gpu) if field in FIELD else gpu.peak(field)


@pytest.mark.parametrize(("sku", "field", "expected", "source"), REFERENCE, ids=[f"{r[0]}-{r[1]}" for r in REFERENCE])
def test_reference_value_within_3_percent(sku: str, field: str, expected: float, source: str) -> None:
    got = _value(load_catalog().get(sku), field)
    assert got is not None, f"{sku} {field} missing ({source})"
    assert got == pytest.approx(expected, rel=0.03), f"{sku} {field}: {got:.4g} vs {expected:.4g} ({source})"


@pytest.mark.parametrize("name", GEFORCE)
def test_geforce_stores_fp32_accumulate_rates(name: str) -> None:
    g = load_catalog().get(name)
    assert g.segment == "consumer" and not g.ecc and g.mig_instances == 0
    fp16, bf16, tf32 = g.peak("fp16"), g.peak("bf16"), g.peak("tf32")
    assert fp16 is not None and bf16 is not None and tf32 is not None and g.fp16_acc16_flops_per_s is not None
    assert fp16 == pytest.approx(g.fp16_acc16_flops_per_s / 2, rel=0.01)
    assert bf16 == pytest.approx(fp16, rel=0.01)
    assert tf32 == pytest.approx(fp16 / 2, rel=0.01)
    fp8 = g.peak("fp8")
    if fp8 is not None:
        assert g.fp8_acc16_flops_per_s is not None
        assert fp8 == pytest.approx(g.fp8_acc16_flops_per_s / 2, rel=0.01)


@pytest.mark.parametrize("name", WORKSTATION)
def test_workstation_parts_run_fp32_accumulate_at_full_rate(name: str) -> None:
    g = load_catalog().get(name)
    assert g.ecc
    assert g.peak("fp16") == g.peak("bf16")
    assert g.fp16_acc16_flops_per_s is None  # no separate (faster) FP16-accumulate rate


@pytest.mark.parametrize(
    ("name", "has_fp8", "has_fp4"),
    [
        ("GeForce RTX 3090", False, False),
        ("GeForce RTX 4090", True, False),
        ("GeForce RTX 5090", True, True),
        ("RTX A6000", False, False),
        ("RTX 6000 Ada Generation", True, False),
        ("RTX PRO 6000 Blackwell Workstation Edition", True, True),
    ],
)
def test_low_precision_support_follows_the_architecture(name: str, has_fp8: bool, has_fp4: bool) -> None:
    g = load_catalog().get(name)
    assert (g.peak("fp8") is not None) == has_fp8
    assert (g.peak("fp4") is not None) == has_fp4


@pytest.mark.parametrize("name", AMD)
def test_amd_headlines_are_dense_and_not_halved(name: str) -> None:
    g = load_catalog().get(name)
    assert not g.sparsity_in_headline
    assert g.compute_capability is None
    assert g.scale_up == "infinity-fabric"
    if name != "Instinct MI250X":
        assert g.peak("bf16") == pytest.approx(1307.4e12)  # not 2614.9 (sparse) nor 653.7 (halved)


def test_mi250x_is_flagged_as_two_gcds() -> None:
    g = load_catalog().get("MI250X")
    assert "2 GCDs" in g.form_factor
    assert "GCD" in g.notes


@pytest.mark.parametrize("name", GAUDI)
def test_gaudi_has_no_sparsity_doubling_and_ethernet_scale_up(name: str) -> None:
    g = load_catalog().get(name)
    assert not g.sparsity_in_headline
    assert g.scale_up == "ethernet"
    assert g.compute_capability is None


def test_gaudi3_fp8_equals_bf16() -> None:
    g = load_catalog().get("Gaudi 3")
    assert g.peak("fp8") == g.peak("bf16") == 1835e12


@pytest.mark.parametrize("name", ["GeForce RTX 4090", "GeForce RTX 5090"])
def test_geforce_ada_and_blackwell_have_no_nvlink_and_no_p2p(name: str) -> None:
    g = load_catalog().get(name)
    assert g.nvlink_bytes_per_s == 0 and g.scale_up == "none"
    assert not g.pcie_p2p


def test_nvlink_bridge_cards() -> None:
    for name in ("GeForce RTX 3090", "RTX A6000"):
        g = load_catalog().get(name)
        assert g.scale_up == "nvlink-bridge" and g.nvlink_bytes_per_s == 112.5e9


def test_only_the_pro_6000_editions_offer_mig_among_these() -> None:
    catalog = load_catalog()
    for name in (*GEFORCE, "RTX A6000", "RTX 6000 Ada Generation"):
        assert catalog.get(name).mig_instances == 0
    assert catalog.get("rtx-pro-6000-ws").mig_instances == 4
    assert catalog.get("rtx-pro-6000-server").mig_instances == 4
    assert catalog.get("rtx-pro-6000-server").cooling == "passive"
    assert catalog.get("rtx-pro-6000-ws").cooling == "active"
