"""Estimators: memory fit, roofline time, communication, power and cost. Pure functions, no torch, no store.

Scalar: :func:`estimate` (one :class:`Request` -> :class:`Estimate`). Vectorized: :func:`evaluate` on a
:class:`Case` whose fields are numpy arrays (the planner's path). Efficiencies come from a
:class:`Calibration` value with its basis and provenance.
"""

from gpumatch.estimate.api import estimate, memory_curve, model_arch, pass_costs, resolve_gpu, run_metrics
from gpumatch.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from gpumatch.estimate.case import Case, ModelNums, model_nums
from gpumatch.estimate.engine import INFER_TASKS, TASKS, TRAIN_TASKS, evaluate, memory_items, scaling
from gpumatch.estimate.options import build_case
from gpumatch.estimate.passes import PassCost, PassShape
from gpumatch.estimate.power import DEFAULT_SITE, Site
from gpumatch.estimate.request import Request
from gpumatch.estimate.results import Estimate, MemoryEstimate, PriceBasis
from gpumatch.estimate.roofline import BOUNDS

__all__ = [
    "BOUNDS",
    "DEFAULT_CALIBRATION",
    "DEFAULT_SITE",
    "INFER_TASKS",
    "TASKS",
    "TRAIN_TASKS",
    "Calibration",
    "Case",
    "Estimate",
    "MemoryEstimate",
    "ModelNums",
    "PassCost",
    "PassShape",
    "PriceBasis",
    "Request",
    "Site",
    "build_case",
    "estimate",
    "evaluate",
    "memory_curve",
    "memory_items",
    "model_arch",
    "model_nums",
    "pass_costs",
    "resolve_gpu",
    "run_metrics",
    "scaling",
]
