"""Capacity planning: the plan (:mod:`~qsim.analysis.plan.planner`), sweeps, grid search, where runs execute,
replication statistics, run length, cost, plans over a rate profile, and the plan's result.

``from qsim.analysis.plan import plan, SLO`` keeps working: the planner's names are re-exported here.
"""

from __future__ import annotations

from qsim.analysis.plan.planner import (
    AUTO_MAX,
    AUTO_START,
    AUTO_STEP,
    DEFAULT_METRICS,
    SLO,
    PlanResult,
    parse_slo,
    plan,
)

__all__ = ["SLO", "parse_slo", "plan", "PlanResult", "AUTO_START", "AUTO_STEP", "AUTO_MAX", "DEFAULT_METRICS"]
