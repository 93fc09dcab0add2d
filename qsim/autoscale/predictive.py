"""Replica floors from the scenario's arrival rate profile, raised ahead of the load (``policy = "predictive"``).

The pool's expected work at time ``t`` is ``W(t) = sum over its job types of
rate(t) x mean service`` (jobs/s times s: busy slots; first attempts only,
retries and flow children not counted). The workers it needs are

    n(t) = ceil(W(t) / (concurrency x utilization))

within ``[min, max]``: ``utilization`` (0.8 by default) is the share of the
floor's slots the expected load fills, the margin the reactive trigger and the
randomness of the arrivals work in. The floor at ``t`` is the most ``n`` asks
for over the next ``lead`` seconds,

    floor(t) = max of n(s) for s in [t, t + lead],

so every rise comes ``lead`` seconds early and every fall on time (``lead``
defaults to the cold start's mean: workers asked for ``lead`` s ahead are
ready when the load comes; a controller sees a floor at its next poll, so up
to one ``poll`` later). Floors at or below ``min`` are left out.

Everything is exact: ``W`` is piecewise linear between the profiles' points
(``step`` profiles: constant), so ``n`` changes only where ``W`` crosses a
multiple of ``concurrency x utilization``, found in closed form. A job type
without a profile adds its mean rate at every moment. With profiles that
repeat (one ``period`` for all), the floors repeat with it; without, the last
floor holds for ever.

The floors are a :class:`~qsim.autoscale.schedule.Floors` timetable, driven
exactly as a ``schedule`` policy's (:class:`~qsim.autoscale.schedule.Scheduled`:
KEDA cron triggers combined by max with the reactive trigger), and emitted as
one KEDA cron trigger per floor step (:func:`daily_floors`: needs a period of
one day, or a run within one day, and steps on whole minutes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from qsim.autoscale.schedule import DAY, Floors
from qsim.errors import ScenarioError
from qsim.spec import dists
from qsim.spec.autoscaler import AutoscalerSpec, FloorSpec, PredictiveSpec
from qsim.spec.scenario import Scenario

__all__ = ["predictive_floors", "workers_needed", "daily_floors"]

_EPS = 1e-9


def _profile(arrival: dists.Arrival | None) -> dists.RateProfile | None:
    if isinstance(arrival, (dists.ProfileArrivals, dists.BurstArrivals)):
        return arrival.profile
    return None


def _load(scenario: Scenario, pool: str) -> tuple[list[tuple[dists.RateProfile, float]], float, float | None]:
    """The pool's profiled types (profile, mean service), the constant work of the others, and the period."""
    served = set(scenario.pool(pool).queues)
    profiled: list[tuple[dists.RateProfile, float]] = []
    constant = 0.0
    for j in scenario.jobs:
        if j.queue not in served or j.arrival is None:
            continue
        prof = _profile(j.arrival)
        if prof is None:
            constant += float(j.arrival.rate) * float(j.service.mean)
        else:
            profiled.append((prof, float(j.service.mean)))
    periods = {p.period for p, _ in profiled}
    if len(periods) > 1:
        raise ScenarioError(f"autoscalers.{pool}: the predictive policy needs the pool's rate profiles to repeat "
                            f"with one period or none, got periods {sorted(map(str, periods))}")
    return profiled, constant, next(iter(periods), None)


def _law(spec: AutoscalerSpec) -> PredictiveSpec:
    law = spec.law
    if not isinstance(law, PredictiveSpec):
        raise ValueError(f"the autoscaler of pool {spec.pool!r} is {spec.policy}, not predictive")
    return law


def _lead(spec: AutoscalerSpec) -> float:
    """Seconds the floors are raised ahead of the load (the cold start's mean when not given)."""
    lead = _law(spec).lead
    return float(lead if lead is not None else spec.start_delay.mean)


def workers_needed(scenario: Scenario, spec: AutoscalerSpec) -> tuple[list[tuple[float, float, int]], float | None]:
    """``n(t)`` as steps ``(start, end, n)`` covering ``[0, horizon)`` and the period (None: the last step holds).

    With a period the steps cover enough periods for the lead to look ahead from anywhere in the first.
    """
    pool = scenario.pool(spec.pool)
    slot = pool.concurrency * float(_law(spec).utilization)
    profiled, constant, period = _load(scenario, spec.pool)
    lead = _lead(spec)
    knots: set[float] = {0.0}
    if period is not None:
        span = (2 + math.ceil(lead / period)) * period
        for prof, _ in profiled:
            for t, _r in prof.points:
                knots.update(t % period + k * period for k in range(int(round(span / period)) + 1))
    else:
        for prof, _ in profiled:
            knots.update(t for t, _r in prof.points)
        span = max(knots) + lead + 1.0
    edges = np.array(sorted(k for k in knots if k < span) + [span])

    def work(t: np.ndarray) -> np.ndarray:
        total = np.full(np.shape(t), constant, dtype=float)
        for prof, mean in profiled:
            total = total + prof.rate_at(t) * mean
        return total

    # within a segment W is linear: its value at the start and the middle give it; cut where it crosses k * slot
    a, b = edges[:-1], edges[1:]
    w0, wm = work(a), work((a + b) / 2)
    cuts: list[float] = list(edges)
    for lo, hi, x0, xm in zip(a, b, w0, wm):
        x1 = 2 * xm - x0  # the left limit at the segment's end
        if abs(x1 - x0) > _EPS:
            ks = np.arange(math.floor(min(x0, x1) / slot) + 1, math.ceil(max(x0, x1) / slot))
            cuts.extend(lo + (ks * slot - x0) / (x1 - x0) * (hi - lo))
    bounds = np.unique(np.asarray(cuts, dtype=float))
    mids = (bounds[:-1] + bounds[1:]) / 2
    n = np.ceil(work(mids) / slot - _EPS).astype(int)
    n = np.clip(n, spec.min, spec.max)
    steps = [(float(s), float(e), int(k)) for s, e, k in zip(bounds[:-1], bounds[1:], n)]
    if period is None:
        s, _, k = steps[-1]
        steps[-1] = (s, math.inf, k)
    return _merged(steps), period


def _merged(steps: Sequence[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    out: list[tuple[float, float, int]] = []
    for s, e, k in steps:
        if out and out[-1][2] == k and out[-1][1] == s:
            out[-1] = (out[-1][0], e, k)
        else:
            out.append((s, e, k))
    return out


def predictive_floors(scenario: Scenario, spec: AutoscalerSpec) -> Floors:
    """The predictive policy's floors for ``spec``'s pool (see the module docstring)."""
    steps, period = workers_needed(scenario, spec)
    lead = _lead(spec)
    starts = np.array([s for s, _, _ in steps])
    ends = np.array([e for _, e, _ in steps])
    ns = np.array([k for _, _, k in steps])
    limit = period if period is not None else math.inf
    candidates = np.unique(np.concatenate([[0.0], starts - lead, ends]))
    candidates = candidates[(candidates >= 0) & (candidates < limit)]
    values = [int(ns[(starts <= c + lead) & (ends > c)].max()) for c in candidates]
    raised = _merged([(float(c), float(d), v) for c, d, v in
                      zip(candidates, [*candidates[1:], limit], values)])
    windows = [w for w in raised if w[2] > spec.min]
    if period is not None and len(windows) > 1 and windows[0][0] == 0.0 and windows[-1][1] == period \
            and windows[0][2] == windows[-1][2]:  # one floor across the period's end: one wrapping window
        first, last = windows[0], windows.pop()
        windows[0] = (last[0], first[1], first[2])
    return Floors(windows, period=period)


def daily_floors(floors: Floors, *, duration: float, exact: bool = True) -> list[FloorSpec]:
    """The floors as times of day (KEDA cron triggers), for ``--emit``.

    The floors must repeat every day, or the run last at most a day (then every floor of the run is
    written out). ``exact=False`` (a schedule written from the profile) widens each floor to whole minutes
    (start down, end up) where ``exact`` refuses a floor off a whole minute, and writes out the first day's
    floors where they do not repeat daily (on the next days the schedule repeats that day).

    Raises:
        ScenarioError: the floors cannot be written as times of day (see above).
    """
    if floors.period == DAY:
        windows: list[tuple[float, float, int]] = [(s, min(e, DAY), n) for s, e, n in floors.windows]
    elif duration <= DAY or not exact:
        windows = _unrolled(floors, min(duration, DAY))
    elif floors.period is not None:
        raise ScenarioError(f"the predictive floors repeat every {floors.period:g} s (the rate profile's period) "
                            f"and the run lasts {duration:g} s: KEDA cron triggers repeat every day ({DAY:g} s); "
                            f"give the profile period = {DAY:g}, or a run of at most a day")
    else:
        raise ScenarioError(f"the predictive floors do not repeat (the rate profile has no period) and the run "
                            f"lasts {duration:g} s, more than a day: KEDA cron triggers repeat every day")
    out: list[FloorSpec] = []
    for start, end, n in windows:
        if exact:
            for t in (start, end):
                if abs(t / 60 - round(t / 60)) > 1e-6:
                    raise ScenarioError(f"a predictive floor ({n} replicas) starts or ends at {t:g} s, not on a "
                                        "whole minute: KEDA cron triggers are minute-grained; move the profile's "
                                        "points or the lead to whole minutes")
        else:
            start, end = math.floor(start / 60 + 1e-9) * 60.0, math.ceil(end / 60 - 1e-9) * 60.0
        if _hhmm(start) == _hhmm(end):  # all day: KEDA refuses start == end, so two halves
            out.append(FloorSpec(start=_hhmm(start), end=_hhmm(start + DAY / 2), replicas=n))
            start = start + DAY / 2
        out.append(FloorSpec(start=_hhmm(start), end=_hhmm(end), replicas=n))
    return out


def _hhmm(t: float) -> str:
    m = int(round(t / 60)) % 1440
    return f"{m // 60:02d}:{m % 60:02d}"


def _unrolled(floors: Floors, duration: float) -> list[tuple[float, float, int]]:
    """The floors' windows of a run of ``duration`` (at most a day): a repeating timetable written out period
    by period, the last window held to the day's end."""
    if floors.period is None:
        return [(s, min(e, DAY), n) for s, e, n in floors.windows if s < duration]
    p = floors.period
    out = []
    for k in range(math.ceil(duration / p)):
        for s, e, n in floors.windows:
            for lo, hi in ([(s, e)] if s < e else [(s, p), (0.0, e)]):
                lo, hi = lo + k * p, min(hi + k * p, DAY)
                if lo < hi:
                    out.append((lo, hi, n))
    return out
