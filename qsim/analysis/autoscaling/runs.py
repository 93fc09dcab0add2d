"""``qsim autoscale``: autoscaling policies side by side on a scenario, against a static sizing for the peak.

One pool is autoscaled (``pool``: the scenario's first ``[[autoscalers]]``
pool, or its only pool). For each policy the scenario runs ``replications``
times (replication ``r`` with seed ``seed + r`` for every policy: common random
numbers, so the policies see the same arrivals), and each run gives:

- ``worker_seconds`` (and ``worker_hours``): the pool's cost over ``[0, duration]``
  (:mod:`qsim.autoscale.tally`: processes that exist, starting and draining ones too);
- ``attainment``: the share of the run's windows (the Summary's ``windows``,
  :mod:`qsim.results.windows`) that meet the SLO's figure (``p95_wait<=2`` reads each
  window's ``wait_p95``; windows without the figure are left out, as
  :mod:`qsim.analysis.slo.windowed` does);
- ``flaps``, ``scale_events``, ``cut_jobs`` (jobs cut off at a scale-down's grace);
- ``recover_seconds``: the longest stretch of consecutive windows missing the SLO
  (the time to recover after a step in load), 0 when none misses;
- ``p95_wait``: the whole run's p95 wait; ``workers``: mean and max asked for;
- ``elasticity``: the SPEC Research Group's under-/over-provisioning accuracy and
  timeshare and instability (:mod:`qsim.analysis.autoscaling.elasticity`: supplied
  against demanded workers), given the scenario.

``flaps`` are the Summary's (a reversal within the autoscaler's ``flap_window``)
unless :class:`Flaps` sets another window or a least size: then they are counted
again from the trajectory (:func:`qsim.autoscale.tally.count_flaps`).

Each figure is the mean over the runs with a Student-t interval
(:func:`qsim.analysis.stats.estimate`). A policy *meets* the SLO
(``meets_slo``) when the mean over the runs of the SLO's per-run value does —
for ``p95_wait<=2 in 95% of windows`` the share of windows meeting
``p95_wait<=2`` must be at least 0.95 on average; for a plain ``p95_wait<=2``,
the runs' p95 — and ``meets_slo_ci`` says whether its interval does too, as
``qsim plan`` judges a point (:meth:`qsim.analysis.slo.language.SLO.check`; with few
replications the interval is wide: ask for more when it matters).

**Policies.** Those named (``--policy``, each with its parameters derived from
the SLO where the scenario does not give them: see :func:`with_policy`), else
the scenario's autoscaler of the pool, else all four.

**Static peak** (:func:`qsim.analysis.autoscaling.baseline.static_peak`): the least fixed worker count
(no autoscaler) meeting the SLO, with the same replications and figures.

Runs go through :mod:`qsim.analysis.plan.runner` (local processes or Dask), the
``qsim`` policy's recommendations through the ``advisors`` the caller passes in
(:func:`qsim.advise.load.advisors`: the contest never imports the advisor, which plans with it).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qsim.analysis.autoscaling.elasticity import ELASTICITY, run_elasticity
from qsim.analysis.plan.profile import peak_load
from qsim.analysis.plan.runner import Runner, Task
from qsim.analysis.slo.language import SLO
from qsim.analysis.slo.windowed import WINDOW_METRICS, WindowMetric
from qsim.analysis.stats import estimate
from qsim.autoscale.build import Advisors
from qsim.autoscale.predictive import daily_floors, predictive_floors
from qsim.autoscale.tally import DEFAULT_FLAP_SIZE, count_flaps
from qsim.errors import ScenarioError
from qsim.spec.autoscaler import AUTOSCALE_POLICIES
from qsim.spec.autoscaler import FloorSpec
from qsim.spec.scenario import AutoscalerSpec, Scenario

__all__ = ["attainment", "autoscaled_pool", "with_policy",
           "run_metrics", "summarize_runs", "run_scenarios", "recovery", "FIGURES", "Flaps"]

#: The per-run figures a policy reports (mean and interval over the runs).
FIGURES = ("worker_seconds", "worker_hours", "attainment", "flaps", "scale_events", "cut_jobs", "recover_seconds",
           "p95_wait", "mean_workers", "max_workers")
#: The values each figure can take, to which its interval is clipped: a share is in [0, 1], the rest >= 0.
BOUNDS: dict[str, tuple[float | None, float | None]] = {name: (0.0, 1.0 if name == "attainment" else None)
                                                        for name in FIGURES}


@dataclass(frozen=True)
class Flaps:
    """What counts as a flap: a reversal less than ``window`` s after the previous scale event (None: the
    autoscaler's ``flap_window``) changing the count by at least ``size`` workers."""

    window: float | None = None
    size: int = DEFAULT_FLAP_SIZE

    def __post_init__(self) -> None:
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ScenarioError(f"--flap-size must be a whole number of workers >= 1, got {self.size!r}")
        if self.window is not None and not (math.isfinite(self.window) and self.window >= 0):
            raise ScenarioError(f"--flap-window must be a number of seconds >= 0, got {self.window!r}")

    def count(self, scaled: Mapping[str, Any]) -> int:
        """The flaps of one pool's ``autoscaling`` section."""
        if self.window is None and self.size == DEFAULT_FLAP_SIZE:
            return int(scaled["flaps"])
        window = float(scaled["flap_window"]) if self.window is None else self.window
        return count_flaps(scaled["trajectory"], window=window, size=self.size)


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



def derived(policy: str, scenario: Scenario, pool: str, slo: SLO) -> dict[str, Any]:
    """The parameters a policy must have, derived from the SLO (``x``: its number of seconds):

    ``hpa``: the queue length one worker clears in ``x`` s, ``x * concurrency / mean service``;
    ``step``: up when the oldest job is older than ``x``, down below ``x / 4``;
    ``target-tracking``: ``acceptable_latency = x``; ``qsim``: the SLO itself (whole-run form);
    ``schedule`` and ``predictive``: the ``hpa`` target, and for ``schedule`` the floors a team would write
    from the rate profile (the predictive policy's, as times of day widened to whole minutes).
    """
    x = slo.value
    if policy in ("hpa", "schedule", "predictive"):
        out: dict[str, Any] = {
            "target": max(1.0, round(x * scenario.pool(pool).concurrency / _mean_service(scenario, pool), 3))}
        if policy == "schedule":
            out["floors"] = profile_floors(scenario, pool)
        return out
    if policy == "step":
        return {"up_when": x, "down_when": x / 4}
    if policy == "target-tracking":
        return {"acceptable_latency": x}
    return {"slo": f"{slo.metric}{slo.op}{slo.value:g}"}


def profile_floors(scenario: Scenario, pool: str) -> tuple[FloorSpec, ...]:
    """A schedule's floors from the rate profile: the predictive policy's (with the pool's autoscaler's bounds
    and cold start), as times of day widened to whole minutes (a floor of ``min`` when none is above it)."""
    old = scenario.autoscaler(pool)
    common = {k: getattr(old, k) for k in ("min", "max", "start_delay")} if old is not None else {}
    spec = AutoscalerSpec(pool=pool, policy="predictive", **common)
    floors = daily_floors(predictive_floors(scenario, spec), duration=scenario.duration, exact=False)
    return tuple(floors) or (FloorSpec(start="00:00", end="12:00", replicas=max(1, spec.min)),)


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
    fill = derived(policy, scenario, pool, slo)
    if old is not None and old.policy == policy and old.target is None:
        fill.pop("target", None)  # a schedule with no reactive trigger: its floors are its only triggers
    spec = AutoscalerSpec(pool=pool, policy=policy, **{**common, **fill, **own, **params})
    others = tuple(a for a in scenario.autoscalers if a.pool != pool)
    return dataclasses.replace(scenario, autoscalers=others + (spec,))




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
                workers: int | None = None, scenario: Scenario | None = None,
                flaps: Flaps | None = None) -> dict[str, Any]:
    """One run's figures (see the module docstring); ``workers``: the static count when not autoscaled;
    ``scenario``: the run's (for the elasticity figures; None: none); ``flaps``: what counts as a flap."""
    scaled = (summary.get("autoscaling") or {}).get(pool)
    if scaled is not None:
        cost, events, cut = scaled["worker_seconds"], scaled["scale_events"], scaled["cut_jobs"]
        flap_count = (flaps or Flaps()).count(scaled)
        mean_w, max_w = scaled["workers"]["mean"], scaled["workers"]["max"]
    else:
        n = workers or 0
        cost, flap_count, events, cut, mean_w, max_w = n * duration, 0, 0, 0, float(n), n
    stretches = recovery(summary.get("windows") or [], slo)
    elastic = run_elasticity(summary, pool, scenario, workers=workers) if scenario is not None else None
    return {"worker_seconds": cost, "worker_hours": cost / 3600.0, "attainment": attainment(slo, summary),
            "flaps": flap_count, "elasticity": elastic, "scale_events": events, "cut_jobs": cut, "recover_seconds": max(stretches, default=0.0),
            "p95_wait": summary["wait"]["p95"], "mean_workers": mean_w, "max_workers": max_w,
            "slo_value": slo.measure(summary), "lost": summary["jobs"]["lost"]}


def summarize_runs(runs: Sequence[Mapping[str, Any]], slo: SLO, confidence: float = 0.95) -> dict[str, Any]:
    """Mean and interval of each figure over the runs; ``meets_slo``: the mean of the SLO's per-run value
    (for a share of windows: the share meeting it) meets it; ``meets_slo_ci``: its interval does, as
    ``qsim plan`` judges a point."""
    out: dict[str, Any] = {"replications": len(runs), "ci": {}}
    for name in FIGURES:
        est = estimate([r[name] for r in runs], confidence, bounds=BOUNDS[name])
        out[name] = est.mean
        out["ci"][name] = est.ci
    out["lost"] = sum(int(r["lost"]) for r in runs)
    elastic = [r["elasticity"] for r in runs if r.get("elasticity") is not None]
    if elastic:
        out["elasticity"] = {k: estimate([e[k] for e in elastic if e[k] is not None], confidence).mean
                             if any(e[k] is not None for e in elastic) else None for k in ELASTICITY}
    est = estimate([r["slo_value"] for r in runs], confidence, bounds=slo.target.bounds)
    op, limit = slo.judged
    out["meets_slo"] = est.mean is not None and _OPS[op](est.mean, limit)
    out["meets_slo_ci"] = slo.check(est) == "met"
    out["slo_value"] = est.mean
    return out


def run_scenarios(runner: Runner, scenarios: Sequence[Scenario], seeds: Sequence[int], *,
                  advisors: Advisors | None = None,
                  done: Callable[[int], None] | None = None) -> list[list[dict[str, Any]]]:
    """Every scenario with every seed (each ``qsim`` autoscaler with its advisor from ``advisors``);
    ``[scenario][seed]`` Summaries."""
    tasks = [Task(s, seed, recommend=(dict(advisors(s)) or None) if advisors else None)
             for s in scenarios for seed in seeds]
    flat = runner.map(tasks, done)
    k = len(seeds)
    return [[r["summary"] for r in flat[i * k:(i + 1) * k]] for i in range(len(scenarios))]
