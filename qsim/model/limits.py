"""Gates: per-queue limits that hold a queue shut, all pools together.

A gate answers :meth:`Gate.allows` for a queue and hears every start and end
of that queue's jobs; :class:`~qsim.model.queues.Queues` keeps ``open[q]`` as
the AND of the queue's gates. A gate that reopens on its own (a rate-limit
window rolling over) calls ``Queues.refresh(q)`` and then the dispatcher's
``offer(q)`` from a timer.

Rate limit (:class:`RateLimit`, ``queues[].rate_limit = {max, per}``): the
engine's algorithm (:mod:`qsim.engine.limiter`, ``lua/fetch.lua``), a
**sliding window**. The gate keeps the times of the queue's recent starts
(every attempt's start counts, all pools together); a start at ``now`` is
allowed only while fewer than ``max`` of them lie in ``(now - per, now]``.
So no window of length ``per``, wherever it is placed, ever holds more than
``max`` starts, and under overload starts run at exactly ``max / per``. When
the gate closes it sets a timer for the moment the oldest of the last
``max`` starts leaves the window (``start + per``, exactly) and reopens the
queue then. BullMQ's limiter instead counts starts in *fixed* windows (a
counter that expires ``per`` after the window's first start), so ``max``
starts at the end of one window and ``max`` at the start of the next can
come within a span far shorter than ``per``: up to ``2 * max`` in a window of
length ``per``; the long-run rate is the same, the bursts are not.

``rate_limit.key`` (a window per value of a payload field, per tenant): the
model's jobs carry their type's ``jobs[].data``, so the key value is fixed
per job type; :mod:`qsim.model.lanes` splits such a queue into one lane per
value, each with a :class:`RateLimit` of its own (types without the field
share the ``""`` window, as in the engine).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

import simpy
from simpy.events import Event, Timeout

from qsim.model.schedule import exact_delay

__all__ = ["Gate", "ConcurrencyLimit", "RateLimit"]


class Gate(Protocol):
    """A limit on when a queue may start a job.

    Only a start may close a gate: an end, or time passing, only opens it
    (:meth:`~qsim.model.queues.Queues.gates_ended` relies on it: an open queue stays open).
    """

    def allows(self, q: int) -> bool:
        """Whether queue ``q`` may start a job now."""

    def on_start(self, q: int, now: float) -> None:
        """A job of ``q`` started at ``now``."""

    def on_end(self, q: int, now: float) -> None:
        """A job of ``q`` stopped running at ``now``."""


class ConcurrencyLimit:
    """``queues[].concurrency_limit``: at most ``limit`` active jobs of a queue, all pools together."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self.active = 0

    def allows(self, q: int) -> bool:
        return self.active < self.limit

    def on_start(self, q: int, now: float) -> None:
        self.active += 1

    def on_end(self, q: int, now: float) -> None:
        self.active -= 1


class RateLimit:
    """``queues[].rate_limit``: at most ``max`` starts in any window of ``per`` s (see the module docstring).

    ``reopen()`` is called when the window has rolled far enough for one more
    start (the model then refreshes the queue and offers it to the pools).
    """

    def __init__(self, max_starts: int, per: float, *, env: simpy.Environment, reopen: Callable[[], None]) -> None:
        if max_starts < 1:
            raise ValueError(f"max must be >= 1, got {max_starts}")
        if not per > 0:
            raise ValueError(f"per must be > 0, got {per}")
        self.max = max_starts
        self.per = float(per)
        self.env = env
        self.reopen = reopen
        self.starts: deque[float] = deque()  # the starts still in the window (at most max)
        self.timer = False

    def allows(self, q: int) -> bool:
        now, starts, per = self.env.now, self.starts, self.per
        while starts and starts[0] + per <= now:
            starts.popleft()
        if len(starts) < self.max:
            return True
        if not self.timer:
            self.timer = True
            Timeout(self.env, exact_delay(now, starts[0] + per)).callbacks.append(self._roll)
        return False

    def on_start(self, q: int, now: float) -> None:
        self.starts.append(now)

    def on_end(self, q: int, now: float) -> None:
        pass

    def _roll(self, _event: Event) -> None:
        self.timer = False
        self.reopen()
