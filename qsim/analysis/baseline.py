"""The static baseline over a rate profile: the least workers that meet the SLOs all day, and their cost.

:func:`static_peak` sizes one pool with a fixed number of workers for the
whole profile (a plan over ``pools.POOL.workers``, judged as the SLOs say:
over the windows for ``p95_wait<=2 in 95% of windows``) and reports what that
costs in worker-seconds over the profile and how many windows meet each SLO.
It is the baseline an autoscaler is compared with (``qsim autoscale``'s
``static_peak``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from qsim.analysis.plan import SLO, parse_slo, plan
from qsim.analysis.profile import peak_load, static_cost
from qsim.analysis.stats import mean_summary
from qsim.analysis.sweep import with_params
from qsim.analysis.windowed import WindowMetric
from qsim.errors import ScenarioError
from qsim.scenario import Scenario

__all__ = ["static_peak", "attainment"]


def attainment(slo: SLO, summary: Mapping[str, Any]) -> float | None:
    """The share of a run's windows meeting the SLO's per-window test (``p95_wait<=2``), None without windows."""
    return WindowMetric(slo.metric, slo.op, slo.value, "share").measure(summary)


def static_peak(scenario: Scenario, slos: Sequence[SLO | str], *, pool: str | None = None,
                max_workers: int | None = None, replications: int | str = 1, confidence: float = 0.95,
                seed: int | None = None, max_jobs: int | None = None, processes: int | None = None,
                progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """The least static ``workers`` of ``pool`` that meets every SLO over the whole profile, and its cost.

    A :func:`~qsim.analysis.plan.plan` over ``pools.POOL.workers = 1..max_workers``
    (bisection; default range: up to twice the workers the peak keeps busy, and
    at least the pool's own count), the other pools as they are.

    Returns:
        ``{"pool", "workers" (None: no count in the range meets the SLOs), "worker_seconds",
        "worker_hours", "span", "attainment": {slo: share of windows meeting its per-window test, in the
        point's mean run}, "slo": [...], "plan": PlanResult}``; the cost is the whole scenario's (every
        pool) at that count.
    """
    goals = [s if not isinstance(s, str) else parse_slo(s) for s in slos]
    if pool is None:
        if len(scenario.pools) != 1:
            raise ScenarioError(f"static_peak: name the pool to size, one of {', '.join(p.name for p in scenario.pools)}")
        pool = scenario.pools[0].name
    try:
        spec = scenario.pool(pool)
    except KeyError:
        raise ScenarioError(f"static_peak: no pool {pool!r} (defined: "
                            f"{', '.join(p.name for p in scenario.pools)})") from None
    top = max_workers or max(spec.workers, math.ceil(2 * peak_load(scenario, pool)) + 2)
    path = f"pools.{pool}.workers"
    result = plan(scenario, goals, {path: list(range(1, top + 1))}, seed=seed, max_jobs=max_jobs,
                  processes=processes, replications=replications, confidence=confidence, search="auto",
                  progress=progress)
    best = result["recommended"]
    out: dict[str, Any] = {"pool": pool, "workers": None if best is None else int(best[path]),
                           "slo": [str(g) for g in goals], "plan": result}
    if best is None:
        out.update(worker_seconds=None, worker_hours=None, span=[0.0, scenario.duration], attainment={})
        return out
    cost = static_cost(with_params(scenario, best))
    point = next(p for p in result["points"] if p["params"] == best)
    summary = point["summary"] if isinstance(point["summary"], Mapping) else mean_summary(point["summary"])
    out.update(worker_seconds=cost["worker_seconds"], worker_hours=cost["worker_hours"], span=cost["span"],
               attainment={str(g): attainment(g, summary) for g in goals})
    return out
