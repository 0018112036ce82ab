"""Cost per hour, per million tokens and per run (estimator-formulas.md section F).

- Cloud (on-demand, reserved or spot basis): ``count × $/GPU-hour`` (energy and facility are in the price).
- Owned (purchase basis): purchase price amortized over ``lifetime_years × duty_fraction`` of the hours, plus
  facility energy (GPU + host share, × PUE) at the electricity price, plus a facility charge per GPU-hour.
- ``$ / 1M tokens = $/h / (tokens/s × 3600) × 1e6``; ``$ / run = $/h × run hours``.
The inputs (``Case.usd_per_gpu_hour``, ``Case.purchase_usd``) come from
:func:`gpumatch.catalog.prices.select_price` (median of providers on one basis); the quotes behind them travel
in ``Estimate.price`` and in each plan entry's ``price``.
"""

from __future__ import annotations

from gpumatch.estimate._num import Num
from gpumatch.estimate.power import Site

HOURS_PER_YEAR = 8766.0


def cloud_usd_per_hour(usd_per_gpu_hour: Num, count: Num) -> Num:
    return usd_per_gpu_hour * count


def owned_usd_per_hour(purchase_usd: Num, facility_w: Num, count: Num, site: Site) -> Num:
    """Amortized capex + energy + facility for ``count`` GPUs drawing ``facility_w`` at the wall."""
    capex = purchase_usd / (site.lifetime_years * HOURS_PER_YEAR * site.duty_fraction)
    energy = facility_w / 1000.0 * site.electricity_usd_per_kwh
    return capex * count + energy + site.facility_usd_per_gpu_hour * count


def usd_per_million_tokens(usd_per_hour: Num, tokens_per_s: Num) -> Num:
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6
