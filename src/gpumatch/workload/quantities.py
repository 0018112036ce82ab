"""Quantities a workload file may write as numbers (SI) or as strings with units.

Each parser takes what TOML/YAML produced (int, float or str) and returns the SI number, raising
``ValueError`` with an example of the expected spelling (pydantic turns it into a field error).
Power and $/h strings go through :mod:`gpumatch.units`; durations, dollar amounts, $/kWh and token
counts are read here (they are workload-only quantities).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

from gpumatch.errors import GpumatchError
from gpumatch.units import parse_power, parse_usd_per_hour

_NUM = r"([+-]?(?:\d+(?:[._]\d+)*|\.\d+)(?:[eE][+-]?\d+)?)"
_SECONDS = {
    "ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0, "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}  # fmt: skip
_COUNT = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def _number(value: Any, example: str) -> float | None:
    """A plain number (not a bool), or None when ``value`` is a string to parse."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number or text such as {example!r}, got {value!r}")
    if isinstance(value, int | float):
        x = float(value)
        if not math.isfinite(x):
            raise ValueError(f"{value!r} is not a finite number")
        return x
    if isinstance(value, str):
        return None
    raise ValueError(f"expected a number or text such as {example!r}, got {type(value).__name__}")


def _match(text: str, example: str) -> tuple[float, str]:
    m = re.fullmatch(_NUM + r"\s*(.*)", text.strip().replace(",", ""))
    if not m:
        raise ValueError(f"cannot read {text!r}; write it like {example!r}")
    return float(m.group(1).replace("_", "")), m.group(2).strip()


def seconds(value: Any) -> float:
    """30 -> 30.0 s; '200ms', '2 s', '90min', '72h', '3d', '2w' -> seconds."""
    x = _number(value, "72h")
    if x is not None:
        return x
    num, unit = _match(value, "72h")
    factor = _SECONDS.get(unit.lower() or "s")
    if factor is None:
        raise ValueError(f"unknown time unit in {value!r}; use ms, s, min, h, d or w (e.g. '72h')")
    return num * factor


def usd(value: Any) -> float:
    """250000 -> 250000.0; '$250k', '250,000 USD', '$1.2M' -> dollars."""
    x = _number(value, "$250k")
    if x is not None:
        return x
    text = value.lower().replace("usd", "").replace("$", "").strip()
    num, suffix = _match(text, "$250k")
    factor = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9}.get(suffix)
    if factor is None:
        raise ValueError(f"cannot read {value!r}; write dollars like '$250k' or 250000")
    return num * factor


def usd_per_hour(value: Any) -> float:
    """2.5 -> 2.5; '$2.5/h' -> 2.5 dollars per GPU-hour."""
    x = _number(value, "$2.5/h")
    if x is not None:
        return x
    return _via_units(parse_usd_per_hour, value)


def usd_per_kwh(value: Any) -> float:
    """0.12 -> 0.12; '$0.12/kWh', '0.12 USD/kWh', '$120/MWh' -> dollars per kWh."""
    x = _number(value, "$0.12/kWh")
    if x is not None:
        return x
    text = value.lower().replace("usd", "").replace("$", "").replace(" ", "")
    m = re.fullmatch(_NUM + r"/(k|m)wh", text)
    if not m:
        raise ValueError(f"cannot read {value!r}; write it like '$0.12/kWh'")
    return float(m.group(1).replace("_", "")) / (1000.0 if m.group(2) == "m" else 1.0)


def watts(value: Any) -> float:
    """700 -> 700.0 W; '700W', '1.2kW' -> watts."""
    x = _number(value, "700W")
    if x is not None:
        return x
    return _via_units(parse_power, value)


def token_count(value: Any) -> float:
    """2e9 -> 2e9; '2B', '500M', '15T', '2_000_000' -> tokens."""
    x = _number(value, "2B")
    if x is not None:
        return x
    num, suffix = _match(value.replace(" tokens", "").replace(" tok", ""), "2B")
    factor = _COUNT.get(suffix.lower())
    if factor is None:
        raise ValueError(f"cannot read {value!r}; write a token count like '2B', '500M' or 2e9")
    return num * factor


def _via_units(parse: Any, value: str) -> float:
    try:
        return float(parse(value))
    except GpumatchError as e:
        raise ValueError(str(e)) from e


Seconds = Annotated[float, BeforeValidator(seconds)]
Usd = Annotated[float, BeforeValidator(usd)]
UsdPerHour = Annotated[float, BeforeValidator(usd_per_hour)]
UsdPerKwh = Annotated[float, BeforeValidator(usd_per_kwh)]
Watts = Annotated[float, BeforeValidator(watts)]
Tokens = Annotated[float, BeforeValidator(token_count)]
