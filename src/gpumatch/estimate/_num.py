"""Numeric helpers shared by the scalar and the vectorized paths.

Every formula in ``gpumatch.estimate`` takes ``Num`` arguments: a Python ``float``/``int`` for one
configuration, or a numpy array (structure-of-arrays over candidate configurations) that broadcasts.
The helpers below pick the cheap scalar operation when no argument is an array, so one formula
serves both paths without paying numpy's per-call overhead on scalars.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np

Num: TypeAlias = Any
"""A float, an int or a numpy float array; formulas use only operators that broadcast."""

_ND = np.ndarray


def vmax(a: Num, b: Num) -> Num:
    """Elementwise maximum."""
    if type(a) is _ND or type(b) is _ND:
        return np.maximum(a, b)
    return a if a >= b else b


def vmin(a: Num, b: Num) -> Num:
    """Elementwise minimum."""
    if type(a) is _ND or type(b) is _ND:
        return np.minimum(a, b)
    return a if a <= b else b


def where(cond: Num, a: Num, b: Num) -> Num:
    """``a`` where ``cond`` holds, else ``b``. A scalar condition picks one operand whole (it broadcasts later)."""
    if type(cond) is _ND:
        return np.where(cond, a, b)
    return a if cond else b


def ceil_div(a: Num, b: Num) -> Num:
    """``ceil(a / b)`` for positive values; works on floats and arrays (``-(-a // b)``)."""
    return -(-a // b)


def is_array(*xs: Num) -> bool:
    for x in xs:  # noqa: SIM110 - a plain loop is 3x faster than any(genexpr) on this hot path
        if type(x) is _ND:
            return True
    return False


def is_one(x: Num) -> bool:
    """True for the scalar 1 (lets scalar callers skip work that is zero for a group of one)."""
    return type(x) is not _ND and x == 1
