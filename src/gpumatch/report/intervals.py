"""How an interval reads in a table: ``18.4 ms (16.9–20.1)``, and one line per basis.

The input is the ``intervals`` / ``interval_basis`` pair of an estimate's JSON (:mod:`gpumatch.estimate.intervals`
made them); nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def span(fmt: Callable[[float], str], value: float, interval: list[float] | tuple[float, float] | None) -> str:
    """``value`` formatted by ``fmt``, then its interval: the unit once when all three share it
    ("18.4 ms (16.9–20.1)"), else each with its own ("980 µs (950 µs–1.02 ms)"). No interval: the value alone."""
    text = fmt(value)
    if not interval:
        return text
    lo, hi = fmt(interval[0]), fmt(interval[1])
    unit = text.rpartition(" ")[2] if " " in text else ""
    if unit and lo.endswith(" " + unit) and hi.endswith(" " + unit):
        return f"{text} ({lo.removesuffix(' ' + unit)}–{hi.removesuffix(' ' + unit)})"
    return f"{text} ({lo}–{hi})"


def basis_rows(d: dict[str, Any], figures: tuple[str, ...]) -> dict[str, str]:
    """One row per distinct basis among ``figures`` (those shown with an interval): ``interval 1``: "tpot_s: H200
    SXM 141GB decode, n=8, -3%/+3%"."""
    by_basis: dict[str, list[str]] = {}
    for k in figures:
        why = (d.get("interval_basis") or {}).get(k)
        if why and k in (d.get("intervals") or {}):
            by_basis.setdefault(why, []).append(k)
    return {f"interval {i + 1}": f"{', '.join(ks)}: {why}" for i, (why, ks) in enumerate(by_basis.items())}


def key_figure_text(e: dict[str, Any], fmt: dict[str, Callable[[float], str]]) -> str:
    """A plan entry's key figures with their intervals and bases: "TPOT 27.6 ms (19.3–35.8): extrapolated ...".

    ``fmt`` maps figure -> formatter; figures without an interval or a value are left out."""
    labels = {"tpot_s": "TPOT", "ttft_s": "TTFT", "step_s": "step", "total_bytes": "memory"}
    est, ivs, why = e.get("estimate") or {}, e.get("intervals") or {}, e.get("interval_basis") or {}
    parts = [f"{labels[k]} {span(fmt[k], est[k], ivs[k])} ({why.get(k, '')})"
             for k in labels if k in fmt and k in ivs and est.get(k) is not None]
    return "; ".join(parts)
