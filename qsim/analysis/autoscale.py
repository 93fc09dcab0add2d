"""``qsim autoscale``: autoscaling policies side by side on a scenario, against a static sizing for the peak.

One pool is autoscaled (``pool``: the scenario's first ``[[autoscalers]]``
pool, or its only pool). For each policy the scenario runs ``replications``
times (replication ``r`` with seed ``seed + r`` for every policy: common random
numbers, so the policies see the same arrivals), and each run gives:

- ``worker_seconds`` (and ``worker_hours``): the pool's cost over ``[0, duration]``
  (:mod:`qsim.autoscale.tally`: processes that exist, starting and draining ones too);
- ``attainment``: the share of the run's windows (the Summary's ``windows``,
  :mod:`qsim.windows`) that meet the SLO's figure (``p95_wait<=2`` reads each
  window's ``wait_p95``; windows without the figure are left out, as
  :mod:`qsim.analysis.windowed` does);
- ``flaps``, ``scale_events``, ``cut_jobs`` (jobs cut off at a scale-down's grace);
- ``recover_seconds``: the longest stretch of consecutive windows missing the SLO
  (the time to recover after a step in load), 0 when none misses;
- ``p95_wait``: the whole run's p95 wait; ``workers``: mean and max asked for.

Each figure is the mean over the runs with a Student-t interval
(:func:`qsim.analysis.stats.estimate`). A policy *meets* the SLO
(``meets_slo``) when the mean over the runs of the SLO's per-run value does —
for ``p95_wait<=2 in 95% of windows`` the share of windows meeting
``p95_wait<=2`` must be at least 0.95 on average; for a plain ``p95_wait<=2``,
the runs' p95 — and ``meets_slo_ci`` says whether its interval does too, as
``qsim plan`` judges a point (:meth:`qsim.analysis.plan.SLO.check`; with few
replications the interval is wide: ask for more when it matters).

**Policies.** Those named (``--policy``, each with its parameters derived from
the SLO where the scenario does not give them: see :func:`with_policy`), else
the scenario's autoscaler of the pool, else all four.

**Static peak** (:func:`static_peak`): the least fixed worker count (no
autoscaler) that meets the SLO, found by bisection along the worker count
(:func:`qsim.analysis.search.recommend`) with the same replications, from the
peak of the arrival profile; its cost is ``workers x duration``.

Runs go through :mod:`qsim.analysis.runner` (local processes or Dask), the
``qsim`` policy's recommendations through :class:`qsim.advise.load.LoadAdvisor`.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qsim.advise.capacity import search_range
from qsim.advise.load import LoadAdvisor
from qsim.analysis.plan import SLO
from qsim.analysis.runner import Runner, Task
from qsim.analysis.search import recommend
from qsim.analysis.stats import estimate
from qsim.analysis.windowed import WINDOW_METRICS, WindowMetric
from qsim.autoscale.build import needs_advice
from qsim.errors import ScenarioError
from qsim.scenario import AutoscalerSpec, Scenario
from qsim.scenario_autoscale import AUTOSCALE_POLICIES

__all__ = ["attainment", "autoscaled_pool", "with_policy", "static_scenario", "advisors",
           "run_metrics", "summarize_runs", "run_scenarios", "static_peak", "peak_load", "recovery", "FIGURES"]

#: The per-run figures a policy reports (mean and interval over the runs).
FIGURES = ("worker_seconds", "worker_hours", "attainment", "flaps", "scale_events", "cut_jobs", "recover_seconds",
           "p95_wait", "mean_workers", "max_workers")
_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, "<": operator.lt, ">=": operator.ge,
                                                   ">": operator.gt, "==": operator.eq}


def attainment(slo: SLO, summary: Mapping[str, Any]) -> float | None:
    """The share of the run's windows meeting ``slo``'s figure (None: no window has one, or the metric has
    no per-window figure)."""
    if slo.metric not in WINDOW_METRICS:
        return None
    return WindowMetric(slo.metric, slo.op, slo.value, "share").measure(summary)


def _window_met(slo: SLO, window: Mapping[str, Any]) -> bool:
    value = window.get(WINDOW_METRICS.get(slo.metric, ""))
    return value is None or _OPS[slo.op](float(value), slo.value)  # a window without the figure misses nothing


# ------------------------------------------------------------------ scenarios


def autoscaled_pool(scenario: Scenario, pool: str | None = None) -> str:
    """The pool ``qsim autoscale`` works on: ``pool``, else the first autoscaled one, else the only one."""
    names = [p.name for p in scenario.pools]
    if pool is not None:
        if pool not in names:
            raise ScenarioError(f"--pool names no pool: {pool!r} (defined: {', '.join(names)})")
        return pool
    if scenario.autoscalers:
        return scenario.autoscalers[0].pool
    if len(names) == 1:
        return names[0]
    raise ScenarioError("the scenario has several pools and no [[autoscalers]]: say which with --pool")


def _mean_service(scenario: Scenario, pool: str) -> float:
    served = set(scenario.pool(pool).queues)
    types = [j for j in scenario.jobs if j.queue in served]
    rates = [j.arrival.rate if j.arrival is not None else 0.0 for j in types]
    total = sum(rates)
    if total <= 0:
        return sum(j.service.mean for j in types) / max(len(types), 1)
    return sum(r * j.service.mean for r, j in zip(rates, types)) / total


def _peak_rate(arrival: Any) -> float:
    profile = getattr(arrival, "profile", None)
    if profile is not None and profile.mean > 0:
        return float(arrival.rate * profile.peak / profile.mean)
    return float(arrival.rate)


def peak_load(scenario: Scenario, pool: str) -> float:
    """Busy slots the pool's queues offer at the peak of their arrival rates."""
    served = set(scenario.pool(pool).queues)
    return sum(_peak_rate(j.arrival) * j.service.mean for j in scenario.jobs
               if j.queue in served and j.arrival is not None)


def derived(policy: str, scenario: Scenario, pool: str, slo: SLO) -> dict[str, Any]:
    """The parameters a policy must have, derived from the SLO (``x``: its number of seconds):

    ``hpa``: the queue length one worker clears in ``x`` s, ``x * concurrency / mean service``;
    ``step``: up when the oldest job is older than ``x``, down below ``x / 4``;
    ``target-tracking``: ``acceptable_latency = x``; ``qsim``: the SLO itself (whole-run form).
    """
    x = slo.value
    if policy == "hpa":
        return {"target": max(1.0, round(x * scenario.pool(pool).concurrency / _mean_service(scenario, pool), 3))}
    if policy == "step":
        return {"up_when": x, "down_when": x / 4}
    if policy == "target-tracking":
        return {"acceptable_latency": x}
    return {"slo": f"{slo.metric}{slo.op}{slo.value:g}"}


def with_policy(scenario: Scenario, pool: str, policy: str, slo: SLO, **params: Any) -> Scenario:
    """The scenario with ``pool`` autoscaled by ``policy``.

    The pool's autoscaler keeps its common keys (min, max, start_delay, grace,
    poll, flap_window); its own parameters are kept when the policy is the
    same; the rest come from ``params``, then :func:`derived`, then the
    defaults. Without an autoscaler: ``min`` 1, ``max`` twice the static peak
    count's neighbourhood (four times the peak load's slots, at least 4).
    """
    if policy not in AUTOSCALE_POLICIES:
        raise ScenarioError(f"--policy must be one of {', '.join(AUTOSCALE_POLICIES)}, got {policy!r}")
    old = scenario.autoscaler(pool)
    c = scenario.pool(pool).concurrency
    if old is not None:
        common = {k: getattr(old, k) for k in ("min", "max", "start_delay", "grace", "poll", "flap_window")}
    else:
        common = {"min": 1, "max": max(4, math.ceil(4 * peak_load(scenario, pool) / c))}
    own = old.filled() if old is not None and old.policy == policy else {}
    own.pop("policy", None)
    spec = AutoscalerSpec(pool=pool, policy=policy, **{**common, **derived(policy, scenario, pool, slo), **own,
                                                       **params})
    others = tuple(a for a in scenario.autoscalers if a.pool != pool)
    return dataclasses.replace(scenario, autoscalers=others + (spec,))


def static_scenario(scenario: Scenario, pool: str, workers: int) -> Scenario:
    """The scenario with ``pool`` fixed at ``workers`` processes (its autoscaler removed)."""
    pools = tuple(dataclasses.replace(p, workers=workers) if p.name == pool else p for p in scenario.pools)
    return dataclasses.replace(scenario, pools=pools, autoscalers=tuple(a for a in scenario.autoscalers
                                                                       if a.pool != pool))


def advisors(scenario: Scenario) -> dict[str, LoadAdvisor]:
    """A :class:`~qsim.advise.load.LoadAdvisor` per autoscaler that scales on the recommendation.

    Its plans use seeds from 0, whatever the run's seed (a deployed advisor's own
    default): every run asks the same questions, and one process answers each once.
    """
    return {a.pool: LoadAdvisor(str(a.params()["slo"]), concurrency=scenario.pool(a.pool).concurrency,
                                max_workers=max(a.max, 1))
            for a in scenario.autoscalers if needs_advice(a)}


# ------------------------------------------------------------------ runs and their figures


def recovery(windows: Sequence[Mapping[str, Any]], slo: SLO) -> list[float]:
    """The lengths (s) of the stretches of consecutive windows missing the SLO's per-window figure."""
    out: list[float] = []
    start: float | None = None
    last = 0.0
    for w in windows:
        if not _window_met(slo, w):
            start = float(w["start"]) if start is None else start
            last = float(w["end"])
        elif start is not None:
            out.append(last - start)
            start = None
    if start is not None:
        out.append(last - start)
    return out


def run_metrics(summary: Mapping[str, Any], pool: str, slo: SLO, *, duration: float,
                workers: int | None = None) -> dict[str, Any]:
    """One run's figures (see the module docstring); ``workers``: the static count when not autoscaled."""
    scaled = (summary.get("autoscaling") or {}).get(pool)
    if scaled is not None:
        cost, flaps, events, cut = scaled["worker_seconds"], scaled["flaps"], scaled["scale_events"], scaled["cut_jobs"]
        mean_w, max_w = scaled["workers"]["mean"], scaled["workers"]["max"]
    else:
        n = workers or 0
        cost, flaps, events, cut, mean_w, max_w = n * duration, 0, 0, 0, float(n), n
    stretches = recovery(summary.get("windows") or [], slo)
    return {"worker_seconds": cost, "worker_hours": cost / 3600.0, "attainment": attainment(slo, summary),
            "flaps": flaps, "scale_events": events, "cut_jobs": cut, "recover_seconds": max(stretches, default=0.0),
            "p95_wait": summary["wait"]["p95"], "mean_workers": mean_w, "max_workers": max_w,
            "slo_value": slo.measure(summary), "lost": summary["jobs"]["lost"]}


def summarize_runs(runs: Sequence[Mapping[str, Any]], slo: SLO, confidence: float = 0.95) -> dict[str, Any]:
    """Mean and interval of each figure over the runs; ``meets_slo``: the mean of the SLO's per-run value
    (for a share of windows: the share meeting it) meets it; ``meets_slo_ci``: its interval does, as
    ``qsim plan`` judges a point."""
    out: dict[str, Any] = {"replications": len(runs), "ci": {}}
    for name in FIGURES:
        est = estimate([r[name] for r in runs], confidence)
        out[name] = est.mean
        out["ci"][name] = est.ci
    out["lost"] = sum(int(r["lost"]) for r in runs)
    est = estimate([r["slo_value"] for r in runs], confidence, bounds=slo.target.bounds)
    op, limit = slo.judged
    out["meets_slo"] = est.mean is not None and _OPS[op](est.mean, limit)
    out["meets_slo_ci"] = slo.check(est) == "met"
    out["slo_value"] = est.mean
    return out


def run_scenarios(runner: Runner, scenarios: Sequence[Scenario], seeds: Sequence[int], *,
                  done: Callable[[int], None] | None = None) -> list[list[dict[str, Any]]]:
    """Every scenario with every seed (each ``qsim`` autoscaler with its advisor); ``[scenario][seed]`` Summaries."""
    tasks = [Task(s, seed, recommend=advisors(s) or None) for s in scenarios for seed in seeds]
    flat = runner.map(tasks, done)
    k = len(seeds)
    return [[r["summary"] for r in flat[i * k:(i + 1) * k]] for i in range(len(scenarios))]


def static_peak(scenario: Scenario, pool: str, slo: SLO, runner: Runner, seeds: Sequence[int], *,
                max_workers: int = 1000) -> dict[str, Any]:
    """The least fixed worker count meeting the SLO (bisection from the peak load; see the module docstring)."""
    c = scenario.pool(pool).concurrency
    lo, hi = search_range(peak_load(scenario, pool), c, 1, max_workers=max_workers)
    lo = max(1, min(lo, max_workers))
    found: dict[int, list[dict[str, Any]]] = {}

    def evaluate(points: list[dict[str, Any]]) -> list[bool]:
        todo = [int(p["workers"]) for p in points if int(p["workers"]) not in found]
        results = run_scenarios(runner, [static_scenario(scenario, pool, n) for n in todo], seeds)
        for n, summaries in zip(todo, results):
            found[n] = [run_metrics(s, pool, slo, duration=scenario.duration, workers=n) for s in summaries]
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
