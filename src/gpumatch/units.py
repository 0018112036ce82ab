"""SI units and the parsing/rendering of quantities at the edges.

Inside gpumatch every quantity is SI and carries its unit in its name (``memory_bytes``,
``bandwidth_bytes_per_s``, ``power_w``, ``flops_per_s``, ``price_usd_per_h``). This module turns
strings a person writes ("80GiB", "3.35 TB/s", "700W", "$2.5/h", "989 TFLOPS") into those numbers
and back. Decimal prefixes (k, M, G, T, P) are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers
of 1024, as in IEC 80000-13.
"""

from __future__ import annotations

import math
import re

from gpumatch.errors import InputError

KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4
KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
TERA = 1e12
PETA = 1e15
SECONDS_PER_HOUR = 3600.0
J_PER_KWH = 3.6e6

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_NUMBER = r"(?P<num>[+-]?(?:\d+(?:[._]\d+)*|\.\d+)(?:[eE][+-]?\d+)?)"


def _prefix_factor(prefix: str) -> float | None:
    if prefix in _BINARY:
        return _BINARY[prefix]
    if prefix in _DECIMAL:
        return _DECIMAL[prefix]
    return None


def _parse(text: str, units: tuple[str, ...], what: str, example: str, default_unit: str | None) -> float:
    """Parse ``<number><prefix><unit>``; ``units`` are accepted spellings (case-insensitive)."""
    if not isinstance(text, str):
        raise InputError(f"{what}: expected text such as {example!r}, got {text!r}")
    s = text.strip().replace(",", "")
    m = re.fullmatch(_NUMBER + r"\s*(?P<rest>.*)", s)
    if not m:
        raise InputError(f"{what}: cannot read {text!r}", f"write it like {example!r}")
    value = float(m.group("num").replace("_", ""))
    rest = m.group("rest").strip()
    if not math.isfinite(value):
        raise InputError(f"{what}: {text!r} is not a finite number", f"write it like {example!r}")
    if rest == "":
        if default_unit is None:
            raise InputError(f"{what}: {text!r} has no unit", f"write it like {example!r}")
        rest = default_unit
    for unit in sorted(units, key=len, reverse=True):
        if rest.lower().endswith(unit.lower()):
            prefix = rest[: len(rest) - len(unit)].strip()
            factor = _prefix_factor(prefix)
            if factor is None and prefix.lower() in {p.lower() for p in _BINARY}:
                factor = next(v for k, v in _BINARY.items() if k.lower() == prefix.lower())
            if factor is None and len(prefix) == 1 and prefix.upper() in _DECIMAL:
                factor = _DECIMAL[prefix.upper()]
            if factor is not None:
                return value * factor
    raise InputError(f"{what}: unknown unit in {text!r}", f"write it like {example!r}")


def parse_bytes(text: str) -> int:
    """'80GiB' -> 85899345920; '141 GB' -> 141e9. A bare number is bytes."""
    value = _parse(text, ("B", "bytes", "byte"), "memory size", "80GiB", "B")
    if value < 0:
        raise InputError(f"memory size: {text!r} is negative", "give a size such as '24GiB'")
    return round(value)


def parse_bandwidth(text: str) -> float:
    """'3.35TB/s' -> 3.35e12 bytes/s."""
    return _parse(text, ("B/s", "Bps"), "bandwidth", "3.35TB/s", None)


def parse_power(text: str) -> float:
    """'700W' -> 700.0 W; '1.2kW' -> 1200.0 W. A bare number is watts."""
    value = _parse(text, ("W",), "power", "700W", "W")
    if value < 0:
        raise InputError(f"power: {text!r} is negative", "give a power such as '700W'")
    return value


def parse_flops(text: str) -> float:
    """'989 TFLOPS' or '989T' -> 9.89e14 FLOP/s."""
    return _parse(text, ("FLOPS", "FLOP/s", "OPS", "OP/s"), "compute rate", "989TFLOPS", "FLOPS")


def parse_usd_per_hour(text: str) -> float:
    """'$2.5/h', '2.5 USD/h', '2.5/hr' -> 2.5 USD per hour."""
    s = text.strip().lower().replace("usd", "").replace("$", "").strip()
    m = re.fullmatch(_NUMBER + r"\s*/\s*(h|hr|hour)", s)
    if not m:
        raise InputError(f"price: cannot read {text!r}", "write it like '$2.5/h'")
    return float(m.group("num").replace("_", ""))


def format_bytes(n_bytes: float) -> str:
    """Binary units for memory, as tools report it: 85899345920 -> '80.0 GiB'."""
    sign = "-" if n_bytes < 0 else ""
    x = abs(float(n_bytes))
    for unit, factor in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if x >= factor:
            return f"{sign}{x / factor:.1f} {unit}"
    return f"{sign}{x:.0f} B"


def format_si(value: float, unit: str, digits: int = 3) -> str:
    """Decimal prefixes: format_si(9.89e14, 'FLOP/s') -> '989 TFLOP/s'."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    for prefix, factor in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"
