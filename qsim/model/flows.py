"""Flows (parent waits for its children) and fan-out (a completed job adds children).

Flows (``flow = {children, on_child_failure}``): when a job of a flow type
arrives, one job of each child type is added with it (BullMQ's FlowProducer
adds the tree at once; the children are enqueued at the parent's arrival)
and the parent waits in *waiting-children*, not in its queue. When its last
child completes it becomes waiting (enqueued then, at the back of its
priority level; its ``enqueued`` stays the arrival, so its ``wait`` — enqueue
to first start — includes the time spent waiting for the children, as the
engine harness measures it). A child that goes to the DLQ sends the parent to
the DLQ at once under ``on_child_failure = "fail"``; under ``"ignore"`` it
counts as finished (``flow_lib.lua``). Children left running after their
parent died run on.

Fan-out (``fan_out = {job, count}``): when a job of this type completes it
adds ``count`` children of type ``job``, enqueued at that instant in one
batch, each with its own retries. A flow type does no fan-out (as in the
harness). The records' ``parent`` column names each child's parent.

Children's draws come from :mod:`qsim.model.draws` (planned when the parent
arrives). One level: children of children are refused by
:func:`qsim.model.support.check_supported`, as by the engine harness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qsim.model.state import COMPLETED, DEAD

if TYPE_CHECKING:
    from qsim.model.run import Model

__all__ = ["Flows"]


class Flows:
    """Adds children, holds flow parents in waiting-children, releases them."""

    def __init__(self, model: Model) -> None:
        self.model = m = model
        s = m.scenario
        self.flow = [j.flow is not None for j in s.jobs]
        self.fan = [j.flow is None and j.fan_out is not None for j in s.jobs]
        self.ignore = [j.flow is not None and j.flow.on_child_failure == "ignore" for j in s.jobs]
        self.pending: dict[int, int] = {}  # flow parent -> children not finished yet
        self.n_arrivals = m.jobs.n

    def arrive(self, job: int) -> None:
        """A drawn job arrives (the feed's ``on_arrival``)."""
        self.arrive_batch([job])

    def arrive_batch(self, jobs: list[int]) -> None:
        """Drawn jobs arrive together: flow parents add their children and wait; the rest are enqueued."""
        m = self.model
        ready: list[int] = []
        for job in jobs:
            if self.flow[m.jobs.type[job]]:
                kids = self._add_children(job)
                if kids:
                    self.pending[job] = len(kids)
                    ready.extend(kids)
                    continue
            ready.append(job)
        if len(ready) == 1:
            m.enqueue(ready[0])
        elif ready:
            m.enqueue_batch(ready)

    def _add_children(self, parent: int) -> list[int]:
        m = self.model
        return [m.add_child(c, row, parent) for c, row in m.plan.kids.get(parent, [])]

    def settled(self, job: int, outcome: int, now: float) -> None:
        """The model's settle hook: release or fail a flow parent; fan out a completed job."""
        m = self.model
        p = m.jobs.parent[job]
        if p >= 0 and p in self.pending:
            if outcome == COMPLETED or self.ignore[m.jobs.type[p]]:
                self.pending[p] -= 1
                if self.pending[p] <= 0:
                    del self.pending[p]
                    m.enqueue(p)
            elif outcome == DEAD:
                del self.pending[p]
                m.settle(p, DEAD, now)
        if outcome == COMPLETED and job < self.n_arrivals and self.fan[m.jobs.type[job]]:
            kids = self._add_children(job)
            if kids:
                m.enqueue_batch(kids)
