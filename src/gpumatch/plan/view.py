"""The plan request of ``gpumatch plan``: a workload file (if any) with the CLI options on top.

Rendering a plan (the summary, ``--verbose``, CSV rows) is the report layer's: :mod:`gpumatch.report.plan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpumatch.plan.inputs import PlanRequest, from_workload, with_options


def plan_request(workload: str | None, model: str | None, **options: Any) -> PlanRequest:
    """The request of a workload file (if any) with the CLI options on top; GPU names resolved in the catalog."""
    from gpumatch.catalog import load_catalog
    from gpumatch.models import resolve_model
    from gpumatch.workload import load_workload

    base = from_workload(load_workload(workload)) if workload else None
    arch = resolve_model(model) if model else None
    for key in ("gpus_allow", "gpus_deny"):
        names: Sequence[str] | None = options.get(key)
        if names:
            catalog = load_catalog()
            options[key] = tuple(catalog.get(n).name for n in names)
        else:
            options[key] = None
    return with_options(base, arch, **options)
