"""A scenario's offered load, and the engine overhead the model applies at that load.

The engine's per-job overhead grows with the load on the worker processes: a
probe at light load measured 0.8 ms of pickup and 1.3 ms in the slot, a run at
68 % busy with four jobs per process 2.5 ms and 3.7 ms (notebook 04). So a
scenario may give the overheads as a table over utilization,
``[engine] overhead_by_load = [[u, fetch_overhead, ack_overhead], ...]``
(``qsim calibrate --probe --concurrency N`` measures one), and the model
applies the row for the load it simulates (:func:`engine_overhead`):

- the **utilization** is the offered one, from the scenario alone: every
  arriving type's mean rate times its expected attempts times the slot time of
  an attempt (mean service + the overheads), over the pools' slots at the
  start, capped at 1;
- since the overheads are part of that slot time, the two are solved together
  (a fixed point, a few iterations: the overheads are small against the work);
- between rows the overheads are interpolated linearly, outside them the
  nearest row holds.

Without a table the scalars ``fetch_overhead``/``ack_overhead`` apply at every
load, as before (:attr:`AppliedOverhead.source` says which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qsim.spec.scenario import EngineSettings, JobType, Scenario

__all__ = ["AppliedOverhead", "offered_utilization", "overhead_at", "engine_overhead"]


@dataclass(frozen=True)
class AppliedOverhead:
    """The overheads the model applies: ``fetch``, ``ack`` (seconds), the ``utilization`` they were read
    at (NaN: the scalars, whatever the load), and ``source`` in words."""

    fetch: float
    ack: float
    utilization: float
    source: str


def _attempts(job: JobType) -> float:
    """Expected attempts of a job of this type (transient failures retried, poison jobs every attempt)."""
    f, p, n = job.fail_prob, job.poison_prob, job.attempts
    clean = float(n) if f >= 1 else (1 - f**n) / (1 - f)
    return p * n + (1 - p) * clean


def _rates(scenario: Scenario) -> dict[str, float]:
    """Mean jobs per second of every type, fan-out children included (flow parents wait: not counted twice)."""
    rates = {j.name: float(j.arrival.rate) if j.arrival is not None else 0.0 for j in scenario.jobs}
    for _ in range(len(scenario.jobs)):  # children of children, to any depth the scenario has
        extra = {j.name: 0.0 for j in scenario.jobs}
        for j in scenario.jobs:
            if j.fan_out is not None:
                extra[j.fan_out.job] += rates[j.name] * j.fan_out.count
        new = {j.name: (float(j.arrival.rate) if j.arrival is not None else 0.0) + extra[j.name] for j in scenario.jobs}
        if new == rates:
            break
        rates = new
    return rates


def offered_utilization(scenario: Scenario, fetch: float = 0.0, ack: float = 0.0) -> float:
    """The offered utilization of the scenario's slots with these overheads per attempt, capped at 1
    (NaN without slots)."""
    slots = sum(p.workers * p.concurrency for p in scenario.pools)
    if slots <= 0:
        return math.nan
    rates = _rates(scenario)
    work = sum(rates[j.name] * _attempts(j) * (float(j.service.mean) + fetch + ack) for j in scenario.jobs)
    return min(1.0, work / slots)


def overhead_at(engine: EngineSettings, utilization: float) -> tuple[float, float]:
    """``(fetch_overhead, ack_overhead)`` at a utilization: the table's rows interpolated (the nearest row
    outside them), or the scalars when there is no table."""
    table = engine.overhead_by_load
    if not table:
        return engine.fetch_overhead, engine.ack_overhead
    u = np.array([r[0] for r in table])
    x = 0.0 if math.isnan(utilization) else utilization
    return (float(np.interp(x, u, [r[1] for r in table])), float(np.interp(x, u, [r[2] for r in table])))


def engine_overhead(scenario: Scenario) -> AppliedOverhead:
    """The overheads the model applies to ``scenario`` (see the module docstring)."""
    engine = scenario.engine
    if not engine.overhead_by_load:
        return AppliedOverhead(engine.fetch_overhead, engine.ack_overhead, math.nan, "engine.fetch_overhead/ack_overhead")
    u = offered_utilization(scenario)
    for _ in range(20):
        fetch, ack = overhead_at(engine, u)
        nxt = offered_utilization(scenario, fetch, ack)
        if math.isnan(nxt) or abs(nxt - u) < 1e-9:
            u = nxt
            break
        u = nxt
    fetch, ack = overhead_at(engine, u)
    return AppliedOverhead(fetch, ack, u, f"engine.overhead_by_load at utilization {u:.3g}")
