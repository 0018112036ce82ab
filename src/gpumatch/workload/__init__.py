"""Workload profiles: what the user wants to run, under which targets and limits (TOML or YAML).

Public API:

- :func:`load_workload` (path -> :class:`Workload`), :func:`build_workload` (validated file -> Workload);
- :class:`Workload` and its parts (:class:`Precision`, :class:`Shape`, :class:`Targets`, :class:`Limits`,
  :class:`PowerBudget`, :class:`Money`), all frozen and in SI units;
- :class:`WorkloadFile` (the pydantic schema) and the vocabularies :data:`TASKS`, :data:`PRECISIONS`,
  :data:`ROLES`, :data:`SCORE_TERMS`, :data:`TRAINING_TASKS`;
- the request rules shared with the ``estimate`` and ``plan`` flags (:mod:`gpumatch.workload.rules`):
  :func:`misplaced_options`, :func:`check_context`, :func:`context_problem`.
"""

from gpumatch.workload.loader import build_workload, load_workload
from gpumatch.workload.rules import check_context, context_problem, misplaced_options
from gpumatch.workload.schema import PRECISIONS, ROLES, SCORE_TERMS, TASKS, TRAINING_TASKS, WorkloadFile
from gpumatch.workload.spec import Limits, Money, PowerBudget, Precision, Shape, Targets, Workload

__all__ = [
    "PRECISIONS",
    "ROLES",
    "SCORE_TERMS",
    "TASKS",
    "TRAINING_TASKS",
    "Limits",
    "Money",
    "PowerBudget",
    "Precision",
    "Shape",
    "Targets",
    "Workload",
    "WorkloadFile",
    "build_workload",
    "check_context",
    "context_problem",
    "load_workload",
    "misplaced_options",
]
