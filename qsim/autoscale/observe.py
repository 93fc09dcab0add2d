"""What a controller sees at one poll: an :class:`Observation`, and the sliding window it is made from.

A controller decides from the metrics a real one could read at its poll,
never from the run's future: the model and the engine harness both build an
:class:`Observation` at each poll and hand it over.

- ``list_length``: jobs waiting in the pool's queues (KEDA's Redis list scaler);
- ``in_flight``: jobs waiting plus jobs running (fetched and not yet acknowledged)
  on the pool's queues, whichever process runs them;
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

What a trigger reads through Prometheus is not quite the live value, and two
autoscaler keys say how far from it:

- ``p95_buckets``: the p95 wait is read from the workers' wait histogram, as
  ``histogram_quantile(0.95, ...)`` computes it: the bucket holding the 95th
  percentile rank, interpolated linearly inside it (from 0 in the first
  bucket), the highest finite bound when the rank falls in ``+Inf``
  (:func:`histogram_quantile`, over ``qsim.engine.metrics.WAIT_BUCKETS``);
- ``metric_lag``: every metric is taken that many seconds before the decision
  that reads it (Prometheus' scrape interval and rule evaluation; half a scrape
  interval on average), while the replica counts are the live ones, as the HPA
  reads them from the Deployment.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = ["Observation", "WindowStats", "METRICS", "histogram_quantile"]

#: Fields of an :class:`Observation` a controller may ask for (its ``needs``).
METRICS = ("list_length", "in_flight", "oldest_age", "p95_wait", "arrival_rate", "service")


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
    in_flight: int = 0
    oldest_age: float = 0.0
    p95_wait: float | None = None
    arrival_rate: float | None = None
    mean_service: float | None = None
    service_cv: float | None = None


def histogram_quantile(q: float, values: np.ndarray, bounds: tuple[float, ...]) -> float | None:
    """The ``q`` quantile of ``values`` as Prometheus' ``histogram_quantile`` gives it from a histogram with
    these upper ``bounds`` (``le``; ``+Inf`` implied): linear inside the bucket holding rank ``q x count``
    (None: no values)."""
    if values.size == 0:
        return None
    cumulative = np.searchsorted(np.sort(values), np.asarray(bounds, dtype=float), side="right")
    rank = q * values.size
    i = int(np.searchsorted(cumulative, rank, side="left"))
    if i == len(bounds):  # the rank is in +Inf: the highest finite bound
        return float(bounds[-1])
    below = float(cumulative[i - 1]) if i else 0.0
    start = float(bounds[i - 1]) if i else 0.0
    inside = float(cumulative[i]) - below
    return start + (float(bounds[i]) - start) * ((rank - below) / inside if inside else 0.0)


class WindowStats:
    """The last ``window`` seconds of starts (their waits), arrivals and attempt run times; with ``buckets``
    the p95 wait is the histogram's (:func:`histogram_quantile`)."""

    def __init__(self, window: float, buckets: tuple[float, ...] | None = None) -> None:
        if not (math.isfinite(window) and window > 0):
            raise ValueError(f"window must be > 0, got {window!r}")
        self.window = float(window)
        self.buckets = buckets
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

    @staticmethod
    def _upto(q: deque[tuple[float, float]] | deque[tuple[float, int]], now: float) -> list[float]:
        """The values of ``q`` at times <= ``now`` (a lagged read may come after later events were fed)."""
        if not q or q[-1][0] <= now:
            return [v for _, v in q]
        return [v for t, v in q if t <= now]

    def p95_wait(self, now: float) -> float | None:
        """p95 of the waits of jobs started in ``(now - window, now]`` (None: none started)."""
        self._trim(now)
        waits = np.asarray(self._upto(self._waits, now), dtype=float)
        if not waits.size:
            return None
        if self.buckets is not None:
            return histogram_quantile(0.95, waits, self.buckets)
        return float(np.percentile(waits, 95))

    def arrival_rate(self, now: float, *, since: float = -math.inf) -> float:
        """Jobs enqueued per second over the window (over ``now - since`` when the run is younger)."""
        self._trim(now)
        span = min(self.window, now - since)
        return sum(self._upto(self._arrivals, now)) / span if span > 0 else 0.0

    def service(self, now: float) -> tuple[float, float] | None:
        """Mean and coefficient of variation of the run times ended in the window (None: none ended)."""
        self._trim(now)
        x = np.asarray(self._upto(self._runs, now), dtype=float)
        if not x.size:
            return None
        mean = float(x.mean())
        return mean, float(x.std() / mean) if mean > 0 else 0.0
