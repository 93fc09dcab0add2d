"""What a controller sees at one poll: an :class:`Observation`, and the sliding window it is made from.

A controller decides from the metrics a real one could read at its poll,
never from the run's future: the model and the engine harness both build an
:class:`Observation` at each poll and hand it over.

- ``list_length``: jobs waiting in the pool's queues (KEDA's Redis list scaler);
- ``oldest_age``: seconds the oldest waiting job has waited (0 when none waits);
- ``p95_wait``: the 95th percentile of the waits of the jobs that *started* in
  the last ``window`` seconds (``numpy.percentile``, as the Summary), None when
  none started;
- ``arrival_rate``: jobs enqueued per second over the last ``window`` seconds;
- ``mean_service`` / ``service_cv``: mean and coefficient of variation of the
  run times of the attempts that *ended* in the last ``window`` seconds (None
  when none ended).

:class:`WindowStats` keeps those events for the window (pure, clock-free: the
time is passed in) so the model and the engine compute them the same way.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = ["Observation", "WindowStats", "METRICS"]

#: Fields of an :class:`Observation` a controller may ask for (its ``needs``).
METRICS = ("list_length", "oldest_age", "p95_wait", "arrival_rate", "service")


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """The pool's state and its queues' metrics at one poll (see the module docstring).

    ``workers`` is the replica count asked for so far (running and starting
    processes, not those draining); ``ready`` the processes taking work.
    """

    now: float
    workers: int
    ready: int
    list_length: int = 0
    oldest_age: float = 0.0
    p95_wait: float | None = None
    arrival_rate: float | None = None
    mean_service: float | None = None
    service_cv: float | None = None


class WindowStats:
    """The last ``window`` seconds of starts (their waits), arrivals and attempt run times."""

    def __init__(self, window: float) -> None:
        if not (math.isfinite(window) and window > 0):
            raise ValueError(f"window must be > 0, got {window!r}")
        self.window = float(window)
        self._waits: deque[tuple[float, float]] = deque()
        self._runs: deque[tuple[float, float]] = deque()
        self._arrivals: deque[tuple[float, int]] = deque()

    def started(self, now: float, wait: float) -> None:
        """A job started at ``now`` after waiting ``wait`` seconds."""
        self._waits.append((now, wait))

    def ended(self, now: float, run: float) -> None:
        """An attempt that ran ``run`` seconds ended at ``now``."""
        self._runs.append((now, run))

    def arrived(self, now: float, count: int = 1) -> None:
        """``count`` jobs were enqueued at ``now``."""
        self._arrivals.append((now, count))

    def _trim(self, now: float) -> None:
        cut = now - self.window
        for q in (self._waits, self._runs, self._arrivals):
            while q and q[0][0] <= cut:
                q.popleft()

    def p95_wait(self, now: float) -> float | None:
        """p95 of the waits of jobs started in ``(now - window, now]`` (None: none started)."""
        self._trim(now)
        if not self._waits:
            return None
        return float(np.percentile(np.fromiter((w for _, w in self._waits), float, len(self._waits)), 95))

    def arrival_rate(self, now: float, *, since: float = -math.inf) -> float:
        """Jobs enqueued per second over the window (over ``now - since`` when the run is younger)."""
        self._trim(now)
        span = min(self.window, now - since)
        return sum(c for _, c in self._arrivals) / span if span > 0 else 0.0

    def service(self, now: float) -> tuple[float, float] | None:
        """Mean and coefficient of variation of the run times ended in the window (None: none ended)."""
        self._trim(now)
        if not self._runs:
            return None
        x = np.fromiter((r for _, r in self._runs), float, len(self._runs))
        mean = float(x.mean())
        return mean, float(x.std() / mean) if mean > 0 else 0.0
