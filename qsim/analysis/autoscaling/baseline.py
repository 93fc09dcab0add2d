"""The static baseline an autoscaler is judged against: the least fixed worker count meeting the SLO.

:func:`static_peak` is ``qsim autoscale``'s ``static_peak``: the autoscaled pool
fixed at ``n`` workers (:func:`static_scenario`, its autoscaler removed), ``n``
found by bisection along the worker count
(:func:`qsim.analysis.plan.search.recommend`) from the range the peak load
gives (:func:`qsim.analysis.plan.profile.peak_load`,
:func:`qsim.analysis.plan.search.search_range`), doubling it while no count
meets the SLO. Each count runs with the same seeds as the policies and is
judged as they are (:func:`~qsim.analysis.autoscaling.runs.summarize_runs`);
its cost is ``workers x duration``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from qsim.analysis.autoscaling.runs import run_metrics, run_scenarios, summarize_runs
from qsim.analysis.plan.profile import peak_load
from qsim.analysis.plan.runner import Runner
from qsim.analysis.plan.search import recommend, search_range
from qsim.analysis.slo.language import SLO
from qsim.autoscale.build import Advisors
from qsim.spec.scenario import Scenario

__all__ = ["static_scenario", "static_peak"]


def static_scenario(scenario: Scenario, pool: str, workers: int) -> Scenario:
    """The scenario with ``pool`` fixed at ``workers`` processes (its autoscaler removed)."""
    pools = tuple(dataclasses.replace(p, workers=workers) if p.name == pool else p for p in scenario.pools)
    return dataclasses.replace(scenario, pools=pools, autoscalers=tuple(a for a in scenario.autoscalers
                                                                       if a.pool != pool))


def static_peak(scenario: Scenario, pool: str, slo: SLO, runner: Runner, seeds: Sequence[int], *,
                max_workers: int = 1000, advisors: Advisors | None = None) -> dict[str, Any]:
    """The least fixed worker count meeting the SLO (see the module docstring)."""
    c = scenario.pool(pool).concurrency
    lo, hi = search_range(peak_load(scenario, pool), c, 1, max_workers=max_workers)
    lo = max(1, min(lo, max_workers))
    found: dict[int, list[dict[str, Any]]] = {}

    def evaluate(points: list[dict[str, Any]]) -> list[bool]:
        todo = [int(p["workers"]) for p in points if int(p["workers"]) not in found]
        results = run_scenarios(runner, [static_scenario(scenario, pool, n) for n in todo], seeds,
                                advisors=advisors)
        for n, summaries in zip(todo, results):
            found[n] = [run_metrics(s, pool, slo, duration=scenario.duration, workers=n, scenario=scenario)
                        for s in summaries]
        return [summarize_runs(found[int(p["workers"])], slo)["meets_slo"] for p in points]

    while True:
        best, _ = recommend({"workers": list(range(lo, hi + 1))}, evaluate, axis="workers")
        if best or hi >= max_workers:
            break
        lo, hi = hi + 1, min(2 * hi, max_workers)
    if not best:
        return {"workers": None, "reason": f"no fixed count from 1 to {hi} workers meets {slo}"}
    n = int(best[0]["workers"])
    out = summarize_runs(found[n], slo)
    return {"workers": n, **out, "searched": sorted(found)}
