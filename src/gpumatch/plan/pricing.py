"""One price basis for every candidate of a plan: the per-GPU prices it uses and the summary it reports.

:func:`plan_prices` prices every GPU with :func:`gpumatch.catalog.prices.select_price` (the function
``gpumatch estimate`` uses) on the request's ``price_basis``, and separately at its purchase price (the budget
rule reads purchase prices whatever the basis: a purchase budget does not switch the cost term to owned). The
workload's own prices (``money.usd_per_gpu_hour`` on an hourly basis, ``money.purchase_usd_per_gpu``) replace the
catalog's figure of that card. :func:`price_summary` is the plan's ``price_basis`` section (JSON and header).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumatch.catalog import GpuSpec
from gpumatch.catalog.prices import HOURLY_BASES, RECENCY_DAYS, PriceChoice, quote_period, select_price, unpriced_mark
from gpumatch.plan.request import PlanRequest

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Prices:
    """Per-GPU prices of one plan (index = GPU table position), on the request's basis.

    ``hourly``: USD per GPU-hour on an hourly basis (NaN on the purchase basis or without a quote);
    ``purchase``: USD per card (the budget rule and the purchase basis; NaN = unknown); ``choices`` and
    ``purchase_choices``: the selections behind them (figure, spread, quotes) for the plan's JSON and text.
    """

    basis: str
    hourly: FloatArray
    purchase: FloatArray
    choices: tuple[PriceChoice, ...]
    purchase_choices: tuple[PriceChoice, ...]


def plan_prices(req: PlanRequest, specs: tuple[GpuSpec, ...]) -> Prices:
    """Every GPU's figure on ``req.price_basis`` and its purchase price, overrides of the workload applied."""
    def pick(g: GpuSpec, basis: str) -> PriceChoice:
        own = req.purchase_usd_per_gpu if basis == "purchase" else req.usd_per_gpu_hour
        return select_price(g, basis, own.get(g.name))

    buy = tuple(pick(g, "purchase") for g in specs)
    choices = buy if req.price_basis == "purchase" else tuple(pick(g, req.price_basis) for g in specs)

    def values(cs: tuple[PriceChoice, ...]) -> FloatArray:
        return np.array([np.nan if c.value is None else c.value for c in cs], dtype=float)

    hourly = values(choices) if req.price_basis in HOURLY_BASES else np.full(len(specs), np.nan)
    return Prices(req.price_basis, hourly, values(buy), choices, buy)


def price_summary(req: PlanRequest, prices: Prices, considered: list[int]) -> dict[str, Any]:
    """The plan's ``price_basis`` section: the basis, the rule, the months of the quotes used, the considered GPUs
    without a price on the basis, and (with a budget) those without a purchase price (budget not checked)."""
    chosen = [prices.choices[i] for i in considered]
    period = quote_period(chosen)
    unpriced = sorted(c.gpu for c in chosen if not c.priced)
    unchecked = sorted(prices.purchase_choices[i].gpu for i in considered
                       if req.budget_usd and not prices.purchase_choices[i].priced)
    rule = ("your own prices where the workload gives them, else " if any(c.override for c in chosen) else "")
    rule += f"median of the newest quote per provider within {RECENCY_DAYS} days of the card's newest"
    out: dict[str, Any] = {
        "basis": req.price_basis, "rule": rule,
        "first_date": None if period is None else period[0].isoformat(),
        "last_date": None if period is None else period[1].isoformat(),
        "unpriced": unpriced, "mark": unpriced_mark(req.price_basis),
        "budget_basis": "purchase" if req.budget_usd else None, "budget_unchecked": unchecked,
    }
    out["text"] = price_header(out)
    return out


def price_header(p: dict[str, Any]) -> str:
    """The plan header's price line (the view prefixes "prices: "): ``on-demand, median of providers, quotes
    2025-06..2026-12``, then how many GPU models were ranked without the cost term."""
    when = (f"quotes {p['first_date'][:7]}..{p['last_date'][:7]}" if p["first_date"] else "no quotes")
    text = f"{p['basis']}, median of providers, {when}"
    if p["unpriced"]:
        n = len(p["unpriced"])
        text += f"; {n} GPU model{'s' * (n > 1)} with {p['mark']} ranked without the cost term"
    if p["budget_basis"]:
        text += "; budget checked against purchase prices"
    return text
