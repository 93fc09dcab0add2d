"""Waiting lines: per queue, jobs by priority (lower first), FIFO within a level.

Each queue is a binary heap of ``(priority, seq, job)`` (a queue with priority
aging: ``(priority + ready / aging, seq, job)``, see :mod:`qsim.model.dispatch`); ``seq`` counts every
enqueue of the run, so equal priorities leave in enqueue order, also across
the queues of a pool (the ``priority`` policy compares the heads).

``open[q]`` says whether queue ``q`` may start a job now; it is False while a
gate (:mod:`qsim.model.limits`: the global concurrency limit; later the rate
limit) holds the queue shut. Dispatch only takes from queues that are
non-empty and open.
"""

from __future__ import annotations

from qsim.model.limits import Gate

__all__ = ["Queues"]


class Queues:
    """The waiting jobs, active counts and gates of every queue of a run."""

    def __init__(self, n_queues: int, gates: list[list[Gate]], aging: list[float] | None = None) -> None:
        self.heaps: list[list[tuple[float, int, int]]] = [[] for _ in range(n_queues)]
        self.aging = list(aging) if aging is not None else [0.0] * n_queues  # seconds per level, 0: off
        self.active = [0] * n_queues  # jobs of the queue running now
        self.open = [True] * n_queues
        self.gates = gates  # per queue; empty for a queue nothing limits
        self.seq = 0  # enqueues so far: the FIFO tie-break (Model.enqueue pushes (priority, seq, job))

    def waiting(self, q: int) -> int:
        """How many jobs wait in queue ``q``."""
        return len(self.heaps[q])

    def gates_started(self, q: int, now: float) -> None:
        """A job of ``q`` started (``active`` already counts it): tell the gates, maybe close the queue."""
        gates = self.gates[q]
        for g in gates:
            g.on_start(q, now)
        self.open[q] = all(g.allows(q) for g in gates)

    def gates_ended(self, q: int, now: float) -> bool:
        """A job of ``q`` stopped running: tell the gates; True when this reopened the queue."""
        gates = self.gates[q]
        for g in gates:
            g.on_end(q, now)
        was = self.open[q]
        self.open[q] = all(g.allows(q) for g in gates)
        return self.open[q] and not was

    def refresh(self, q: int) -> bool:
        """Re-ask the gates (e.g. when a rate-limit window rolls); True when ``q`` reopened."""
        was = self.open[q]
        self.open[q] = all(g.allows(q) for g in self.gates[q])
        return self.open[q] and not was
