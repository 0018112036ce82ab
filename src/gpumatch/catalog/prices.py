"""One price basis for every candidate: which quotes a plan or an estimate uses, and the figure it takes.

A shortlist compares like with like only if every card is priced the same way. :func:`select_price` is the one
place that turns a card's dated quotes into the figure a plan or an estimate uses, for one *basis*:

==========  ==========================  =========================================================
basis       quote kinds it reads        unit
==========  ==========================  =========================================================
on-demand   ``on-demand``               USD per GPU-hour (the default)
reserved    ``reserved``                USD per GPU-hour (any term; the terms are in the quotes)
spot        ``spot``                    USD per GPU-hour (interruptible or marketplace capacity)
purchase    ``list`` and ``street``     USD per card (amortized by :mod:`gpumatch.estimate.cost`)
==========  ==========================  =========================================================

``serverless`` quotes (per-second scale-to-zero workers) belong to no basis: they price a request, not a
machine you hold. The purchase basis reads vendor list prices and street prices together because vendors
publish list prices for consumer and workstation cards only; each quote keeps its kind, so the spread shows
which it was.

The rule (documented in README "Price basis"):

1. keep the card's quotes of the basis's kinds;
2. per provider (the quote's ``provider``, else its source URL) keep the newest quote; several of that date
   count as their median;
3. drop providers whose newest quote is more than :data:`RECENCY_DAYS` older than the card's newest quote of
   the basis (an old list price does not outvote this year's market);
4. the figure is the **median over providers**; the spread is their minimum, maximum and count.

Why the median: one provider's list (the old rule for NVIDIA cards) or the cheapest quote (the old rule for
AMD cards) lets a single seller decide the cost term. Why the window is relative to the card's own newest
quote and not to today: the same catalog gives the same plan on any day; the plan shows the dates instead.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpumatch.catalog.spec import GpuSpec, Price
from gpumatch.errors import InputError

BASES: tuple[str, ...] = ("on-demand", "reserved", "spot", "purchase")
DEFAULT_BASIS = "on-demand"
BASIS_KINDS: dict[str, tuple[str, ...]] = {
    "on-demand": ("on-demand",), "reserved": ("reserved",), "spot": ("spot",), "purchase": ("list", "street"),
}
HOURLY_BASES: frozenset[str] = frozenset({"on-demand", "reserved", "spot"})
RECENCY_DAYS = 548
"""About 18 months: a provider's quote older than this, counted back from the card's newest quote, is dropped."""


def check_basis(basis: str, where: str = "price basis") -> str:
    """``basis`` if it is one of :data:`BASES`, else an :class:`InputError` naming the choices."""
    if basis not in BASES:
        raise InputError(f"unknown {where} {basis!r}", f"use one of {', '.join(BASES)}")
    return basis


@dataclass(frozen=True)
class PriceChoice:
    """The figure one card gets on one basis, and the quotes behind it.

    ``value``: USD per GPU-hour (hourly bases) or USD per card (purchase); None when no quote of the basis
    exists. ``quotes``: one per provider after the recency rule, cheapest first. ``override``: the value is
    the workload's own price (``money.usd_per_gpu_hour`` or ``money.purchase_usd_per_gpu``), not a quote.
    """

    gpu: str
    basis: str
    value: float | None
    quotes: tuple[Price, ...] = ()
    override: bool = False

    @property
    def priced(self) -> bool:
        return self.value is not None

    @property
    def unit(self) -> str:
        return "usd_per_gpu_hour" if self.basis in HOURLY_BASES else "usd"

    @property
    def providers(self) -> int:
        return len(self.quotes)

    @property
    def low(self) -> float | None:
        return min(q.amount for q in self.quotes) if self.quotes else self.value

    @property
    def high(self) -> float | None:
        return max(q.amount for q in self.quotes) if self.quotes else self.value

    @property
    def first_date(self) -> dt.date | None:
        return min(q.date for q in self.quotes) if self.quotes else None

    @property
    def last_date(self) -> dt.date | None:
        return max(q.date for q in self.quotes) if self.quotes else None

    def money(self, value: float | None) -> str:
        """``$3.99/GPU-h`` or ``$27,500/card``; ``-`` for None."""
        if value is None:
            return "-"
        return f"${value:,.2f}/GPU-h" if self.unit == "usd_per_gpu_hour" else f"${value:,.0f}/card"

    def text(self) -> str:
        """One line: the figure, how it was made, and the spread (or the missing-quote mark)."""
        if self.override:
            return f"{self.money(self.value)} {self.basis}, the workload's own price (money section)"
        if self.value is None:
            return f"{unpriced_mark(self.basis)}: ranked on the other terms, cost not compared"
        if self.providers == 1:
            q = self.quotes[0]
            return f"{self.money(self.value)} {self.basis}, 1 provider ({q.provider or 'unnamed'}, {q.date:%Y-%m})"
        return (f"{self.money(self.value)} {self.basis}, median of {self.providers} providers "
                f"({self.spread()}, {self.period()})")

    def period(self) -> str:
        """``2026-05..2026-10`` (months of the oldest and newest quote used), one month once."""
        first, last = f"{self.first_date:%Y-%m}", f"{self.last_date:%Y-%m}"
        return first if first == last else f"{first}..{last}"

    def spread(self) -> str:
        """``$1.50-6.00/GPU-h`` or ``$25,000-30,000/card`` (min-max over the providers)."""
        low, high = self.money(self.low), self.money(self.high)
        unit = "/" + low.rsplit("/", 1)[1] if "/" in low else ""
        return f"{low.removesuffix(unit)}-{high.removesuffix(unit).lstrip('$')}{unit}"

    def to_dict(self) -> dict[str, Any]:
        """JSON view: the figure, its unit, the spread and every quote used (provider, kind, value, date, URL)."""
        return {
            "basis": self.basis, "value": self.value, "unit": self.unit, "priced": self.priced,
            "override": self.override, "providers": self.providers, "low": self.low, "high": self.high,
            "first_date": None if self.first_date is None else self.first_date.isoformat(),
            "last_date": None if self.last_date is None else self.last_date.isoformat(),
            "quotes": [{"provider": q.provider, "kind": q.kind, "value": q.amount, "date": q.date.isoformat(),
                        "term_months": q.term_months, "uncertain": q.uncertain, "source_url": q.source_url}
                       for q in self.quotes],
            "text": self.text(),
        }


def unpriced_mark(basis: str) -> str:
    """The mark an unpriced candidate carries: ``no on-demand quote``, ``no purchase price``."""
    return "no purchase price" if basis == "purchase" else f"no {basis} quote"


def _provider(p: Price) -> str:
    return " ".join(p.provider.lower().split()) or p.source_url


def _per_provider(quotes: Iterable[Price]) -> list[Price]:
    """The newest quote of each provider; several of that date become one with their median amount."""
    newest: dict[str, list[Price]] = {}
    for q in quotes:
        key = _provider(q)
        kept = newest.get(key)
        if kept is None or q.date > kept[0].date:
            newest[key] = [q]
        elif q.date == kept[0].date:
            kept.append(q)
    return [day[0] if len(day) == 1 else _with_amount(day[0], statistics.median(q.amount for q in day))
            for day in newest.values()]


def _with_amount(p: Price, amount: float) -> Price:
    hourly = p.usd_per_gpu_hour is not None
    return replace(p, usd_per_gpu_hour=amount if hourly else None, usd=None if hourly else amount,
                   says=p.says + " (median of this provider's quotes of that date)")


def select_price(gpu: GpuSpec, basis: str, override: float | None = None) -> PriceChoice:
    """The figure ``gpu`` gets on ``basis`` (module docstring: median of the newest quote per provider within
    :data:`RECENCY_DAYS` of the card's newest). ``override`` (the workload's own figure) replaces the quotes."""
    check_basis(basis)
    if override is not None:
        return PriceChoice(gpu.name, basis, float(override), (), override=True)
    kinds = BASIS_KINDS[basis]
    candidates = _per_provider(p for p in gpu.prices if p.kind in kinds and p.amount > 0)
    if not candidates:
        return PriceChoice(gpu.name, basis, None)
    newest = max(q.date for q in candidates)
    recent = [q for q in candidates if (newest - q.date).days <= RECENCY_DAYS]
    recent.sort(key=lambda q: (q.amount, q.date))
    return PriceChoice(gpu.name, basis, float(statistics.median(q.amount for q in recent)), tuple(recent))


def quote_period(choices: Iterable[PriceChoice]) -> tuple[dt.date, dt.date] | None:
    """(first, last) date over the quotes behind ``choices``; None when none is priced from quotes."""
    dates = [d for c in choices for d in (c.first_date, c.last_date) if d is not None]
    return (min(dates), max(dates)) if dates else None
