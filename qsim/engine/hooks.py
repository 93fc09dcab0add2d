"""Attempt hooks: code that runs around every attempt without wrapping the handler.

A hook is any object with ``before_attempt(job)`` and ``after_attempt(job,
seconds, error)`` (:class:`AttemptHook`); ``Worker.add_hook(hook)`` registers
it. The worker calls ``before_attempt`` right before the handler starts
(after a prefetched job got its slot) and ``after_attempt`` right after it
returned or raised, with the handler's time in seconds and the exception
(None on success; ``WaitingForChildren`` when the job parked itself; a
``CancelledError`` when the worker cut it off at shutdown). Hooks run on the
event loop, in the order registered: keep them short and non-blocking. A hook
that raises is logged and does not change the attempt.

:class:`~qsim.engine.metrics.WorkerMetrics` is one (it times attempts and
counts waits); outcomes after Redis acknowledged them (completed, retrying,
dead, ...) are events: ``Worker.on(event, callback)``.
"""

from __future__ import annotations

from typing import Protocol

from qsim.engine.job import Job

__all__ = ["AttemptHook"]


class AttemptHook(Protocol):
    """Called around each attempt (see the module docstring)."""

    def before_attempt(self, job: Job) -> None:
        """The handler is about to run ``job`` (``job.wait`` is set on a first attempt)."""

    def after_attempt(self, job: Job, seconds: float, error: BaseException | None) -> None:
        """The handler ran ``job`` for ``seconds`` and raised ``error`` (None: it returned)."""
