"""Data tests over every built-in GPU SKU file (catalog/data/gpus/*.toml), whoever wrote it.

Per file: it validates; every figure and price names a source and quotes it; values sit in
plausible ranges; precisions are ordered as hardware orders them; and ``sparsity_in_headline``
agrees with what the quoted words print (a dense value stored next to a sparse headline must be
half of it, and the quote must say "sparsity"). A reference table then checks ~20 datasheet values
(dense, SI) of the NVIDIA datacenter SKUs within 3 %, each row citing its datasheet.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from gpumatch.catalog import GpuSpec, load_catalog
from gpumatch.catalog.schema import Figure, GpuFile
from gpumatch.errors import AmbiguousNameError
from gpumatch.names import build_index

DATA_DIR = Path(str(resources.files("gpumatch.catalog") / "data" / "gpus"))
FILES = sorted(DATA_DIR.glob("*.toml"))
IDS = [p.stem for p in FILES]
TENSOR_KEYS = ("tf32", "fp16", "bf16", "fp8", "int8", "fp4", "fp16_acc16", "fp8_acc16")
SCALES = (1e9, 1e12, 1e15, 1e18)  # G, T, P, E as printed in datasheets
_NUMBER = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?")


@functools.cache
def load(path: Path) -> GpuFile:
    return GpuFile.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))


def test_catalog_has_files() -> None:
    assert len(FILES) >= 17, f"expected the SKU files under {DATA_DIR}"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_file_validates(path: Path) -> None:
    f = load(path)
    assert f.name.strip()


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_figure_and_price_is_sourced(path: Path) -> None:
    f = load(path)
    for where, fig in f.figures():
        assert fig.source in f.sources, f"{path.name}: {where} cites unknown source {fig.source!r}"
        assert fig.says.strip(), f"{path.name}: {where} has no quote"
        if fig.uncertain:
            assert fig.note.strip(), f"{path.name}: {where} is uncertain but says not why (note)"
    for i, q in enumerate(f.prices):
        assert q.source in f.sources, f"{path.name}: prices[{i}] cites unknown source {q.source!r}"
        if q.uncertain:
            assert q.note.strip(), f"{path.name}: prices[{i}] is uncertain but says not why (note)"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_values_in_plausible_ranges(path: Path) -> None:
    f = load(path)
    cap = f.memory.capacity_bytes.value
    assert 8e9 <= cap <= 300e9, f"{path.name}: memory {cap:.3g} B outside 8-300 GB"
    bw = f.memory.bandwidth_bytes_per_s.value
    assert 0.2e12 <= bw <= 10e12, f"{path.name}: bandwidth {bw:.3g} B/s outside 0.2-10 TB/s"
    tdp = f.tdp_w.value
    assert 50 <= tdp <= 1500, f"{path.name}: TDP {tdp} W outside 50-1500 W"
    if f.memory.reported_bytes is not None:
        ratio = f.memory.reported_bytes.value / cap
        assert 0.9 <= ratio <= 1.15, f"{path.name}: reported/datasheet memory ratio {ratio:.3f}"
    link = f.interconnect.scale_up_bytes_per_s.value
    if f.interconnect.scale_up == "none":
        assert link == 0, f"{path.name}: scale_up 'none' needs bandwidth 0"
    else:
        assert 1e9 <= link <= 4e12, f"{path.name}: scale-up bandwidth {link:.3g} B/s implausible"
    assert f.peak_flops_per_s.fp32 is None or 1e12 <= f.peak_flops_per_s.fp32.value <= 500e12


def _rate(f: GpuFile, key: str) -> float | None:
    fig: Figure | None = getattr(f.peak_flops_per_s, key)
    return None if fig is None else fig.value


# (lower, higher): where both exist, the first may not exceed the second.
ORDER = [
    ("fp32", "bf16"),
    ("fp32", "fp16"),
    ("bf16", "fp8"),
    ("fp16", "fp8"),
    ("fp8", "fp4"),
    ("tf32", "fp16"),
    ("tf32", "bf16"),
    ("fp64", "fp32"),
    ("fp64", "fp64_tensor"),
    ("fp16", "fp16_acc16"),
    ("fp8", "fp8_acc16"),
]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_precision_rates_are_ordered(path: Path) -> None:
    f = load(path)
    for low, high in ORDER:
        a, b = _rate(f, low), _rate(f, high)
        if a is not None and b is not None:
            assert a <= b * 1.001, f"{path.name}: {low} {a:.4g} > {high} {b:.4g}"


def _printed(says: str) -> list[float]:
    return [float(tok.replace(",", "")) for tok in _NUMBER.findall(says) if tok.replace(",", "")]


def _matches(value: float, printed: list[float], factor: float, tol: float = 0.01) -> bool:
    """Does ``value`` equal some printed number (in G/T/P/E units) times ``factor``, within ``tol``?"""
    return any(abs(n * s * factor - value) <= tol * value for n in printed for s in SCALES)


def classify(fig: Figure) -> str:
    """'dense' if the quote prints the stored value, 'sparse' if only twice it, else 'unprinted'."""
    nums = _printed(fig.says)
    if _matches(fig.value, nums, 1.0):
        return "dense"
    return "sparse" if _matches(fig.value, nums, 0.5) else "unprinted"


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_sparsity_flag_matches_quotes(path: Path) -> None:
    """A stored value that is half of the quoted headline needs ``sparsity_in_headline = true`` and a quote
    that says sparsity; a ``true`` flag with dense quotes (e.g. a whitepaper's dense/sparse pair behind a
    sparse marketing headline) must at least say so in a tensor quote or the notes."""
    f = load(path)
    halved: list[str] = []
    for key in TENSOR_KEYS:
        fig: Figure | None = getattr(f.peak_flops_per_s, key)
        if fig is None or fig.uncertain:
            continue
        kind = classify(fig)
        assert kind != "unprinted", f"{path.name}: {key}={fig.value:.4g} is neither printed nor half of one"
        if kind == "sparse":
            assert "spars" in fig.says.lower(), f"{path.name}: {key} halves a headline whose quote lacks 'sparsity'"
            halved.append(key)
        elif "spars" in fig.says.lower():
            # A dense value quoted next to sparsity must be the smaller of a printed dense|sparse pair;
            # storing the lone starred headline ("1,979* with sparsity") is the trap this catches.
            pair = _matches(fig.value, _printed(fig.says), 0.5, tol=0.02)
            assert pair, f"{path.name}: {key}={fig.value:.4g} is a sparse headline stored as dense"
    if halved:
        assert f.sparsity_in_headline, f"{path.name}: {halved} are halved headlines but sparsity_in_headline=false"
    if f.sparsity_in_headline:
        quotes = [fig.says for k in TENSOR_KEYS if (fig := getattr(f.peak_flops_per_s, k)) is not None]
        assert any("spars" in q.lower() for q in [*quotes, f.notes]), (
            f"{path.name}: sparsity_in_headline=true but no tensor quote or note mentions sparsity"
        )


def test_reported_memory_matches_quoted_mib() -> None:
    """A driver total quoted in MiB must be the stored byte count / 2**20 (catches hand conversion slips)."""
    checked = 0
    for path in FILES:
        rep = load(path).memory.reported_bytes
        if rep is not None and "MiB" in rep.says:
            assert rep.value / 2**20 in _printed(rep.says), f"{path.name}: {rep.value:.0f} B is not a quoted MiB figure"
            checked += 1
    assert checked >= 5, "expected nvidia-smi MiB readings on at least the H100/H200/B200/L40S files"


def test_no_alias_names_two_skus() -> None:
    files = [load(p) for p in FILES]
    index = build_index((f.name, f.aliases, f.name) for f in files)
    clashes = {k: [c for c, _ in v] for k, v in index.items() if len(v) > 1}
    assert not clashes, f"aliases shared by several SKUs: {clashes}"


# ---- reference values: dense, SI, from the datasheets (stored copies named in each SKU file) ----

FIELD: dict[str, Callable[[GpuSpec], float | None]] = {
    "memory": lambda g: float(g.memory_bytes),
    "bandwidth": lambda g: g.memory_bandwidth_bytes_per_s,
    "tdp": lambda g: g.tdp_w,
    "nvlink": lambda g: g.nvlink_bytes_per_s,
}

REFERENCE = [
    ("A100 SXM4 80GB", "bf16", 312e12, "A100 datasheet r4: BFLOAT16 Tensor Core 312 TFLOPS | 624 TFLOPS*"),
    ("A100 SXM4 80GB", "bandwidth", 2039e9, "A100 datasheet r4: 80GB SXM GPU Memory Bandwidth 2,039GB/s"),
    ("A100 PCIe 80GB", "bandwidth", 1935e9, "A100 datasheet r4: 80GB PCIe GPU Memory Bandwidth 1,935GB/s"),
    ("A100 PCIe 40GB", "tdp", 250, "A100 40GB PCIe: max TDP 250W"),
    ("V100 SXM2 32GB", "fp16", 125e12, "V100 datasheet: Tensor Performance 125 TFLOPS (SXM2)"),
    ("T4", "fp16", 65e12, "T4 datasheet: Mixed Precision (FP16/FP32) 65 TFLOPS"),
    ("T4", "int8", 130e12, "T4 datasheet: INT8 130 TOPS"),
    ("A10", "bandwidth", 600e9, "A10 datasheet: GPU Memory Bandwidth 600GB/s"),
    ("H100 SXM5 80GB", "bf16", 989.5e12, "H100 datasheet: BFLOAT16 Tensor Core 1,979 TFLOPS* (*with sparsity) / 2"),
    ("H100 SXM5 80GB", "nvlink", 900e9, "H100 datasheet: NVIDIA NVLink 900GB/s"),
    ("H100 PCIe 80GB", "fp8", 1513e12, "H100 datasheet, PCIe: FP8 Tensor Core 3,026 TFLOPS* / 2"),
    ("H100 NVL 94GB", "bf16", 835.5e12, "H100 NVL datasheet: BFLOAT16 Tensor Core 1,671 TFLOPS* / 2"),
    ("H200 SXM 141GB", "memory", 141e9, "H200 page: GPU Memory 141GB"),
    ("H200 SXM 141GB", "bandwidth", 4.8e12, "H200 page: GPU Memory Bandwidth 4.8TB/s"),
    ("H200 NVL 141GB", "bf16", 835.5e12, "H200 page, NVL: BFLOAT16 1,671 TFLOPS* / 2 (notes: Catalog traps)"),
    ("B200 180GB", "fp4", 9e15, "HGX B200: FP4 Tensor Core 18 PFLOPS (sparse) = 9 PF dense (notes: Catalog traps)"),
    ("B200 180GB", "bf16", 2.25e15, "HGX B200: FP16/BF16 Tensor Core 4.5 PFLOPS (sparse) / 2"),
    ("L4", "bf16", 121e12, "L4 datasheet: BFLOAT16 Tensor Core 242 teraFLOPS* / 2"),
    ("L40", "fp8", 362e12, "L40 datasheet: FP8 Tensor Core 362 | 724* TFLOPS"),
    ("L40S", "bf16", 362.05e12, "L40S datasheet: BFLOAT16 Tensor Core 362.05 | 733* TFLOPS"),
    ("L40S", "tdp", 350, "L40S datasheet: Max Power Consumption 350W"),
    # Added by the catalog audit of 2026-12 (each row re-checked against the cited document, 3 % tolerance).
    ("A10", "bf16", 125e12, "A10 datasheet: BF16 Tensor Core 125 TF | 250 TF*"),
    ("A10", "tdp", 150, "A10 datasheet: Max thermal design power 150W"),
    ("A100 SXM4 80GB", "nvlink", 600e9, "A100 datasheet r4: NVLink 600GB/s"),
    ("A100 SXM4 80GB", "tf32", 156e12, "A100 datasheet r4: TF32 Tensor Core 156 TF | 312 TF*"),
    ("H100 SXM5 80GB", "fp64", 34e12, "H100 datasheet: FP64 34 teraFLOPS (vector, not halved)"),
    ("H100 SXM5 80GB", "tf32", 494.5e12, "H100 datasheet: TF32 Tensor Core 989 TFLOPS* (*with sparsity) / 2"),
    ("H100 PCIe 80GB", "bandwidth", 2.0e12, "H100 datasheet, PCIe: GPU memory bandwidth 2TB/s"),
    ("H100 PCIe 80GB", "nvlink", 600e9, "H100 datasheet, PCIe: NVLink 600GB/s (bridge)"),
    ("H100 NVL 94GB", "bandwidth", 3.9e12, "H100 NVL datasheet: 3.9TB/s per card (not the 7.8 pair figure)"),
    ("H100 NVL 94GB", "memory", 94e9, "H100 NVL datasheet: GPU memory 94GB (per card, not the 188GB pair figure)"),
    ("H200 SXM 141GB", "fp8", 1979e12, "H200 page: FP8 Tensor Core 3,958 TFLOPS (with sparsity) / 2"),
    ("H200 NVL 141GB", "nvlink", 900e9, "H200 page, NVL: 2- or 4-way NVIDIA NVLink bridge: 900GB/s per GPU"),
    ("H200 NVL 141GB", "tdp", 600, "H200 page, NVL: Max TDP up to 600W (configurable)"),
    ("B200 180GB", "nvlink", 1.8e12, "HGX B200: 5th Generation NVLink 1.8TB/s"),
    ("B200 180GB", "fp8", 4.5e15, "HGX B200: FP8/FP6 Tensor Core 9 PFLOPS (sparse) / 2"),
    ("B200 180GB", "tdp", 1000, "HGX B200: Max TDP configurable up to 1,000W"),
    ("L4", "fp8", 242.5e12, "L4 datasheet: FP8 Tensor Core 485 teraFLOPS* / 2"),
    ("L4", "bandwidth", 300e9, "L4 datasheet: GPU memory bandwidth 300GB/s"),
    ("L40S", "fp8", 733e12, "L40S datasheet: FP8 Tensor Core 733 | 1,466* TFLOPS"),
    ("T4", "bandwidth", 320e9, "T4 datasheet: GPU memory bandwidth 320+ GB/s"),
    ("V100 SXM2 32GB", "nvlink", 300e9, "V100 datasheet: Interconnect bandwidth NVLink 300 GB/s (SXM2)"),
    ("V100 SXM2 32GB", "bandwidth", 900e9, "V100 datasheet: Memory bandwidth 900 GB/s"),
    # Added with the A40 and H20 files (2026-12-03).
    ("A40", "bf16", 149.7e12, "A40 datasheet: Peak BF16 Tensor TFLOPS with FP32 Accumulate 149.7 | 299.4*"),
    ("A40", "tf32", 74.8e12, "A40 datasheet: Peak TF32 Tensor TFLOPS 74.8 | 149.6*"),
    ("A40", "int8", 299.3e12, "A40 datasheet: Peak INT8 Tensor TOPS 299.3 | 598.6*"),
    ("A40", "fp32", 37.4e12, "A40 datasheet: Peak FP32 TFLOPS (non-Tensor) 37.4"),
    ("A40", "memory", 48e9, "A40 datasheet: GPU memory 48 GB GDDR6 with ECC"),
    ("A40", "bandwidth", 696e9, "A40 datasheet: Memory bandwidth 696 GB/s"),
    ("A40", "nvlink", 112.5e9, "A40 datasheet: NVIDIA NVLink 112.5 GB/s (bidirectional)"),
    ("A40", "tdp", 300, "A40 datasheet: Max power consumption 300 W"),
    # H20: NVIDIA publishes no datasheet; only the memory size is from an NVIDIA document (MIG user guide).
    # The rest pins the retailer-listing / press figures stored (uncertain) in h20.toml, read as dense.
    ("H20 96GB", "memory", 96e9, "NVIDIA MIG user guide, supported GPUs: H20 | Hopper | GH100 | 9.0 | 96GB | 7"),
    ("H20 96GB", "bandwidth", 4.0e12, "Tom's Hardware (retailer listing): Memory Bandwidth 4.0 TB/s (uncertain)"),
    ("H20 96GB", "bf16", 148e12, "Tom's Hardware (retailer listing): BF16 I FP16 Tensor 148 I 148 TFLOPS (uncertain)"),
    ("H20 96GB", "fp8", 296e12, "Tom's Hardware (retailer listing): INT8 I FP8 Tensor 296 I 296 TFLOPS (uncertain)"),
    ("H20 96GB", "tf32", 74e12, "Tom's Hardware (retailer listing): TF32 Tensor 74 TFLOPS (uncertain)"),
    ("H20 96GB", "nvlink", 900e9, "TweakTown: NVIDIA keeps the 900GB/sec NVLink connectivity on H20 (uncertain)"),
    ("H20 96GB", "tdp", 400, "TweakTown: The new H20 AI GPU has a 400W TDP (uncertain; nvidia-smi shows a 500W cap)"),
]


@pytest.mark.parametrize(("sku", "field", "expected", "source"), REFERENCE, ids=[f"{r[0]}-{r[1]}" for r in REFERENCE])
def test_reference_datasheet_values(sku: str, field: str, expected: float, source: str) -> None:
    gpu = load_catalog().get(sku)
    got = FIELD[field](gpu) if field in FIELD else gpu.peak(field)
    assert got is not None, f"{sku}: {field} missing (source: {source})"
    assert abs(got - expected) <= 0.03 * expected, f"{sku} {field}: {got:.4g} vs {expected:.4g} ({source})"


@pytest.mark.parametrize(
    ("sku", "flag"),
    [
        ("H100 SXM5 80GB", True),
        ("H200 NVL 141GB", True),
        ("B200 180GB", True),
        ("L4", True),
        ("A100 SXM4 80GB", False),
        ("A10", False),
        ("L40", False),
        ("L40S", False),
        ("A40", False),
    ],
)
def test_sparsity_in_headline_known_cases(sku: str, flag: bool) -> None:
    assert load_catalog().get(sku).sparsity_in_headline is flag


def test_unsupported_precisions_are_absent() -> None:
    cat = load_catalog()
    assert cat.get("V100 SXM2 32GB").peak("bf16") is None
    assert cat.get("V100 SXM2 32GB").peak("tf32") is None
    assert cat.get("T4").peak("bf16") is None
    assert cat.get("A100 SXM4 80GB").peak("fp8") is None
    assert cat.get("H100 SXM5 80GB").peak("fp4") is None
    assert cat.get("B200 180GB").peak("fp4") is not None
    assert cat.get("A40").peak("fp8") is None
    assert cat.get("H20 96GB").peak("fp4") is None


@pytest.mark.parametrize(
    ("query", "sku"),
    [
        ("L4", "L4"),
        ("NVIDIA L4", "L4"),
        ("L40", "L40"),
        ("l40s", "L40S"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("a100-sxm4-80gb", "A100 SXM4 80GB"),
        ("A100 80GB SXM", "A100 SXM4 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("A10", "A10"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
        ("H100 SXM", "H100 SXM5 80GB"),
        ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
        ("H100 NVL", "H100 NVL 94GB"),
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("h200", "H200 SXM 141GB"),
        ("H200 NVL", "H200 NVL 141GB"),
        ("NVIDIA B200", "B200 180GB"),
        ("a40", "A40"),
        ("NVIDIA A40", "A40"),
        ("h20", "H20 96GB"),
        ("NVIDIA H20", "H20 96GB"),
        ("h20-96gb", "H20 96GB"),
    ],
)
def test_common_spellings_resolve(query: str, sku: str) -> None:
    assert load_catalog().get(query).name == sku


@pytest.mark.parametrize("query", ["h100", "a100"])
def test_family_names_are_ambiguous(query: str) -> None:
    with pytest.raises(AmbiguousNameError):
        load_catalog().get(query)


# FP64 (non-tensor) per compute capability, as the CUDA C++ Programming Guide's throughput table gives it:
# 2 FP64 results per clock per SM against 128 FP32 on cc 8.6 / 8.9 / 12.0 (1/64), 2 against 64 on cc 7.5
# (1/32). Third-party databases print 1:32 for some GA102 boards (the A10 once stored 976 GFLOPS); this
# pins the ratio for every consumer-die SKU that stores an FP64 figure.
FP64_RATIO = {"7.5": 1 / 32, "8.6": 1 / 64, "8.9": 1 / 64, "12.0": 1 / 64}


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_fp64_follows_the_compute_capability_ratio(path: Path) -> None:
    f = load(path)
    ratio = FP64_RATIO.get(f.compute_capability or "")
    fp64, fp32 = _rate(f, "fp64"), _rate(f, "fp32")
    if ratio is None or fp64 is None or fp32 is None:
        return
    assert abs(fp64 - fp32 * ratio) <= 0.03 * fp32 * ratio, (
        f"{path.name}: fp64 {fp64:.4g} is not fp32 {fp32:.4g} x {ratio:.4g} (cc {f.compute_capability})"
    )
