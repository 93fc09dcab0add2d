"""A job as its handler sees it: :class:`Job`.

What is stored about a job (the hash layout, :class:`JobInfo`, :class:`Attempt`,
:class:`EnqueuedJob`) is in :mod:`qsim.engine.jobinfo` and re-exported here.
A Job reaches the worker that runs it only through its
:class:`~qsim.engine.context.JobContext`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qsim.engine import fanout
from qsim.engine.backoff import Backoff
from qsim.engine.context import JobContext
from qsim.engine.jobinfo import JOB_STATES, Attempt, EnqueuedJob, JobInfo, parse_log

__all__ = ["Job", "JobInfo", "Attempt", "EnqueuedJob", "JOB_STATES", "parse_log"]


class Job:
    """A job as the handler sees it.

    Attributes:
        id: Job id.  name: Job type.  data: Decoded payload.
        attempt: 1 for the first attempt, 2 for the first retry, ...
        queue: Queue name.  max_attempts: Attempts allowed in all.
        timeout: Per-attempt timeout in seconds (0 = none).
        wait: Seconds from enqueue to the start of this first attempt (Redis
            clock; None on later attempts).
        held_us: Microseconds this attempt waited in the worker for a free
            slot before its handler ran (fetched ahead; 0 otherwise).
    """

    __slots__ = ("id", "name", "data", "attempt", "queue", "max_attempts", "timeout", "backoff", "token",
                 "lock_lost", "_context", "wait", "held_us")

    def __init__(
        self,
        id: str,  # noqa: A002
        name: str,
        data: Any,
        attempt: int,
        queue: str,
        max_attempts: int,
        timeout: float,
        backoff: Backoff | None,
        token: str,
        context: JobContext | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.data = data
        self.attempt = attempt
        self.queue = queue
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.backoff = backoff
        self.token = token
        self.lock_lost = False
        self._context = context
        self.wait: float | None = None
        self.held_us = 0

    async def progress(self, value: Any) -> None:
        """Report progress (any JSON value); stored and published as an event.

        Raises:
            LockLost: the worker no longer holds this job's lock.
        """
        if self._context is None:
            raise RuntimeError("progress() needs a job run by a Worker")
        await self._context.report_progress(self, value)

    @property
    def context(self) -> JobContext:
        """What this job may use of the worker running it (RuntimeError when no worker runs it)."""
        if self._context is None:
            raise RuntimeError("this needs a job run by a Worker")
        return self._context

    # -- flows and fan-out (see qsim.engine.flow) ---------------------------
    async def children_values(self) -> dict[str, Any]:
        """Return values of this job's completed children, keyed by ``"<queue>:<child id>"``."""
        return await fanout.children_values(self.context, self)

    async def children_failures(self) -> dict[str, str]:
        """Errors of this job's children that went to the DLQ, keyed by ``"<queue>:<child id>"``."""
        return await fanout.children_failures(self.context, self)

    async def add_children(self, children: Sequence[tuple[Any, ...]], *, on_failure: str = "fail") -> list[EnqueuedJob]:
        """Fan out: add ``(queue, name, data[, options])`` children in one round trip; this job is their parent.

        Children whose ``job_id`` already names a child of this job are skipped
        (``created`` False; so a retried attempt may add the same children again).

        Raises:
            LockLost: the worker no longer holds this job's lock (nothing added).
            FlowError: a child id is taken, or (Cluster) a child queue is in another slot.
        """
        return await fanout.add_children(self.context, self, children, on_failure=on_failure)

    async def move_to_waiting_children(self) -> None:
        """Free this job's slot while its children run (see :func:`qsim.engine.flow.move_to_waiting_children`).

        Returns at once when no child is pending; otherwise raises
        ``WaitingForChildren`` (let it propagate) and the handler runs again
        from the start, in the same attempt, once the children are done.
        """
        await fanout.move_to_waiting_children(self.context, self)

    async def wait_children(self, *, progress: bool = True) -> dict[str, Any]:
        """Wait for every child added by :meth:`add_children`, reporting progress; returns :meth:`children_values`.

        Raises:
            ChildFailed: a child with the ``fail`` policy went to the DLQ.
        """
        return await fanout.wait_children(self.context, self, progress=progress)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, queue={self.queue!r}, attempt={self.attempt})"
