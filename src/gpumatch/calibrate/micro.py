"""The microbenchmark classes of a calibration: GEMM per precision and device copies, from measured cases to
size-dependent efficiency curves (:mod:`gpumatch.calibrate.curves`) and back to predicted rates.

A copy's rate is the catalog HBM bandwidth times the copy curve at its size; a GEMM's is the roofline of its
precision's dense peak times the GEMM curve at its FLOP and the copy curve at its bytes (Williams et al. 2009,
"Roofline", CACM 52(4)). Peaks and bandwidths are the catalog's (``gpumatch gpus show``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpumatch.calibrate.cases import MeasuredCase
from gpumatch.calibrate.curves import Curve, fit_curve, fit_gemm_curve
from gpumatch.estimate import Calibration


def peak(card: str, case: MeasuredCase) -> float | None:
    """The catalog peak of a case: HBM bandwidth (B/s) for a copy, the dense FLOP/s of its precision for a GEMM
    (None when the card has none)."""
    from gpumatch.catalog import get_gpu

    spec = get_gpu(card)
    if case.kind == "copy":
        return float(spec.memory_bandwidth_bytes_per_s)
    peak = spec.peak_flops_per_s.get(str(case.options["precision"]))
    return float(peak) if peak else None


def curve_key(case: MeasuredCase) -> str:
    """The curve a case belongs to: ``copy`` or ``gemm <precision>``."""
    return "copy" if case.kind == "copy" else f"gemm {case.options['precision']}"


def size(case: MeasuredCase) -> float:
    """A case's size on its curve: bytes of a copy, FLOP of a GEMM."""
    return float(case.options["bytes" if case.kind == "copy" else "flops"])


def bandwidth(card: str) -> float:
    """The card's catalog memory bandwidth (B/s)."""
    from gpumatch.catalog import get_gpu

    return float(get_gpu(card).memory_bandwidth_bytes_per_s)


def default_rate(card: str, case: MeasuredCase, cal: Calibration) -> float:
    """A microbenchmark case under a Calibration's own curves (the estimators' view before calibration): a copy
    at ``bandwidth × memory_efficiency(bytes)``, a GEMM on the roofline (:func:`gemm_rate`)."""
    if case.kind == "copy":
        return bandwidth(card) * float(cal.memory_efficiency(size(case)))
    low = str(case.options["precision"]) in ("fp8", "int8", "fp4")
    eff = float(cal.gemm_efficiency(size(case))) * (cal.low_precision_gemm_efficiency_ratio if low else 1.0)
    nbytes = float(case.options["bytes"])
    return gemm_rate(case, (peak(card, case) or math.nan) * eff,
                     bandwidth(card) * float(cal.memory_efficiency(nbytes)))


def gemm_rate(case: MeasuredCase, compute_flops_per_s: float, memory_bytes_per_s: float) -> float:
    """FLOP/s of one GEMM on the roofline: FLOP / max(FLOP / compute rate, bytes / memory rate), with the bytes
    of :func:`gpumatch.calibrate.runs.gemm_bytes` (Williams et al. 2009, "Roofline", CACM 52(4))."""
    flops, nbytes = float(case.options["flops"]), float(case.options["bytes"])
    return flops / max(flops / compute_flops_per_s, nbytes / memory_bytes_per_s)


def fit_curves(card: str, cases: Sequence[MeasuredCase]) -> dict[str, Curve]:
    """One curve per GEMM precision and one for copies, from ``cases`` (those with at least two shapes)."""
    groups: dict[str, list[MeasuredCase]] = {}
    for c in cases:
        if c.kind in ("gemm", "copy") and peak(card, c):
            groups.setdefault(curve_key(c), []).append(c)
    out: dict[str, Curve] = {}
    copies = groups.pop("copy", [])
    if len({c.extra["shape"] for c in copies}) >= 2:
        out["copy"] = fit_curve([size(c) for c in copies], [c.measured for c in copies], bandwidth(card))
    for key, cs in sorted(groups.items()):
        if "copy" in out and len({c.extra["shape"] for c in cs}) >= 3:
            out[key] = fit_gemm_curve([size(c) for c in cs], [float(c.options["bytes"]) for c in cs],
                                      [c.measured for c in cs], peak(card, cs[0]) or 0.0, out["copy"])
    return out
