"""Elasticity figures of an autoscaled run, as the SPEC Research Group's cloud group defines them.

The metrics of Herbst et al., *Ready for Rain? A View from SPEC Research on the
Future of Cloud Metrics* (2016), in the relative form of Ilyushkin et al. (2017),
compare the workers **supplied** with the workers **demanded** over the run
``[0, T]``:

- supplied ``s(t)``: the pool's processes taking work at ``t`` (the ``ready``
  column of the autoscaler's ``trajectory``; those still in their cold start or
  draining are paid for but supply nothing);
- demanded ``d(t)``: the fewest workers whose slots cover the load the scenario
  offers in the window holding ``t`` (the Summary's window grid, length ``W``):
  ``d_w = ceil(a_w / c)`` with ``a_w = sum_j E[S_j] * (arrivals of j expected in
  the window) / W`` over the job types the pool serves (busy slots, from the rate
  profile, the same for every policy and seed; none after the scenario's duration, where the run only
  drains) and ``c`` the pool's concurrency.
  ``d_w`` has no headroom for queueing: a pool meeting a wait SLO is over-provisioned
  by this measure, and a policy is judged by how little above it stays.

With ``x+ = max(x, 0)`` and ``d~ = max(d, 1)`` (a window without load counts
excess against one worker):

- ``under_accuracy = 1/T * integral (d - s)+ / d~ dt``: the mean shortfall, relative to demand;
- ``over_accuracy = 1/T * integral (s - d)+ / d~ dt``: the mean excess, relative to demand;
- ``under_timeshare = 1/T * integral [s < d] dt``, ``over_timeshare = 1/T * integral [s > d] dt``:
  the shares of the time under- and over-provisioned;
- ``instability``: over the ``n`` windows, with ``s_w`` the window's mean supply,
  ``1/(n - 1) * sum_w [(s_w - s_{w-1}) * (d_w - d_{w-1}) < 0]``: the share of window
  steps in which supply and demand move in opposite directions.

Accuracy and timeshare integrate the exact step functions (supply changes when a
process starts or stops taking work, demand at window edges); instability reads
window means, as supply moves within a window but demand does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qsim.analysis.plan.profile import cumulative_arrivals
from qsim.spec.scenario import Scenario

__all__ = ["ELASTICITY", "demanded_workers", "elasticity", "run_elasticity"]

#: The elasticity figures, in the order they are reported.
ELASTICITY = ("under_accuracy", "over_accuracy", "under_timeshare", "over_timeshare", "instability")


def demanded_workers(scenario: Scenario, pool: str, edges: Sequence[float]) -> np.ndarray:
    """Demanded workers ``d_w`` of each window ``[edges[w], edges[w + 1])`` (see the module docstring)."""
    e = np.asarray(edges, dtype=float)
    served = set(scenario.pool(pool).queues)
    load = np.zeros(len(e) - 1)
    arriving = np.minimum(e, scenario.duration)  # jobs arrive in [0, duration); the drain after it brings none
    for j in scenario.jobs:
        if j.queue in served and j.arrival is not None:
            load += j.service.mean * np.diff(cumulative_arrivals(j.arrival, arriving))
    load /= np.diff(e)
    return np.ceil(load / scenario.pool(pool).concurrency - 1e-9).clip(min=0)


def elasticity(trajectory: Sequence[Sequence[float]], demand: Sequence[float] | np.ndarray,
               edges: Sequence[float]) -> dict[str, float | None]:
    """The figures of the module docstring for a supply ``trajectory`` (``[time, asked, ready]`` rows, from
    time ``edges[0]``) against the demand ``demand[w]`` of each window ``[edges[w], edges[w + 1])``."""
    e = np.asarray(edges, dtype=float)
    d = np.asarray(demand, dtype=float)
    if len(e) < 2 or len(d) != len(e) - 1 or not np.all(np.diff(e) > 0):
        raise ValueError(f"need one demand per window and increasing edges, got {len(d)} demands, {len(e)} edges")
    times = np.array([float(r[0]) for r in trajectory])
    ready = np.array([float(r[2]) for r in trajectory])
    breaks = np.union1d(e, times[(times > e[0]) & (times < e[-1])])
    length = np.diff(breaks)
    at = breaks[:-1]
    s = ready[np.clip(np.searchsorted(times, at, side="right") - 1, 0, None)]
    w = np.searchsorted(e, at, side="right") - 1
    dd = d[w]
    scale = np.maximum(dd, 1.0)
    span = e[-1] - e[0]
    s_w = np.zeros(len(d))
    np.add.at(s_w, w, s * length)
    s_w /= np.diff(e)
    moves = np.sign(np.diff(s_w)) * np.sign(np.diff(d))
    return {"under_accuracy": float(np.sum(np.clip(dd - s, 0, None) / scale * length) / span),
            "over_accuracy": float(np.sum(np.clip(s - dd, 0, None) / scale * length) / span),
            "under_timeshare": float(np.sum(length[s < dd]) / span),
            "over_timeshare": float(np.sum(length[s > dd]) / span),
            "instability": float(np.mean(moves < 0)) if len(moves) else None}


def run_elasticity(summary: Mapping[str, Any], pool: str, scenario: Scenario, *,
                   workers: int | None = None) -> dict[str, float | None] | None:
    """A run's figures on its Summary's window grid (``workers``: a static pool's count); None without windows."""
    windows = summary.get("windows") or []
    if not windows:
        return None
    edges = [float(windows[0]["start"])] + [float(x["end"]) for x in windows]
    scaled = (summary.get("autoscaling") or {}).get(pool)
    trajectory = scaled["trajectory"] if scaled is not None else [[edges[0], workers or 0, workers or 0]]
    return elasticity(trajectory, demanded_workers(scenario, pool, edges), edges)
