"""The worker's executor: runs the handler on fetched jobs, and holds the ones fetched ahead.

It turns a fetched hash into a :class:`~qsim.engine.job.Job` (a corrupt one
goes straight to the failure path), starts it in a free slot or **holds** it
(fetched ahead: see below), runs the attempt hooks and the handler under the
job's timeout, and puts the result in the :class:`~qsim.engine.outbox.Outbox`:
a completion, a failure (error text scrubbed of secrets, the retry delay from
the job's backoff), or a hand-back when the worker cut the job off at
shutdown. It never talks to Redis itself.

Held jobs (docs/explanation/fetch-ahead.md). A job fetched beyond the free
slots waits here, in fetch order, and starts in the first slot that frees. It
waits at most its **hold bound**: the k-th held job of a fetch expects to wait
about ``k * run_time / concurrency`` (``run_time``: the moving average of the
handler's run times), and may wait ``max(HOLD_MIN, HOLD_FACTOR x that)``, never
more than half a lock. When the first held job's bound passes without a free
slot (the running jobs are longer than the average said), every held job goes
back to the queue in one script call (``release``: the front of its priority
level, order kept, no attempt logged, no stall counted) and the worker fetches
none ahead until a slot frees (:attr:`Executor.blocked`). A held job starts
only while its lock is surely still this worker's (not reported lost by the
lock renewal, and younger than half a lock, counted from Redis' time of its
fetch: a reply read that late hands every job of it back unstarted, even one
a free slot would take); a job fetched again while this
worker holds or runs it (its lock was lost meanwhile) never runs twice: a held
copy is replaced by the new one, a running copy takes over the new lock.
At shutdown (:meth:`Executor.close`) the held jobs go back at once. When a hold
may last ``MARK_HELD`` or more, the fetch marks the held jobs in Redis and a
notice with the next completions clears the mark of each that started, so a
stalled check puts one that never started back without counting a stall; a
shorter hold (every hold of ``prefetch="auto"``) is treated as a start.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

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
#: A held job may wait for a slot at least this long (seconds; a few round trips on a busy machine) ...
HOLD_MIN = 0.01
#: ... or this many times its expected wait (k * run_time / concurrency for the k-th held job of a fetch).
HOLD_FACTOR = 4.0
#: Jobs are marked held in Redis (so a stalled check counts no stall for one that never started) only when
#: a hold may last this long (seconds): a shorter hold is treated as a start, which costs Redis nothing.
MARK_HELD = 0.1

#: A held job: the job, the loop time it arrived, the loop time its hold bound passes, whether its fetch
#: marked it held in Redis (a notice then goes out when it starts; see lua/fetch.lua), the loop time its
#: fetch locked it (at the latest: its lock's age is judged from it).
_Held = tuple[Job, float, float, bool, float]


class Executor:
    """Runs ``handler`` on the jobs the pipeline fetched, one task per job, ``concurrency`` at a time.

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
        #: Jobs whose handler runs, by (queue, id): (job, its task).
        self.running: dict[tuple[str, str], tuple[Job, asyncio.Task[None]]] = {}
        #: Jobs fetched ahead, waiting for a slot, in fetch order, by (queue, id).
        self.held: dict[tuple[str, str], _Held] = {}
        #: Set by the worker when it stops: held jobs go back unstarted.
        self.closing = False
        #: Set when held jobs went back because no slot freed within their bound; cleared when a slot frees.
        #: While set the pipeline fetches none ahead.
        self.blocked = False
        #: Set whenever a job finishes (shutdown waits on it).
        self.changed = asyncio.Event()
        self._names = settings.names
        self._redact = settings.redact_fields
        self._max_payload = settings.max_payload
        self._concurrency = settings.concurrency
        self._lock_half = settings.lock_duration / 2
        #: Moving average of the handler's run time in seconds (None before the first attempt ends).
        self.run_time: float | None = None
        self._cutting: set[asyncio.Future[None]] = set()  # tasks this worker cancels (shutdown cut-off)
        self._backoffs: dict[str, Backoff | None] = {"": None}
        self._rng = random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None  # taken at the first start (never in a constructor)
        self._timer: asyncio.Handle | None = None  # fires when the first held job's bound passes

    @property
    def fetched(self) -> int:
        """Jobs this worker took from Redis and has not finished: running and held."""
        return len(self.running) + len(self.held)

    # -- starting ---------------------------------------------------------------
    def start(self, got: Sequence[Fetched], at_once: int | None = None, *, locked_at: float | None = None) -> None:
        """Start a task per fetched job while slots are free, hold the rest; a corrupt hash fails its job at
        once (to the DLQ). Jobs from the ``at_once``-th on (0-based; None: none) were marked held in Redis by
        their fetch: a notice goes out when one starts. ``locked_at``: the loop time the fetch locked the
        jobs, at the latest (default: now); jobs whose lock is already half a lock old go back unstarted."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        now = loop.time()
        if locked_at is None or locked_at > now:
            locked_at = now
        stale = now - locked_at >= self._lock_half  # the reply was read too late: the locks may be gone
        running, held = self.running, self.held
        for i, f in enumerate(got):
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
            marked = at_once is not None and i >= at_once
            key = (job.queue, job.id)
            if key in running or key in held:
                if self._again(key, job, marked):
                    continue
            if stale:
                logger.warning("job %s: its fetch's reply was read %.1f s after Redis locked it: handed back "
                               "unstarted", job.id, now - locked_at)
                self.outbox.releases.append((job, False))
                self.outbox.wake.set()
            elif len(running) < self._concurrency and not held:
                self._launch(key, job)
                if marked:
                    self.outbox.started.append(job)
            else:
                k = len(held) + 1
                held[key] = (job, now, now + self.hold_bound(k), marked, locked_at)
                if k == 1 or self._timer is None:  # a new first held job: its own bound, however soon
                    self._arm()

    def hold_bound(self, k: int) -> float:
        """Seconds the ``k``-th job held by a fetch may wait for a slot (see the module docstring)."""
        expected = k * (self.run_time or 0.0) / self._concurrency
        return min(self._lock_half, max(HOLD_MIN, HOLD_FACTOR * expected))

    def _again(self, key: tuple[str, str], job: Job, marked: bool) -> bool:
        """``job`` was fetched while this worker holds or runs its id (the lock was lost meanwhile and the job
        came back to this worker). Returns True when it must not start: the running copy goes on under the
        new lock (the job runs once). A held copy is dropped for the new one (its lock is no longer ours)."""
        old = self.running.get(key)
        if old is not None:
            logger.warning("job %s was fetched again while it runs here (its lock was lost): the running attempt "
                           "takes the new lock", job.id)
            old[0].token, old[0].lock_lost = job.token, False
            if marked:
                self.outbox.started.append(old[0])
            return True
        stale = self.held.pop(key)[0]
        stale.lock_lost = True
        logger.warning("job %s was fetched again while held here (its lock was lost): the new fetch replaces it",
                       job.id)
        return False

    def _launch(self, key: tuple[str, str], job: Job) -> None:
        self.running[key] = (job, asyncio.ensure_future(self._run(key, job)))

    def _take_held(self) -> tuple[tuple[str, str], Job] | None:
        """The first held job that may start in a free slot, out of the held ones (None: none may)."""
        held, loop = self.held, self._loop
        while held and len(self.running) < self._concurrency:
            key = next(iter(held))
            job, since, _, marked, locked_at = held.pop(key)
            now = loop.time()  # type: ignore[union-attr]
            if self.closing or job.lock_lost or now - locked_at >= self._lock_half:
                # never start a job whose lock may be gone: back to the queue (refused if it is not ours)
                self.outbox.releases.append((job, False))
                continue
            waited = now - since
            job.held_us = int(waited * 1e6)
            if job.wait is not None:
                job.wait += waited
            if marked:
                self.outbox.started.append(job)
            return key, job
        return None

    def _next(self) -> None:
        """Start held jobs in the free slots, a task each, first held first."""
        while (taken := self._take_held()) is not None:
            self._launch(*taken)

    def _arm(self) -> None:
        """Wake up when the first held job's hold bound passes."""
        if self._timer is not None:
            self._timer.cancel()
        first = next(iter(self.held.values()))
        self._timer = self._loop.call_at(first[2], self._bound_passed)  # type: ignore[union-attr]

    def _bound_passed(self) -> None:
        # A timer runs before the tasks its loop iteration woke (a handler whose sleep ended this iteration
        # takes its step in the next one): look once those ran, so a pause of the whole process (CPU taken by
        # others) does not send back jobs whose slot is freeing right now.
        self._timer = self._loop.call_soon(self._check_bound)  # type: ignore[union-attr]

    def _check_bound(self) -> None:
        self._timer = None
        if not self.held:
            return
        first = next(iter(self.held.values()))
        if self._loop.time() < first[2]:  # type: ignore[union-attr]
            self._arm()  # the job it was armed for has started: wait for the new first one's bound
            return
        logger.debug("no slot freed within %.3f s: handing %s held jobs back", first[2] - first[1], len(self.held))
        self.blocked = True
        self.hand_back_held()

    def hand_back_held(self) -> int:
        """Every held job back to the queue, unstarted (one script call per queue); returns how many."""
        n = len(self.held)
        if n:
            self.outbox.releases.extend((h[0], False) for h in self.held.values())
            self.held.clear()
            self.outbox.wake.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return n

    def close(self) -> int:
        """The worker stops: no job starts any more, the held ones go back at once; returns how many."""
        self.closing = True
        n = self.hand_back_held()
        if n:
            logger.info("handing %s held jobs back unstarted", n)
        return n

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
    async def _run(self, key: tuple[str, str], job: Job) -> None:
        """Run ``job``, then, in the slot it frees, the first held job, and so on (no task per held job: the
        next one starts in the same step, before the pipeline builds its next batch)."""
        while True:
            done = await self._attempt(key, job)
            taken = self._take_held() if done else None
            if taken is None:
                if self.held:
                    self._next()
                return
            key, job = taken
            self.running[key] = (job, cast("asyncio.Task[None]", asyncio.current_task()))

    async def _attempt(self, key: tuple[str, str], job: Job) -> bool:
        """One attempt of ``job`` in its slot; False when its task must end (the handler raised GeneratorExit)."""
        t0 = time.perf_counter()
        done = True
        try:
            if self.hooks:
                result = await self._hooked(job)
            elif job.timeout > 0:
                result = await self._timed(job)
            else:
                result = await self._call(job)
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
            done = not isinstance(e, GeneratorExit)
        finally:
            took = time.perf_counter() - t0
            rt = self.run_time
            self.run_time = took if rt is None else rt + _RUN_TIME_WEIGHT * (took - rt)
            if self.running.get(key, (None,))[0] is job:
                del self.running[key]
            self.blocked = False
            self.outbox.wake.set()
            self.changed.set()
        return done

    def _call(self, job: Job) -> Awaitable[Any]:
        """The handler's awaitable for ``job``. A handler that returns something else (a plain ``def``) is
        a mistake no retry mends: the attempt fails unrecoverable (straight to the dead-letter queue, from
        which ``qsim dlq retry --all`` brings the jobs back once the handler is fixed), saying so."""
        aw = self.handler(job)
        if not inspect.isawaitable(aw):
            raise UnrecoverableError(f"the handler returned {type(aw).__name__}, not an awaitable: a handler is an "
                                     "async function (async def handler(job): ...) or a function returning one's "
                                     "coroutine")
        return aw

    async def _timed(self, job: Job) -> Any:
        """The handler under the job's per-attempt timeout."""
        cm = asyncio.timeout(job.timeout)
        try:
            async with cm:
                return await self._call(job)
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
            return await (self._timed(job) if job.timeout > 0 else self._call(job))
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
        tasks = [t for _, t in self.running.values()]
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
        for job, _ in list(self.running.values()):
            logger.error("job %s ignored cancellation; handing it back anyway", job.id)
            self.outbox.releases.append((job, True))
        return len(tasks)

    def locked(self) -> list[Job]:
        """Jobs whose lock this worker holds: running, held, or finished but not yet acknowledged."""
        return [j for j, _ in self.running.values()] + [h[0] for h in self.held.values()] + self.outbox.held()
