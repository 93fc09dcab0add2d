"""Retries, backoff, timeouts and the dead-letter queue: how an attempt ended.

:class:`Retries` is the run's ``attempt_result`` (see :mod:`qsim.model.hooks`).
When an attempt ends it decides, from the job's draws (:mod:`qsim.spec.workload`),
what happened:

- it ran longer than its type's ``timeout`` (> 0): the attempt was stopped
  at exactly ``start + timeout`` (the core held the slot only that long, and
  ``ack_overhead`` more) and failed as a ``timeout``;
- its job is poison, or this attempt's failure flag is set: it failed;
- else it succeeded and the job is completed.

A failed attempt uses up one of the type's ``attempts`` (as in the engine's
``fail.lua``: retried while attempts made < attempts); when they are spent
the job goes to the dead-letter queue (outcome ``dead``). Otherwise it waits
:func:`backoff_delay` and is enqueued again (with a new FIFO sequence, like
the engine), its next attempt running the next drawn service time. Stalls and
shutdown cut-offs do not use up an attempt (they are not decided here).
"""

from __future__ import annotations

from typing import cast

from simpy.events import Event, Timeout

from qsim.model.attempts import FAILED, OK, TIMEOUT, AttemptLog
from qsim.model.context import RetryContext
from qsim.model.draws import DrawIndex
from qsim.model.state import COMPLETED, DEAD
from qsim.spec.scenario import BackoffSpec, Scenario
from qsim.spec.workload import stream

__all__ = ["backoff_delay", "Retries"]


def backoff_delay(spec: BackoffSpec, failed: int, u: float) -> float:
    """Seconds before the retry after the ``failed``-th failed attempt (1-based).

    The engine's rule, computed by the same function (:mod:`qsim.spec.backoff`, via
    :meth:`BackoffSpec.delay_ms`, which gives the engine's Backoff the harness
    makes): ``fixed``: ``delay``; ``exponential``: ``delay * 2**(failed - 1)``
    capped at ``max``; with ``jitter`` the delay is multiplied by
    ``1 - jitter * u`` (uniform in ``[d (1 - jitter), d]``), ``u`` uniform in
    [0, 1). Whole milliseconds, rounded down, as the engine stores it.
    """
    return spec.delay_ms(failed, u) / 1000


class Retries:
    """The run's :class:`~qsim.model.hooks.AttemptResult`: decide an attempt's result, settle or retry the job.

    ``log``: the run's attempt log (its recorder begins each row; this finishes it).
    """

    def __init__(self, ctx: RetryContext, draws: DrawIndex, log: AttemptLog, scenario: Scenario, seed: int) -> None:
        self.ctx = ctx
        self.draws = draws
        self.log, self.row_of = log, log.row_of
        self.timeout = [j.timeout for j in scenario.jobs]
        self.max_attempts = [j.attempts for j in scenario.jobs]
        self.backoff = [j.backoff for j in scenario.jobs]
        self.rng = [stream(seed, j.name, "backoff") for j in scenario.jobs]
        jobs = ctx.jobs
        self._type, self._service, self._failed = jobs.type, jobs.service, jobs.failed_attempts

    def __call__(self, job: int, slot: int, now: float) -> None:
        ctx = self.ctx
        k = self._type[job]
        made = self._failed[job]  # attempts used up before this one
        t = self.timeout[k]
        table, row = self.draws.of(job)
        if t > 0 and self._service[job] > t:
            result = TIMEOUT
        elif table is not None and (table.poison[row] or table.fails[row, made]):
            result = FAILED
        else:
            result = OK
        self.log.finish(self.row_of[slot], now, result)
        if result == OK:
            ctx.settle(job, COMPLETED, now)
            return
        made += 1
        self._failed[job] = made
        if made >= self.max_attempts[k] or table is None:
            ctx.settle(job, DEAD, now)
            return
        ctx.set_service(job, float(table.service[row, made]))
        spec = self.backoff[k]
        u = self.rng[k].random() if spec.jitter else 0.0
        delay = backoff_delay(spec, made, u)
        if delay > 0:
            Timeout(ctx.env, delay, job).callbacks.append(self._due)
        else:
            ctx.requeue(job, now)

    def _due(self, event: Event) -> None:
        self.ctx.requeue(cast(int, event.value), self.ctx.env.now)
