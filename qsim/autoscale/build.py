"""A controller from a scenario's ``[[autoscalers]]`` table (:class:`~qsim.spec.scenario.AutoscalerSpec`).

The ``qsim`` policy (and an ``hpa`` on ``recommended_workers``) scales on
``qsim advise``'s recommendation; the caller passes it in as ``recommend``
(:class:`qsim.advise.load.LoadAdvisor` for a measured load, or a real
advisor's gauge on the engine): policy code never imports the planner. The
``predictive`` policy derives its floors from the scenario's rate profile
(:func:`qsim.autoscale.predictive.predictive_floors`): the caller passes the scenario.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping

from qsim.autoscale.hpa import HPA, Recommend
from qsim.autoscale.observe import WindowStats
from qsim.autoscale.predictive import predictive_floors
from qsim.autoscale.schedule import Scheduled
from qsim.autoscale.step import Step
from qsim.autoscale.tracking import TargetTracking
from qsim.engine.metrics import WAIT_BUCKETS
from qsim.spec.autoscaler import HpaSpec, PredictiveSpec, QsimSpec, ScheduleSpec, StepSpec, TargetTrackingSpec
from qsim.spec.scenario import AutoscalerSpec, PoolSpec, Scenario

__all__ = ["controller", "needs_advice", "metric_window", "metric_stats", "metric_lag", "Controller", "Advisors",
           "LAWS", "decision_times", "lagged_times"]

Controller = HPA | Step | TargetTracking | Scheduled
#: What gives a scenario's advisors: pool -> the ``recommend`` of each autoscaler that scales on the
#: recommendation (:func:`qsim.advise.load.advisors`); the caller passes it in, so analysis never imports advise.
Advisors = Callable[[Scenario], Mapping[str, Recommend]]
#: The control law of each policy; each reads its policy's typed spec in its own ``from_spec`` (a schedule's and a
#: predictive policy's ``from_floor_spec``).
LAWS: dict[str, type[HPA] | type[Step] | type[TargetTracking] | type[Scheduled]] = {
    "hpa": HPA, "qsim": HPA, "step": Step, "target-tracking": TargetTracking, "schedule": Scheduled,
    "predictive": Scheduled}


def needs_advice(spec: AutoscalerSpec) -> bool:
    """Whether the autoscaler scales on ``qsim advise``'s recommendation."""
    law = spec.law
    if isinstance(law, QsimSpec):
        return True
    return (isinstance(law, (HpaSpec, ScheduleSpec, PredictiveSpec)) and law.metric == "recommended_workers"
            and law.target is not None)


def metric_window(spec: AutoscalerSpec) -> float:
    """Seconds of the window its p95 wait, arrival rate and service time are measured over."""
    return float(spec.law.window)


def metric_stats(spec: AutoscalerSpec) -> WindowStats:
    """An empty window of ``spec``'s length; its p95 wait from the wait histogram's buckets when ``p95_buckets``."""
    return WindowStats(metric_window(spec), WAIT_BUCKETS if getattr(spec.law, "p95_buckets", False) else None)


def metric_lag(spec: AutoscalerSpec) -> float:
    """Seconds before a decision its metrics are taken (``metric_lag``; 0 for policies that have none)."""
    return float(getattr(spec.law, "metric_lag", 0.0))


def controller(spec: AutoscalerSpec, pool: PoolSpec, *, recommend: Recommend | None = None,
               scenario: Scenario | None = None) -> Controller:
    """The controller for ``spec`` on ``pool`` (a fresh one: controllers keep state between polls).

    Raises:
        ValueError: the policy scales on the recommendation (:func:`needs_advice`) and ``recommend`` is None,
            or it is ``predictive`` and ``scenario`` (whose rate profile it reads) is None.
    """
    if needs_advice(spec) and recommend is None:
        raise ValueError(f"the {spec.policy} autoscaler of pool {spec.pool!r} scales on qsim advise's "
                         "recommendation: pass recommend (e.g. qsim.advise.load.LoadAdvisor)")
    law, low, high = spec.law, spec.min, spec.max
    if isinstance(law, PredictiveSpec):
        if scenario is None:
            raise ValueError(f"the predictive autoscaler of pool {spec.pool!r} reads the scenario's rate profile: "
                             "pass scenario")
        return Scheduled.from_floor_spec(law, min=low, max=high, recommend=recommend, floors=predictive_floors(scenario, spec))
    if isinstance(law, ScheduleSpec):
        return Scheduled.from_floor_spec(law, min=low, max=high, recommend=recommend, poll=spec.poll)
    if isinstance(law, StepSpec):
        return Step.from_spec(law, min=low, max=high)
    if isinstance(law, TargetTrackingSpec):
        return TargetTracking.from_spec(law, min=low, max=high, concurrency=pool.concurrency)
    return HPA.from_spec(law, min=low, max=high, recommend=recommend, poll=spec.poll)


def decision_times(control: Controller, spec: AutoscalerSpec) -> Iterator[float]:
    """The times (s from the run's start) the driver asks ``control`` for a decision: 0, then every multiple
    of each of its periods (an HPA's ``sync`` and, when KEDA scales it to zero, ``poll``; the other
    policies' ``poll``), in order, each time once."""
    periods = getattr(control, "periods", ()) or (spec.poll,)
    index = dict.fromkeys(periods, 0)
    while True:
        now = min(k * p for p, k in index.items())
        for p, k in index.items():
            if k * p <= now + 1e-9:
                index[p] = k + 1
        yield now


def lagged_times(control: Controller, spec: AutoscalerSpec) -> Iterator[tuple[float, float | None]]:
    """The decision times as ``(t, None)`` and, with a ``metric_lag``, the times their metrics are taken as
    ``(t - lag, t)`` (at 0 for decisions sooner than the lag), in order (a taking before a decision at the same
    time)."""
    lag = metric_lag(spec)
    decisions = ((at, 0, None) for at in decision_times(control, spec))
    if lag <= 0:
        return ((at, None) for at, _, _ in decisions)
    takes = ((max(0.0, at - lag), -1, at) for at in decision_times(control, spec))
    return ((at, take) for at, _, take in heapq.merge(takes, decisions, key=lambda e: (e[0], e[1])))
