"""Planner: candidate enumeration, feasibility rules with reasons, role scoring and the shortlist.

Public API: :func:`plan` (a :class:`~gpumatch.workload.Workload` or a :class:`PlanRequest` -> :class:`Plan`),
:class:`PlanRequest` and :func:`from_workload`, the roles (:data:`ROLES`) and the rules (:data:`RULES`).
"""

from gpumatch.plan.planner import Plan, plan
from gpumatch.plan.request import PlanRequest, from_workload
from gpumatch.plan.roles import ROLES, Role
from gpumatch.plan.rules import RULES

__all__ = ["ROLES", "RULES", "Plan", "PlanRequest", "Role", "from_workload", "plan"]
