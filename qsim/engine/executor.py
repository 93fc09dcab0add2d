"""The worker's executor: runs the handler on fetched jobs.

It turns a fetched hash into a :class:`~qsim.engine.job.Job` (a corrupt one
goes straight to the failure path), waits for a slot when the job was
prefetched, runs the attempt hooks and the handler under the job's timeout,
and puts the result in the :class:`~qsim.engine.outbox.Outbox`: a completion,
a failure (error text scrubbed of secrets, the retry delay from the job's
backoff), or a hand-back when the worker cut the job off at shutdown. It
never talks to Redis itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from qsim.engine.backoff import Backoff
from qsim.engine.context import JobContext
from qsim.engine.failures import AttemptTimeout, corrupt_fields, describe
from qsim.engine.hooks import AttemptHook
from qsim.engine.job import Job
from qsim.engine.outbox import Outbox
from qsim.engine.payload import encode_payload, scrub_text
from qsim.engine.protocol import Fetched
from qsim.engine.settings import WorkerSettings
from qsim.errors import PayloadError, UnrecoverableError, WaitingForChildren

__all__ = ["Executor", "Handler"]

logger = logging.getLogger(__name__)

#: ``async def handler(job) -> result``; the result must be JSON.
Handler = Callable[[Job], Awaitable[Any]]

_CORRUPT = (ValueError, KeyError, TypeError, RecursionError, PayloadError)
#: Weight of the newest attempt in :attr:`Executor.run_time` (a moving average over ~10 attempts).
_RUN_TIME_WEIGHT = 0.1


class Executor:
    """Runs ``handler`` on the jobs the pipeline fetched, one task per job.

    Args:
        handler: The worker's handler.
        settings: The worker's settings.
        context: What the jobs may use of the worker.
        outbox: Where results go.
        hooks: Called around each attempt (see :mod:`qsim.engine.hooks`).
    """

    def __init__(self, handler: Handler, settings: WorkerSettings, context: JobContext, outbox: Outbox,
                 hooks: Sequence[AttemptHook] = ()) -> None:
        self.handler = handler
        self.context = context
        self.outbox = outbox
        self.hooks = tuple(hooks)
        #: Jobs fetched and not yet finished, by id: (job, its task).
        self.active: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        #: Set by the worker when it stops: prefetched jobs go back unstarted.
        self.closing = False
        #: Set whenever a job finishes (shutdown waits on it).
        self.changed = asyncio.Event()
        self._names = settings.names
        self._redact = settings.redact_fields
        self._max_payload = settings.max_payload
        self._slots = asyncio.Semaphore(settings.concurrency) if settings.prefetch != 0 else None
        #: Moving average of the handler's run time in seconds (None before the first attempt ends).
        self.run_time: float | None = None
        self._cutting: set[asyncio.Future[None]] = set()  # tasks this worker cancels (shutdown cut-off)
        self._backoffs: dict[str, Backoff | None] = {"": None}
        self._rng = random.Random()

    # -- starting ---------------------------------------------------------------
    def start(self, got: Sequence[Fetched]) -> None:
        """Start a task per fetched job; a corrupt hash fails its job at once (to the DLQ)."""
        for f in got:
            try:
                job = self.build(f)
            except _CORRUPT as e:
                queue = self._names[int(f.queue_index) - 1]
                err = e if isinstance(e, PayloadError) else PayloadError(
                    f"job hash is corrupt: {corrupt_fields(f) or e}")
                logger.error("job %s of queue %s is corrupt (%s): moving it to the DLQ", f.id, queue, err)
                job = Job(f.id, f.name, None, 1, queue, 1, 0.0, None, f.token, self.context)
                self.outbox.fails.append((job, f"PayloadError: {err}", "", -1, err))
                continue
            self.active[f.id] = (job, asyncio.ensure_future(self._run(job)))

    def hand_back(self, got: Sequence[Fetched]) -> None:
        """Jobs whose fetch was in flight when the stop came: back to the queue unstarted (no attempt counted)."""
        for f in got:
            queue = self._names[int(f.queue_index) - 1]
            job = Job(f.id, f.name, None, 1, queue, 1, 0.0, None, f.token, self.context)
            self.outbox.releases.append((job, False))

    def build(self, f: Fetched) -> Job:
        """The handler's Job from a fetched hash; raises on corrupt fields."""
        if not f.name:
            raise PayloadError("job hash is corrupt: it has no name")
        bo = self._backoffs.get(f.backoff)
        if bo is None and f.backoff:
            bo = self._backoffs[f.backoff] = Backoff.from_json(f.backoff)
        try:
            data = None if f.data == "null" else json.loads(f.data)  # no payload: the common no-op case
        except (ValueError, RecursionError) as e:
            raise PayloadError(f"job data is not valid JSON: {e}") from e
        queue = self._names[int(f.queue_index) - 1]
        job = Job(f.id, f.name, data, int(f.attempts_made) + 1, queue, int(f.max_attempts),
                  float(f.timeout or 0), bo, f.token, self.context)
        if f.wait:
            job.wait = float(f.wait)
        return job

    # -- running ----------------------------------------------------------------
    async def _run(self, job: Job) -> None:
        slots = self._slots
        slot = False
        t0 = 0.0
        try:
            if slots is not None:
                if slots.locked():  # fetched ahead: wait for a free slot, and say how long (the job's start moves)
                    asked = time.perf_counter()
                    await slots.acquire()
                    held = time.perf_counter() - asked
                    job.held_us = int(held * 1e6)
                    if job.wait is not None:
                        job.wait += held
                else:
                    await slots.acquire()
                slot = True
                if self.closing:  # never started: hand it back, the attempt does not count
                    self.outbox.releases.append((job, False))
                    return
            t0 = time.perf_counter()
            if self.hooks:
                result = await self._hooked(job)
            elif job.timeout > 0:
                result = await self._timed(job)
            else:
                result = await self.handler(job)
            rv = "null" if result is None else encode_payload(
                result, what=f"job {job.id} return value", max_bytes=self._max_payload, warn_bytes=self._max_payload)
            self.outbox.acks.append((job, rv, result))
        except asyncio.CancelledError as e:
            if asyncio.current_task() in self._cutting:
                self.outbox.releases.append((job, True))  # cut off at shutdown: handed back, the attempt does not count
            else:
                self.failed(job, e)  # the handler's own CancelledError: a failed attempt like any error
        except WaitingForChildren:
            pass  # the park script took the job out of active: nothing to acknowledge
        except Exception as e:  # noqa: BLE001 - a handler may raise anything
            self.failed(job, e)
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt, SystemExit, GeneratorExit from a handler
            # A handler's sys.exit() or KeyboardInterrupt fails its attempt like any error (retry, then the
            # DLQ); it does not stop the worker: only signals (SIGTERM/SIGINT) and close() do that.
            self.failed(job, e)
        finally:
            if t0:
                took = time.perf_counter() - t0
                rt = self.run_time
                self.run_time = took if rt is None else rt + _RUN_TIME_WEIGHT * (took - rt)
            if slot:
                slots.release()  # type: ignore[union-attr]
            if self.active.get(job.id, (None,))[0] is job:  # not a newer attempt of the same id
                del self.active[job.id]
            self.outbox.wake.set()
            self.changed.set()

    async def _timed(self, job: Job) -> Any:
        """The handler under the job's per-attempt timeout."""
        cm = asyncio.timeout(job.timeout)
        try:
            async with cm:
                return await self.handler(job)
        except TimeoutError as e:
            if cm.expired():
                raise AttemptTimeout(f"attempt timed out after {job.timeout:g} s") from e
            raise

    async def _hooked(self, job: Job) -> Any:
        """The attempt with its hooks around it (chosen when hooks are registered)."""
        for h in self.hooks:
            try:
                h.before_attempt(job)
            except Exception:
                logger.exception("before_attempt hook %r failed", h)
        t0 = time.perf_counter()
        error: BaseException | None = None
        try:
            return await (self._timed(job) if job.timeout > 0 else self.handler(job))
        except BaseException as e:
            error = e
            raise
        finally:
            seconds = time.perf_counter() - t0
            for h in self.hooks:
                try:
                    h.after_attempt(job, seconds, error)
                except Exception:
                    logger.exception("after_attempt hook %r failed", h)

    def failed(self, job: Job, e: BaseException) -> None:
        """Queue the failure of ``job``'s attempt; never raises (a failure not sent would leave the job to stall)."""
        err, tb, delay = f"{type(e).__name__}: <the error could not be recorded>", "", 0
        try:
            text, trace = describe(e)
            err = scrub_text(text, job.data, self._redact)[:2000]
            tb = scrub_text(trace, job.data, self._redact)[-20000:]  # (only ever the scrubbed text)
            if isinstance(e, UnrecoverableError):
                delay = -1
            elif job.backoff is not None:
                delay = job.backoff.delay_ms(job.attempt, self._rng)
        except BaseException as x:  # noqa: BLE001 - record the attempt whatever went wrong
            logger.error("job %s: recording its failure raised %s; recorded as %r", job.id, type(x).__name__, err)
        logger.warning("job %s (%s) attempt %s/%s failed: %s", job.id, job.name, job.attempt, job.max_attempts, err)
        self.outbox.fails.append((job, err, tb, delay, e))

    # -- stopping ---------------------------------------------------------------
    def cancel_all(self) -> list[asyncio.Task[None]]:
        """Cancel every running handler as a cut-off (its job is handed back, not failed); returns the tasks."""
        tasks = [t for _, t in self.active.values()]
        for t in tasks:
            self._cutting.add(t)
            t.cancel()
        return tasks

    async def cut_off(self, wait: float = 5.0) -> int:
        """Cut off every running job: cancel, wait up to ``wait`` s, hand back the ones that ignored it.

        Returns how many jobs were running.
        """
        tasks = self.cancel_all()
        if not tasks:
            return 0
        await asyncio.wait(tasks, timeout=wait)
        for job, _ in list(self.active.values()):
            logger.error("job %s ignored cancellation; handing it back anyway", job.id)
            self.outbox.releases.append((job, True))
        return len(tasks)

    def held(self) -> list[Job]:
        """Jobs whose lock this worker holds: running, or finished but not yet acknowledged."""
        return [j for j, _ in self.active.values()] + self.outbox.held()
