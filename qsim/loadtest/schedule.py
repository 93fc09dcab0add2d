"""The arrival times the producers follow for scheduled job types (``burst``, ``trace``, ``profile``, or all).

Nothing here imports Locust.

A ``poisson`` or ``constant`` type is *paced*: each producer adds at the
type's mean rate with ``--pacing constant|poisson`` gaps (:mod:`qsim.loadtest.users`).
A ``burst``, ``trace`` or ``profile`` type is *scheduled*: its jobs are added
at the very arrival times the scenario's workload draws
(:func:`qsim.spec.workload.draw_jobs`, the times the model and ``qsim run`` use),
so a burst arrives as a burst, a trace as recorded and a rate profile's jobs
at its changing rate (its peak at the peak's rate, not the mean). With
``--pacing scenario`` every type is scheduled. Under ``--time-scale`` the
scenario given here is already the time-scaled one
(:func:`qsim.loadtest.timescale.time_scaled`).

:class:`Schedule` yields ``(at, type, n)`` in time order: ``at`` seconds after
the arrival window opened (the drawn time divided by ``--rate-scale``), and
``n`` the job's number within its type (so its payload is the k-th planned
one, :class:`~qsim.loadtest.mix.PayloadSource`). When the window is longer
than the scenario's ``duration / scale``, the schedule repeats with that
period (``n`` counting on). In a distributed run each Locust worker takes
every ``nodes``-th entry, starting at its ``node`` index.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import numpy as np

from qsim.spec.scenario import Scenario
from qsim.spec.workload import draw_jobs

__all__ = ["SCHEDULED_KINDS", "scheduled_types", "Schedule"]

#: Arrival kinds always added on their drawn schedule.
SCHEDULED_KINDS = ("burst", "trace", "profile")


def scheduled_types(scenario: Scenario, pacing: str) -> list[str]:
    """The arriving job types added on the drawn schedule: ``burst``, ``trace`` and ``profile``
    ones, every arriving type with ``pacing == "scenario"``."""
    return [j.name for j in scenario.jobs if j.arrival is not None
            and (pacing == "scenario" or j.arrival.kind in SCHEDULED_KINDS)]


class Schedule:
    """This process's share of the scheduled arrivals, in time order (see the module docstring).

    Args:
        scenario: The scenario (its seed draws the times).
        types: The scheduled job types.
        scale: ``--rate-scale``: times are divided by it.
        window: Seconds of the arrival window: entries at or after it are not made.
        node, nodes: This process's index among ``nodes`` adding processes.
    """

    def __init__(self, scenario: Scenario, types: Collection[str], *, scale: float = 1.0, window: float,
                 node: int = 0, nodes: int = 1) -> None:
        if not scale > 0:
            raise ValueError(f"scale must be > 0, got {scale!r}")
        if not 0 <= node < nodes:
            raise ValueError(f"node must be in [0, {nodes}), got {node!r}")
        draws = draw_jobs(scenario)
        index = [i for i, j in enumerate(scenario.jobs) if j.name in set(types)]
        keep = np.isin(draws.type, index)
        self.times = np.asarray(draws.time, dtype=float)[keep] / scale
        kinds = np.asarray(draws.type)[keep]
        self.names = [scenario.jobs[int(k)].name for k in kinds]
        self.per_type = {scenario.jobs[k].name: int((kinds == k).sum()) for k in index}
        self.rank = np.zeros(kinds.size, dtype=np.int64)  # the entry's number within its type
        for k in index:
            mine = np.flatnonzero(kinds == k)
            self.rank[mine] = np.arange(mine.size)
        self.period = scenario.duration / scale
        self.window, self.node, self.nodes = float(window), node, nodes
        self._entries = self._generate()
        self._head: tuple[float, str, int] | None = next(self._entries, None)

    def _generate(self) -> Iterator[tuple[float, str, int]]:
        if self.times.size == 0:
            return
        i = 0  # global entry number, for the share of this node
        cycle = 0
        while True:
            offset = cycle * self.period
            if offset >= self.window:
                return
            for at, name, rank in zip(self.times, self.names, self.rank):
                t = float(at) + offset
                if t >= self.window:
                    return
                if i % self.nodes == self.node:
                    yield t, name, int(rank) + cycle * self.per_type[name]
                i += 1
            cycle += 1
            if self.period <= 0:
                return

    def peek(self) -> float | None:
        """When the next entry is due (seconds after the window opened), or None when none is left."""
        return None if self._head is None else self._head[0]

    def claim(self) -> tuple[float, str, int] | None:
        """Take the next entry ``(at, type, n)`` (None when none is left)."""
        head = self._head
        if head is not None:
            self._head = next(self._entries, None)
        return head
