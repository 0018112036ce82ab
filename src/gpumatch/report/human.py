"""Human units for table cells: SI values in, short strings out ("79.6 GiB", "3.35 TB/s", "7.4 ms", "445 W").

Tables show these; ``--format json|csv`` keep the SI numbers. :func:`by_name` picks the unit from the naming
convention of DESIGN.md (a quantity's name ends in its unit: ``total_bytes``, ``tpot_s``, ``power_w``), so a
generic table or field/value view can render any result dict without knowing it (the names stay as they are:
they are the keys of the JSON).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gpumatch.units import GIB, MIB, format_si

DASH = "-"


def _finite(v: float | None) -> bool:
    return v is not None and not isinstance(v, bool) and math.isfinite(v)


def gib(n_bytes: float | None) -> str:
    """Memory in binary units, as nvidia-smi and torch report it: '79.6 GiB'; '38 MiB', '0.6 MiB' below 0.1 GiB."""
    if not _finite(n_bytes):
        return DASH
    assert n_bytes is not None
    if n_bytes == 0:
        return "0 GiB"
    if abs(n_bytes) >= 0.1 * GIB:
        return f"{n_bytes / GIB:.1f} GiB"
    return f"{n_bytes / MIB:.0f} MiB" if abs(n_bytes) >= MIB else f"{n_bytes / MIB:.1f} MiB"


def bytes_per_s(v: float | None) -> str:
    """Bandwidth in decimal units, as datasheets quote it: '3.35 TB/s', '900 GB/s'."""
    return format_si(v, "B/s") if _finite(v) else DASH  # type: ignore[arg-type]


def seconds(s: float | None) -> str:
    """'850 µs', '7.42 ms', '1.17 s', '12.5 min', '168 h', '57.9 d' (three significant digits; hours up
    to 1,000 h, the scale of training deadlines)."""
    if not _finite(s):
        return DASH
    assert s is not None
    a = abs(s)
    if a == 0:
        return "0 s"
    for limit, factor, unit in ((1e-3, 1e-6, "µs"), (1.0, 1e-3, "ms"), (120.0, 1.0, "s"), (7200.0, 60.0, "min"),
                                (3.6e6, 3600.0, "h")):
        if a < limit:
            return f"{s / factor:.3g} {unit}"
    return f"{s / 86400.0:,.3g} d" if a < 1e3 * 86400 else f"{s / 86400.0:,.0f} d"


def watts(w: float | None) -> str:
    """'445 W', '10.2 kW'."""
    if not _finite(w):
        return DASH
    assert w is not None
    return f"{w:,.0f} W" if abs(w) < 10_000 else f"{w / 1e3:,.3g} kW"


def joules(j: float | None) -> str:
    """'27.6 kJ', '2.45 J'."""
    return format_si(j, "J") if _finite(j) else DASH  # type: ignore[arg-type]


def hertz(hz: float | None) -> str:
    """'1.48 GHz'."""
    return format_si(hz, "Hz") if _finite(hz) else DASH  # type: ignore[arg-type]


def usd(x: float | None) -> str:
    """'$1,234', '$2.50', '$0.0523' (three significant digits under a dollar)."""
    if not _finite(x):
        return DASH
    assert x is not None
    a = abs(x)
    if a >= 100:
        return f"${x:,.0f}"
    if a >= 1 or a == 0:
        return f"${x:,.2f}"
    return f"${x:.3g}"


def percent(fraction: float | None) -> str:
    """A fraction 0..1 as '54.5%' ('0.4%' under 1%)."""
    if not _finite(fraction):
        return DASH
    assert fraction is not None
    return f"{fraction:.0%}" if abs(fraction) >= 0.1 else f"{fraction:.1%}"


def big_count(n: float | None) -> str:
    """Large counts the way people say them: '2B', '100M', '1.5K', '512'."""
    if not _finite(n):
        return DASH
    assert n is not None
    for factor, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= factor:
            return f"{n / factor:.3g}{unit}"
    return f"{n:.3g}"


def count(n: float | None) -> str:
    """'3,173' (no decimals; large counts with separators)."""
    return f"{n:,.0f}" if _finite(n) else DASH


def rate(v: float | None) -> str:
    """A count per second: '3,173/s', '2.5/s'."""
    if not _finite(v):
        return DASH
    assert v is not None
    return f"{v:,.0f}/s" if abs(v) >= 100 else f"{v:.3g}/s"


def _si(unit: str) -> Callable[[float | None], str]:
    return lambda v: format_si(v, unit) if _finite(v) else DASH  # type: ignore[arg-type]


def _suffixed(fn: Callable[[float | None], str], tail: str) -> Callable[[float | None], str]:
    return lambda v: fn(v) + tail if _finite(v) else DASH


# suffix -> renderer, longest first; names with another "_per_" (usd_per_million_tokens, w_per_node) match none
_SUFFIXES: tuple[tuple[str, Callable[[float | None], str]], ...] = (
    ("_bytes_per_s", bytes_per_s),
    ("_flops_per_s", _si("FLOP/s")),
    ("usd_per_gpu_hour", _suffixed(usd, "/GPU-h")),
    ("usd_per_hour", _suffixed(usd, "/h")),
    ("usd_per_kwh", _suffixed(usd, "/kWh")),
    ("_per_s", rate),
    ("_bytes", gib),
    ("_fraction", percent),
    ("_usd", usd),
    ("_mhz", lambda v: f"{v:,.0f} MHz" if _finite(v) else DASH),
    ("_hz", hertz),
    ("_w", watts),
    ("_j", joules),
    ("_s", seconds),
)
_NOT_A_QUANTITY = ("_unix_s",)  # timestamps, not durations


def by_name(name: str) -> Callable[[float | None], str] | None:
    """The renderer for a quantity called ``name`` (or its last dotted part) when the name ends in a unit of the
    naming convention (``tpot_s``: seconds; ``memory_bytes``: GiB), else None. Rates of another denominator
    (``usd_per_million_tokens``, ``w_per_node``) and timestamps (``*_unix_s``) match none."""
    last = name.rpartition(".")[2]
    if last.endswith(_NOT_A_QUANTITY):
        return None
    for suffix, fn in _SUFFIXES:
        if not last.endswith(suffix):
            continue
        stem = last[: -len(suffix)]
        if (suffix.startswith("_") and not stem) or "_per_" in stem:
            return None
        return fn
    return None


def is_number(v: object) -> bool:
    """A real number a unit renderer can take (bools are not numbers here)."""
    return isinstance(v, int | float) and not isinstance(v, bool)
