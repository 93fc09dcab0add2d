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

Children's draws come from the workload (:mod:`qsim.spec.workload`, planned when
the parent arrives; :mod:`qsim.model.draws` maps them to the children). One
level: children of children are refused by
:func:`qsim.model.support.check_supported`, as by the engine harness.
"""

from __future__ import annotations

from qsim.model.context import FlowContext
from qsim.model.draws import DrawIndex
from qsim.model.state import COMPLETED, DEAD
from qsim.spec.scenario import Scenario

__all__ = ["Flows"]


class Flows:
    """Adds children, holds flow parents in waiting-children, releases them (the run's
    :class:`~qsim.model.hooks.FlowHooks`)."""

    def __init__(self, ctx: FlowContext, draws: DrawIndex, scenario: Scenario) -> None:
        self.ctx = ctx
        self.draws = draws
        self.flow = [j.flow is not None for j in scenario.jobs]
        self.fan = [j.flow is None and j.fan_out is not None for j in scenario.jobs]
        self.ignore = [j.flow is not None and j.flow.on_child_failure == "ignore" for j in scenario.jobs]
        self.pending: dict[int, int] = {}  # flow parent -> children not finished yet
        self.parents: list[int] = []  # every flow parent that went to waiting-children
        self.n_arrivals = ctx.jobs.n

    def arrive(self, job: int, now: float) -> None:
        """A drawn job arrives (the feed's ``on_arrival``)."""
        self.arrive_batch([job], now)

    def arrive_batch(self, jobs: list[int], now: float) -> None:
        """Drawn jobs arrive together: flow parents add their children and wait; the rest are enqueued."""
        ctx = self.ctx
        ready: list[int] = []
        for job in jobs:
            if self.flow[ctx.jobs.type[job]]:
                kids = self._add_children(job, now)
                if kids:
                    self.pending[job] = len(kids)
                    self.parents.append(job)
                    ready.extend(kids)
                    continue
            ready.append(job)
        if len(ready) == 1:
            ctx.enqueue(ready[0], now)
        elif ready:
            ctx.enqueue_batch(ready, now)

    def _add_children(self, parent: int, now: float) -> list[int]:
        ctx, draws = self.ctx, self.draws
        return [ctx.add_job(c, draws.add_child(c, row), parent, now) for c, row in draws.kids.get(parent, [])]

    def settled(self, job: int, outcome: int, now: float) -> None:
        """A job settled: release or fail a flow parent; fan out a completed job."""
        ctx = self.ctx
        jobs = ctx.jobs
        p = jobs.parent[job]
        if p >= 0 and p in self.pending:
            if outcome == COMPLETED or self.ignore[jobs.type[p]]:
                self.pending[p] -= 1
                if self.pending[p] <= 0:
                    del self.pending[p]
                    ctx.requeue(p, now)  # it joins its queue now (its enqueued stays its arrival)
            elif outcome == DEAD:
                del self.pending[p]
                ctx.settle(p, DEAD, now)
        if outcome == COMPLETED and job < self.n_arrivals and self.fan[jobs.type[job]]:
            kids = self._add_children(job, now)
            if kids:
                ctx.enqueue_batch(kids, now)
