"""``--time-scale``: a scenario's clock compressed (or stretched) for a load test, its rates kept.

Nothing here imports Locust.

``--time-scale S`` is the wall-clock seconds one second of the scenario takes:
the scenario's moment ``t`` is played at ``S t`` after the arrival window
opens. With ``S = 0.01`` a 24 h scenario runs in 14.4 minutes.

**What is scaled** — the scenario's clock: ``duration`` (the arrival window,
unless ``-t`` gives one), ``warmup``, the times of its ``[[events]]``, the
times (and ``period``) of every rate profile, the times of a ``trace``, and
the Summary's ``window`` (so a ``--slo "... in 95% of windows"`` threshold
judges the same stretches of the day: 60 s of the scenario are 0.6 s of the
run at ``S = 0.01``).

**What is kept** — every rate, and everything the workers do. At wall time
``tau`` a profiled type arrives at the rate the profile gives at scenario time
``tau / S`` (jobs per wall-clock second): the peak is replayed at the peak's
rate, for ``S`` times as long, and the run adds about ``S`` times the
scenario's jobs. Stationary arrivals (``poisson``, ``constant``, ``burst``
with a ``rate``) are unchanged: only the window is shorter. A ``trace`` is
replayed at ``S`` times its recorded times, keeping every ``1/S``-th arrival
(evenly, the first one kept: arrival ``i`` is kept when ``floor(i S) > floor((i - 1) S)``), so its
rate is kept too; a trace cannot be stretched (``S > 1`` is refused for it).
Service times, backoff, timeouts, grace periods and the engine's timings stay
real seconds: a compressed day is a day's *load* in a shorter time, not a
faster system.

``--rate-scale X`` applies on top, as it always has: paced types add at ``X``
times their rate, scheduled ones (``burst``, ``trace``, ``profile``) are played
``X`` times as fast (their drawn times divided by ``X``). To multiply a
profile's rates without speeding it up, set its ``scale`` in the scenario.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from qsim.spec.dists import Arrival, BurstArrivals, ProfileArrivals, RateProfile, TraceArrivals
from qsim.spec.scenario import Scenario

__all__ = ["time_scaled", "scaled_profile", "check_time_scale"]


def check_time_scale(value: Any) -> float:
    """``--time-scale`` as a float; ValueError naming it unless it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"--time-scale must be a number > 0 (wall-clock seconds per scenario second), got {value!r}")
    return float(value)


def scaled_profile(profile: RateProfile, time: float = 1.0, rate: float = 1.0) -> RateProfile:
    """``profile`` with its times (and period) times ``time`` and its rates times ``rate``."""
    return RateProfile(points=tuple((t * time, r) for t, r in profile.points), shape=profile.shape,
                       period=None if profile.period is None else profile.period * time, scale=profile.scale * rate)


def _arrival(arrival: Arrival, s: float, name: str) -> Arrival:
    if isinstance(arrival, ProfileArrivals):
        return ProfileArrivals(profile=scaled_profile(arrival.profile, s))
    if isinstance(arrival, BurstArrivals) and arrival.profile is not None:
        return BurstArrivals(size=arrival.size, profile=scaled_profile(arrival.profile, s))
    if isinstance(arrival, TraceArrivals):
        if s > 1:
            raise ValueError(f"--time-scale {s:g} would stretch the trace of job type {name!r}: a trace keeps its "
                             "rate only when compressed (--time-scale <= 1)")
        at = np.sort(np.asarray(arrival.at, dtype=float))
        i = np.arange(at.size)
        keep = np.floor(i * s + 1e-9) > np.floor((i - 1) * s + 1e-9)
        return TraceArrivals(path=arrival.path, at=tuple(float(t) for t in at[keep] * s))
    return arrival  # stationary: the same process in a shorter window


def time_scaled(scenario: Scenario, time_scale: float) -> Scenario:
    """The scenario as a load test with ``--time-scale time_scale`` plays it (see the module docstring).

    Raises:
        ValueError: a bad time scale, or a trace that would be stretched.
    """
    s = check_time_scale(time_scale)
    if s == 1.0:
        return scenario
    jobs = tuple(replace(j, arrival=_arrival(j.arrival, s, j.name)) if j.arrival is not None else j
                 for j in scenario.jobs)
    events = tuple(replace(e, at=e.at * s) for e in scenario.events)
    return replace(scenario, duration=scenario.duration * s, warmup=scenario.warmup * s, jobs=jobs, events=events,
                   window=scenario.window_length * s)  # the Summary's windows cover the same stretches of the day
