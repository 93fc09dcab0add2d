"""Plans over a rate profile: the peak hour, and what a static sizing for the peak costs.

When a job type's arrivals follow a rate profile (``kind = "profile"``, or a
``burst`` with ``points``), a whole-run figure averages the peak with the
quiet hours. :func:`qsim.analysis.plan.planner.plan` then also judges every SLO on
the windows of the *peak hour* alone (:func:`peak_hour`: the ``length``
seconds, on the window grid, with the most expected arrivals; a windowed SLO
keeps its form, a plain one must hold in every window of it) and reports the
cheapest point meeting them — the peak-hour answer — and what that setting,
held all day, costs (:func:`static_cost`: worker-seconds over the run's
arrival span ``[0, duration)``). :func:`qsim.analysis.autoscaling.baseline.static_peak`
is that baseline on its own (the least static workers of one pool meeting the
SLOs over the whole profile), for the autoscaling comparison to improve on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from qsim.errors import ScenarioError
from qsim.spec import dists
from qsim.spec.scenario import Scenario

__all__ = ["PEAK_LENGTH", "PeakHour", "time_varying", "cumulative_arrivals", "expected_arrivals", "peak_hour", "static_cost", "peak_load"]

#: The length of the peak period judged on its own (seconds): an hour.
PEAK_LENGTH = 3600.0


def _profile_of(arrival: dists.Arrival | None) -> dists.RateProfile | None:
    if isinstance(arrival, dists.ProfileArrivals):
        return arrival.profile
    if isinstance(arrival, dists.BurstArrivals):
        return arrival.profile
    return None


def time_varying(scenario: Scenario) -> bool:
    """Whether some job type's arrival rate follows a profile."""
    return any(_profile_of(j.arrival) is not None for j in scenario.jobs)


def cumulative_arrivals(arrival: dists.Arrival, t: Any) -> np.ndarray:
    """Jobs of one arrival process expected in ``[0, t)``."""
    t = np.asarray(t, dtype=float)
    profile = _profile_of(arrival)
    return np.asarray(profile.cumulative(t) if profile is not None else arrival.rate * t, dtype=float)


def expected_arrivals(scenario: Scenario, t: Any) -> np.ndarray:
    """Jobs expected to arrive in ``[0, t)`` over every job type with arrivals (children not counted)."""
    t = np.asarray(t, dtype=float)
    total = np.zeros_like(t)
    for j in scenario.jobs:
        if j.arrival is None:
            continue
        total = total + cumulative_arrivals(j.arrival, t)
    return np.asarray(total, dtype=float)


@dataclass(frozen=True)
class PeakHour:
    """The busiest ``[start, end)`` of a run (on its window grid) and its mean arrival rate."""

    start: float
    end: float
    rate: float  # jobs/s expected over [start, end)
    mean_rate: float  # jobs/s expected over the measured run [warmup, duration)

    def as_dict(self) -> dict[str, float]:
        """``{"start", "end", "rate", "mean_rate"}`` for JSON."""
        return {"start": self.start, "end": self.end, "rate": self.rate, "mean_rate": self.mean_rate}


def peak_hour(scenario: Scenario, length: float = PEAK_LENGTH) -> PeakHour:
    """The ``length`` seconds of ``[warmup, duration)`` with the most expected arrivals.

    Its start is on the window grid (``warmup + k * window``), so it holds
    whole windows; a run shorter than ``length`` is its own peak.
    """
    if not (math.isfinite(length) and length > 0):
        raise ScenarioError(f"peak length must be a number of seconds > 0, got {length!r}")
    w, lo, hi = scenario.window_length, scenario.warmup, scenario.duration
    span = hi - lo
    mean_rate = float(expected_arrivals(scenario, hi) - expected_arrivals(scenario, lo)) / span
    if length >= span:
        return PeakHour(lo, hi, mean_rate, mean_rate)
    starts = lo + np.arange(int(math.floor((span - length) / w)) + 1) * w
    counts = expected_arrivals(scenario, starts + length) - expected_arrivals(scenario, starts)
    k = int(np.argmax(counts))
    return PeakHour(float(starts[k]), float(starts[k] + length), float(counts[k]) / length, mean_rate)


def static_cost(scenario: Scenario) -> dict[str, Any]:
    """What the scenario's pools cost held all along: ``{"workers": {pool: n}, "worker_seconds",
    "worker_hours", "span": [0, duration]}`` (its initial workers over the arrival span)."""
    workers = {p.name: p.workers for p in scenario.pools}
    seconds = float(sum(workers.values()) * scenario.duration)
    return {"workers": workers, "worker_seconds": seconds, "worker_hours": seconds / 3600.0,
            "span": [0.0, scenario.duration]}


def _peak_rate(arrival: Any) -> float:
    profile = getattr(arrival, "profile", None)
    if profile is not None and profile.mean > 0:
        return float(arrival.rate * profile.peak / profile.mean)
    return float(arrival.rate)


def peak_load(scenario: Scenario, pool: str) -> float:
    """Busy slots the pool's queues offer at the peak of their arrival rates (peak rate x mean service, summed);
    divide by the pool's concurrency for workers."""
    served = set(scenario.pool(pool).queues)
    return sum(_peak_rate(j.arrival) * j.service.mean for j in scenario.jobs
               if j.queue in served and j.arrival is not None)
