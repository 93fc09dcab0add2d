"""What the mechanisms may use of a run: small typed contexts, never the whole model.

:class:`~qsim.model.core.ModelCore` satisfies every protocol here; each
mechanism names the one it needs, so its reach into the run is written down
and checked (mypy), and nothing imports the core or the wiring back:

- :class:`RunContext` — the clock, the job table, settling and putting a job
  back (the backoff of :mod:`~qsim.model.retries` uses nothing more but
  :meth:`~RetryContext.set_service`);
- :class:`FlowContext` — adding and enqueueing children (:mod:`~qsim.model.flows`);
- :class:`PoolContext` — slots, processes and dispatch (:mod:`~qsim.model.events`).

Times: ``now`` is the current simulated time, passed along by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import simpy

from qsim.model.dispatch import Pool
from qsim.model.state import JobTable

__all__ = ["RunContext", "RetryContext", "FlowContext", "PoolContext"]


class RunContext(Protocol):
    """The clock, the jobs, and how a job settles or comes back."""

    @property
    def env(self) -> simpy.Environment:
        """The run's environment (timers: ``simpy.Timeout``, ``env.process``)."""

    @property
    def jobs(self) -> JobTable:
        """Every job's columns."""

    def settle(self, job: int, outcome: int, now: float) -> None:
        """The job is done for good (an outcome of :mod:`~qsim.model.state`)."""

    def requeue(self, job: int, now: float) -> None:
        """A job comes back to waiting (a retry, a flow parent released)."""

    def requeue_batch(self, jobs: list[int], now: float) -> None:
        """Several jobs come back to waiting at once (best priority first)."""


class RetryContext(RunContext, Protocol):
    """What :class:`~qsim.model.retries.Retries` uses."""

    def set_service(self, job: int, service: float) -> None:
        """The service time of the job's next attempt."""


class FlowContext(RunContext, Protocol):
    """What :class:`~qsim.model.flows.Flows` uses."""

    def add_job(self, type_: int, service: float, parent: int, now: float) -> int:
        """Add a child job of type ``type_`` now (not yet waiting); returns its number."""

    def enqueue(self, job: int, now: float) -> None:
        """A new job becomes waiting."""

    def enqueue_batch(self, jobs: list[int], now: float) -> None:
        """New jobs become waiting at once."""


class PoolContext(RunContext, Protocol):
    """What :class:`~qsim.model.events.PoolEvents` uses: slots, processes, dispatch."""

    @property
    def pools(self) -> Sequence[Pool]:
        """The pools, by index."""

    @property
    def n_slots(self) -> int:
        """Slots so far (ids ``0 .. n_slots - 1``)."""

    @property
    def slot_worker(self) -> Sequence[int]:
        """The process of each slot."""

    @property
    def worker_names(self) -> Sequence[str]:
        """The name of each process."""

    def job_on(self, slot: int) -> int:
        """The job running on ``slot``, or -1."""

    def lane(self, job: int) -> int:
        """The lane (waiting line, :mod:`~qsim.model.lanes`) the job joins: gates and dispatch are per lane."""

    def requeue_front(self, jobs: list[int], now: float) -> None:
        """Jobs put back (stalled) or handed back (shutdown): to the front of their priority level, in order."""

    def cancel(self, slot: int) -> int:
        """Stop the attempt on ``slot`` now (its end event will be ignored); its job, or -1.

        The job leaves its lane's active count; its place under the lane's
        gates stays until :meth:`release`.
        """

    def release(self, q: int, now: float) -> bool:
        """A stopped job of lane ``q`` gives up its place under the gates; True when ``q`` reopened."""

    def offer(self, q: int, now: float) -> None:
        """Let the pools serving lane ``q`` (and the other lanes of its queue) take their jobs."""

    def fill(self, pool: Pool, now: float) -> None:
        """Let ``pool``'s free slots take jobs."""

    def add_worker(self, pool: Pool, name: str) -> int:
        """A new process named ``name`` in ``pool``; returns its index."""

    def add_slot(self, pool: Pool, worker: int) -> int:
        """A new slot of process ``worker`` in ``pool`` (not yet free); returns its id."""
