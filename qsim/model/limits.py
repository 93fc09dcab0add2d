"""Gates: per-queue limits that hold a queue shut, all pools together.

A gate answers :meth:`Gate.allows` for a queue and hears every start and end
of that queue's jobs; :class:`~qsim.model.queues.Queues` keeps ``open[q]`` as
the AND of the queue's gates. A gate that reopens on its own (a rate-limit
window rolling over) calls ``Queues.refresh(q)`` and then the dispatcher's
``offer(q)`` from a timer.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Gate", "ConcurrencyLimit"]


class Gate(Protocol):
    """A limit on when a queue may start a job."""

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
