"""Waiting lines: per lane (a queue, or one key value of a keyed queue: :mod:`qsim.model.lanes`),
jobs by priority (lower first), FIFO within a level.

Each lane is a binary heap of ``(priority, seq, job)`` (a queue with priority
aging: ``(priority + ready / aging, seq, job)``, see :mod:`qsim.model.dispatch`); ``seq`` counts every
enqueue of the run, so equal priorities leave in enqueue order, also across
the queues of a pool (the ``priority`` policy compares the heads). A job put
back by a stalled check or handed back at shutdown goes to the *front* of its
priority level (``lua/recover_stalled.lua``, ``lua/release.lua``): its ``seq``
is ``-front``, a second counter, so it leaves before every job of its level
already waiting, and after none that came back later (a batch put back
together keeps its order).

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

    def __init__(self, n_queues: int, gates: list[list[Gate]], aging: list[float] | None = None,
                 family: list[tuple[int, ...]] | None = None) -> None:
        self.heaps: list[list[tuple[float, int, int]]] = [[] for _ in range(n_queues)]
        self.aging = list(aging) if aging is not None else [0.0] * n_queues  # seconds per level, 0: off
        self.active = [0] * n_queues  # jobs of the lane running now
        self.open = [True] * n_queues
        self.gates = gates  # per lane; empty for a lane nothing limits
        self.seq = 0  # enqueues so far: the FIFO tie-break (Model.enqueue pushes (priority, seq, job))
        self.front = 0  # jobs put back at the front of their level so far (they push (priority, -front, job))
        # per lane: the lanes sharing its queue's gates (None: only itself)
        self.family: list[tuple[int, ...] | None] = [
            f if len(f) > 1 else None for f in (family or [(q,) for q in range(n_queues)])]

    def waiting(self, q: int) -> int:
        """How many jobs wait in queue ``q``."""
        return len(self.heaps[q])

    def gates_started(self, q: int, now: float) -> None:
        """A job of ``q`` started (``active`` already counts it): tell the gates, maybe close the queue."""
        gates = self.gates[q]
        for g in gates:
            g.on_start(q, now)
        fam = self.family[q]
        if fam is None:
            self.open[q] = _allows(gates, q)
        else:  # a shared concurrency limit may have closed the queue's other lanes too
            for lane in fam:
                self.open[lane] = _allows(self.gates[lane], lane)

    def gates_ended(self, q: int, now: float) -> bool:
        """A job of ``q`` stopped running: tell the gates; True when this reopened the lane (or one of its
        queue's other lanes: offer them all, :meth:`lanes`)."""
        gates = self.gates[q]
        for g in gates:
            g.on_end(q, now)
        fam = self.family[q]
        if fam is None:
            if self.open[q]:  # an end (and time) only loosens a gate: still open, no need to ask
                return False
            self.open[q] = now_open = _allows(gates, q)
            return now_open
        reopened = False
        for lane in fam:
            was = self.open[lane]
            self.open[lane] = _allows(self.gates[lane], lane)
            reopened = reopened or (self.open[lane] and not was)
        return reopened

    def lanes(self, q: int) -> tuple[int, ...]:
        """Lane ``q`` and the other lanes of its queue."""
        fam = self.family[q]
        return (q,) if fam is None else fam

    def refresh(self, q: int) -> bool:
        """Re-ask the gates (e.g. when a rate-limit window rolls); True when ``q`` reopened."""
        was = self.open[q]
        self.open[q] = now_open = _allows(self.gates[q], q)
        return now_open and not was


def _allows(gates: list[Gate], q: int) -> bool:
    """Whether every gate lets ``q`` start a job (asked in order, up to the first that does not)."""
    for g in gates:
        if not g.allows(q):
            return False
    return True
