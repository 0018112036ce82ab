"""Size-dependent efficiency curves of the microbenchmark classes (GEMM per precision, device copies).

The curve is the estimators' own saturating form (:class:`gpumatch.estimate.Calibration`, estimator-formulas.md
D): ``eta(x) = eta_max * x / (x + x_half)`` of the datasheet peak, with ``x`` the FLOP of one GEMM call or the
bytes of one copy. A GEMM's predicted rate is ``peak[precision] * eta(2·m·n·k)``; a copy's is
``HBM bandwidth * eta(size)``, the bench's ``copy_bytes_per_s`` counting read + write (docs/bench.md).

:func:`fit_curve` fits ``(eta_max, x_half)`` by least squares on log(predicted / measured) with
:func:`scipy.optimize.least_squares` (trust-region reflective, bounds ``0 < eta_max <= 1`` and
``1 <= x_half <= 1e15``), the error measure every gpumatch fit uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpumatch.errors import InputError


@dataclass(frozen=True)
class Curve:
    """``eta(x) = eta_max * x / (x + x_half)`` of a peak ``peak`` (flop/s or B/s) over ``n`` points."""

    eta_max: float
    x_half: float
    peak: float
    n: int
    memory_share: float = 1.0
    """GEMM curves: the share of the copy curve's bandwidth a memory-bound (skinny, GEMV-like) GEMM reaches."""

    def rate(self, x: float) -> float:
        """Predicted rate (unit of ``peak``) of one call of size ``x``."""
        return self.peak * self.eta_max * x / (x + self.x_half)

    def gemm_rate(self, flops: float, nbytes: float, copy: Curve) -> float:
        """FLOP/s of a GEMM of ``flops`` moving ``nbytes`` on the roofline: FLOP / max(FLOP / compute rate,
        bytes / (memory_share × copy rate)) (Williams et al. 2009, "Roofline", CACM 52(4))."""
        return flops / max(flops / self.rate(flops), nbytes / (self.memory_share * copy.rate(nbytes)))

    def to_dict(self) -> dict[str, float]:
        return {"eta_max": self.eta_max, "x_half": self.x_half, "peak": self.peak, "n": self.n,
                "memory_share": self.memory_share}


def fit_curve(sizes: Sequence[float], rates: Sequence[float], peak: float) -> Curve:
    """The curve through the points (``sizes[i]``, ``rates[i]``) against ``peak`` (module docstring).

    Needs at least two points with positive values; an :class:`InputError` otherwise."""
    pts = [(float(x), float(y)) for x, y in zip(sizes, rates, strict=True) if x > 0 and y > 0]
    if len(pts) < 2 or peak <= 0:
        raise InputError(f"a curve needs two measured sizes and a peak, got {len(pts)} and {peak:g}")
    try:
        import numpy as np
        from scipy.optimize import least_squares
    except ImportError as e:  # pragma: no cover - the extra is part of the dev install
        raise InputError("fitting curves needs scipy", "pip install 'gpumatch[report]'") from e
    xs, ys = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])

    def resid(theta: np.ndarray) -> np.ndarray:
        eta, log_half = theta
        return np.asarray(np.log(peak * eta * xs / (xs + np.exp(log_half)) / ys))

    start = [min(0.99, float(ys.max()) / peak * 1.1), math.log(float(np.median(xs)) / 4.0)]
    sol = least_squares(resid, start, bounds=([1e-4, 0.0], [1.0, math.log(1e15)]), method="trf")
    return Curve(float(sol.x[0]), float(math.exp(sol.x[1])), float(peak), len(pts))


def fit_gemm_curve(flops: Sequence[float], nbytes: Sequence[float], rates: Sequence[float], peak: float,
                   copy: Curve) -> Curve:
    """A GEMM curve on the roofline (:meth:`Curve.gemm_rate`): ``eta_max``, ``x_half`` and ``memory_share``
    fitted together by least squares on log(predicted / measured), so skinny memory-bound shapes set the memory
    share and do not drag the compute curve."""
    if len(flops) < 3 or peak <= 0:
        raise InputError(f"a GEMM curve needs three measured shapes and a peak, got {len(flops)} and {peak:g}")
    import numpy as np
    from scipy.optimize import least_squares

    fs, bs, ys = np.array(flops, float), np.array(nbytes, float), np.array(rates, float)
    mem = np.array([copy.rate(b) for b in bs])

    def resid(theta: np.ndarray) -> np.ndarray:
        eta, log_half, share = theta
        compute = peak * eta * fs / (fs + np.exp(log_half))
        return np.asarray(np.log(fs / np.maximum(fs / compute, bs / (share * mem)) / ys))

    start = [min(0.99, float(ys.max()) / peak * 1.1), math.log(float(np.median(fs)) / 4.0), 0.8]
    sol = least_squares(resid, start, bounds=([1e-4, 0.0, 0.05], [1.0, math.log(1e15), 1.0]), method="trf")
    return Curve(float(sol.x[0]), float(math.exp(sol.x[1])), float(peak), len(fs), float(sol.x[2]))
