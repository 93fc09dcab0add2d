"""What an autoscaler did over a run: cost, scale events, flaps, cut jobs, the workers over time.

The model and the engine harness both keep one :class:`Tally` per autoscaled
pool and report :meth:`Tally.section` in the Summary's ``autoscaling``
section, so the figures mean the same on both sides:

- ``worker_seconds``: the time within ``[0, duration]`` the pool's processes
  existed — starting (cold start), running or draining after a SIGTERM —
  what a cluster bills (from each process's lifetime, given at the end);
- ``scale_events``, ``scale_ups``, ``scale_downs``: polls that changed the
  replica count;
- ``flaps``: scale events in the direction opposite to the previous one and
  less than ``flap_window`` seconds after it (up/down/up near an empty queue);
  :func:`count_flaps` counts them again from the ``trajectory`` with a window and a
  least size of your own (a reversal of fewer workers than ``size`` is no flap);
- ``cut_jobs``: jobs still running at a scaled-down process's grace deadline
  (cut off and handed back to the queue);
- ``replacements``: processes that ended without the autoscaler stopping them
  (a crash, a ``sigkill`` or ``sigterm`` event) and were replaced by a new one,
  as a Deployment's ReplicaSet replaces a dead pod (the engine harness; the
  model replaces none);
- ``workers``: ``min``, ``max`` and time-weighted ``mean`` of the replicas
  asked for, and ``trajectory``: ``[time, asked, ready]`` at every change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Tally", "DEFAULT_FLAP_WINDOW", "DEFAULT_FLAP_SIZE", "count_flaps", "scale_events"]

#: A reversal of direction within this many seconds of the previous scale event is a flap.
DEFAULT_FLAP_WINDOW = 600.0
#: A reversal must change the replica count by at least this many workers to be a flap.
DEFAULT_FLAP_SIZE = 1


def scale_events(trajectory: Sequence[Sequence[float]]) -> list[tuple[float, int]]:
    """The changes of the replicas asked for in a ``trajectory`` (``[time, asked, ready]`` rows), as
    ``(time, change)``."""
    out: list[tuple[float, int]] = []
    for before, row in zip(trajectory, trajectory[1:]):
        change = int(row[1]) - int(before[1])
        if change:
            out.append((float(row[0]), change))
    return out


def count_flaps(trajectory: Sequence[Sequence[float]], *, window: float = DEFAULT_FLAP_WINDOW,
                size: int = DEFAULT_FLAP_SIZE) -> int:
    """The flaps of a ``trajectory``: scale events reversing the direction of the previous one less than
    ``window`` s after it and changing the count by at least ``size`` workers (``size`` 1 and the
    autoscaler's ``flap_window``: the Summary's own ``flaps``)."""
    if size < 1 or not window >= 0:
        raise ValueError(f"flap size must be >= 1 and window >= 0, got size {size!r}, window {window!r}")
    flaps = 0
    last: tuple[float, int] | None = None
    for t, change in scale_events(trajectory):
        direction = 1 if change > 0 else -1
        if last is not None and last[1] != direction and t - last[0] < window and abs(change) >= size:
            flaps += 1
        last = (t, direction)
    return flaps


class Tally:
    """The running account of one autoscaled pool (see the module docstring)."""

    def __init__(self, *, workers: int, end: float = math.inf, flap_window: float = DEFAULT_FLAP_WINDOW,
                 start: float = 0.0) -> None:
        self.flap_window = flap_window
        self.asked = self.ready = workers
        self.t0 = self.last = start
        self.asked_area = 0.0
        self.lo = self.hi = workers
        self.ups = self.downs = self.flaps = self.cut = self.polls = self.replacements = 0
        self.last_event: tuple[float, int] | None = None  # (time, direction)
        self.trajectory: list[list[float]] = [[start, workers, workers]]
        self.until = end  # worker-seconds and the mean count over [start, end] only

    def _advance(self, now: float) -> None:
        t = min(now, self.until)
        if t > self.last:
            self.asked_area += self.asked * (t - self.last)
            self.last = t

    def _point(self, now: float) -> None:
        row = [now, self.asked, self.ready]
        if self.trajectory[-1][0] == now:
            self.trajectory[-1] = row
        else:
            self.trajectory.append(row)

    def polled(self, now: float, before: int, after: int) -> None:
        """A poll decided ``after`` replicas where ``before`` were asked for."""
        self.polls += 1
        if after == before:
            return
        self._advance(now)
        direction = 1 if after > before else -1
        if direction > 0:
            self.ups += 1
        else:
            self.downs += 1
        if self.last_event is not None and self.last_event[1] != direction \
                and now - self.last_event[0] < self.flap_window:
            self.flaps += 1
        self.last_event = (now, direction)
        self.asked = after
        self.lo, self.hi = min(self.lo, after), max(self.hi, after)
        self._point(now)

    def readied(self, now: float, delta: int) -> None:
        """``delta`` processes started taking work (> 0) or stopped taking it (< 0) at ``now``."""
        self.ready += delta
        self._point(now)

    def replaced(self, count: int) -> None:
        """``count`` processes ended without the autoscaler stopping them and were replaced."""
        self.replacements += count

    def jobs_cut(self, count: int) -> None:
        """``count`` jobs were cut off at a scaled-down process's grace deadline."""
        self.cut += count

    def section(self, now: float, lifetimes: Iterable[Sequence[float]]) -> dict[str, Any]:
        """The pool's ``autoscaling`` entry at the end of the run (``now``), its processes' ``lifetimes``
        ``(created, ended)`` (``inf``: still alive) giving the cost over ``[start, end]``."""
        end = min(now, self.until)
        self._advance(end)
        span = end - self.t0
        cost = sum(max(0.0, min(b, end) - max(a, self.t0)) for a, b in lifetimes)
        return {
            "worker_seconds": cost,
            "scale_events": self.ups + self.downs,
            "scale_ups": self.ups,
            "scale_downs": self.downs,
            "flaps": self.flaps,
            "flap_window": self.flap_window,
            "cut_jobs": self.cut,
            "replacements": self.replacements,
            "polls": self.polls,
            "workers": {"min": self.lo, "max": self.hi, "mean": self.asked_area / span if span > 0 else None},
            "trajectory": [list(r) for r in self.trajectory],
        }
