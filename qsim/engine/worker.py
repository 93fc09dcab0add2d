"""The asyncio worker: fetch in batches, run handlers, acknowledge in batches.

A :class:`Worker` is a few parts with typed seams between them:

* :class:`~qsim.engine.settings.WorkerSettings` -- the validated settings (the keyword arguments);
* :class:`~qsim.engine.pipeline.Pipeline` -- the fetch/ack loop: one round trip
  per batch (completions, failures, hand-backs, a promotion, a fetch), each
  part of a batch reading its own replies; BLPOP on the queues' markers when idle;
* :class:`~qsim.engine.executor.Executor` -- runs the handler on each fetched
  job (slots, timeouts, attempt hooks, the failure path, cut-off) and puts the
  results in the :class:`~qsim.engine.outbox.Outbox` the pipeline sends;
* :class:`~qsim.engine.context.JobContext` -- what jobs, the fan-out helpers and
  the side tasks (:mod:`qsim.engine.maintenance`: lock renewal every
  ``lock_duration / 2`` s, stalled-job recovery every ``stalled_interval`` s)
  may use of the worker;
* this module: the lifecycle -- ``run()`` / ``close()``, signals, the graceful
  stop (drain for ``shutdown_grace``, then cut off and hand back) -- plus
  events (``on``) and hooks around attempts and around the run (``add_hook``, :mod:`qsim.engine.hooks`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
from collections.abc import Callable, Sequence
from typing import Any, Unpack, cast

from qsim.engine.connection import connect_async, display_url
from qsim.engine.context import RunContext
from qsim.engine.eventloop import cancel_and_wait
from qsim.engine.events import Emitter
from qsim.engine.executor import Executor, Handler
from qsim.engine.hooks import AttemptHook, LifecycleHook, is_attempt_hook, is_lifecycle_hook
from qsim.engine.job import Job
from qsim.engine.keys import QueueKeys
from qsim.engine.maintenance import check_eviction_policy, recover_stalled, renew_locks
from qsim.engine.outbox import Outbox
from qsim.engine.pipeline import Pipeline, by_queue
from qsim.engine.protocol import release_call
from qsim.engine.scripts import REDIS_ERRORS, ScriptSet, run_calls_async
from qsim.engine.settings import WorkerOptions, WorkerSettings
from qsim.errors import RedisUnavailable

__all__ = ["Worker", "Handler", "EXIT_DRAINED", "EXIT_CUT_OFF"]

logger = logging.getLogger(__name__)

#: ``run()`` / ``close()`` result when every active job finished.
EXIT_DRAINED = 0
#: ``run()`` / ``close()`` result when jobs were cut off at shutdown and handed back.
EXIT_CUT_OFF = 3

#: Seconds a reply may take beyond the longest BLPOP (``block_timeout``) before the worker's connection
#: counts as gone (a frozen or unreachable Redis). Set explicitly: redis-py's own default (5 s since
#: redis-py 8, none before) would cut every idle 5 s BLPOP short, or wait forever on a frozen Redis.
REPLY_TIMEOUT = 5.0

_HAND_BACK_ERRORS: tuple[type[Exception], ...] = (*REDIS_ERRORS, TimeoutError)


class _Run:
    """The parts of one ``run()``: made once the client exists, dropped when it ends."""

    def __init__(self, worker: Worker, client: Any) -> None:
        s = worker.settings
        self.client = client
        self.context = RunContext(client, ScriptSet(client), s.limits, s.prefix, s.group, dict(zip(s.names, s.keys)),
                                  worker._emitter.emit)
        self.outbox = Outbox()
        self.executor = Executor(worker.handler, s, self.context, self.outbox, worker._hooks)
        self.pipeline = Pipeline(s, self.context, self.executor, self.outbox, worker._emitter, worker._processed)
        self.force = asyncio.Event()  # a second signal: cut off now
        self.finished = asyncio.Event()
        self.shutdown: asyncio.Task[None] | None = None


class Worker:
    """Runs ``handler`` on the jobs of a queue, ``concurrency`` at a time.

    ``Worker(queues, handler, concurrency=10, ...)``: ``queues`` is a queue name or a list of names
    served together, ``handler`` is ``async def handler(job) -> result`` (the result must be JSON),
    and the keywords are the fields of :class:`~qsim.engine.settings.WorkerSettings` (``policy``,
    ``weights``, ``group``, ``redis``, ``concurrency``, ``lock_duration``, ``stalled_interval``,
    ``max_stalled``, ``shutdown_grace``, ``prefix``, ``redact``, ``prefetch``, ``worker_id``, ...:
    each documented there, with its ``qsim worker`` flag). ``Worker(settings, handler)`` takes a
    whole :class:`~qsim.engine.settings.WorkerSettings` instead (keywords then replace its fields).
    The settings are validated into :attr:`settings`; a bad one raises ``ValueError`` quoting it, an
    unknown keyword ``TypeError``.

    ``run()`` returns :data:`EXIT_DRAINED` (0) when it stopped with every
    active job finished, :data:`EXIT_CUT_OFF` (3) when some were cancelled
    at the end of the grace period and handed back to the queue.
    """

    def __init__(self, queues: str | Sequence[str] | WorkerSettings, handler: Handler,
                 **options: Unpack[WorkerOptions]) -> None:
        if isinstance(queues, WorkerSettings):
            self.settings = dataclasses.replace(queues, **options) if options else queues
        else:
            self.settings = WorkerSettings(queues=queues, **options)
        if not callable(handler):
            raise ValueError(f"handler must be an async function (async def handler(job): ...), got {handler!r}")
        self.handler = handler
        self._emitter = Emitter()
        self._hooks: list[AttemptHook] = []
        self._lifecycle: list[LifecycleHook] = []
        self._run: _Run | None = None
        self._run_made: asyncio.Event | None = None  # per run(): set once its parts exist, or once it ended
        self._starting: asyncio.Event | None = None  # set while run() connects; close() then waits on it
        self._close_early: float | None = None  # a close() asked for while run() was still connecting
        self._exit_code = EXIT_DRAINED
        self._processed = 0

    # -- public -------------------------------------------------------------
    def on(self, event: str, callback: Callable[..., Any]) -> None:
        """Call ``callback`` on ``event`` (see :data:`qsim.engine.events.EVENTS`)."""
        self._emitter.on(event, callback)

    def add_hook(self, hook: AttemptHook | LifecycleHook) -> None:
        """Call ``hook.before_attempt`` / ``hook.after_attempt`` around every attempt, and ``hook.on_start`` /
        ``hook.on_stop`` when a ``run()`` starts and has stopped (either pair, or both; see
        :mod:`qsim.engine.hooks`).

        Hooks added while the worker runs take effect at its next ``run()``.
        """
        attempt, lifecycle = is_attempt_hook(hook), is_lifecycle_hook(hook)
        if not attempt and not lifecycle:
            raise ValueError(f"a hook needs before_attempt(job) and after_attempt(job, seconds, error), or "
                             f"on_start(worker) and on_stop(worker), got {hook!r}")
        if attempt:
            self._hooks.append(cast(AttemptHook, hook))
        if lifecycle:
            self._lifecycle.append(cast(LifecycleHook, hook))

    @property
    def id(self) -> str:
        """Name of this worker in job records."""
        return self.settings.id

    @property
    def queue(self) -> str:
        """The (first) queue served."""
        return self.settings.names[0]

    @property
    def queues(self) -> list[str]:
        """The queues served, in order."""
        return list(self.settings.names)

    @property
    def keys(self) -> QueueKeys:
        """The keys of the first queue."""
        return self.settings.keys[0]

    @property
    def all_keys(self) -> list[QueueKeys]:
        """The keys of every queue served, in order."""
        return list(self.settings.keys)

    @property
    def url(self) -> str:
        """The Redis URL."""
        return self.settings.redis

    @property
    def concurrency(self) -> int:
        """Jobs run at the same time at most."""
        return self.settings.concurrency

    @property
    def active(self) -> int:
        """Jobs running right now (not counting the ones fetched ahead, waiting for a slot)."""
        return len(self._run.executor.running) if self._run is not None else 0

    @property
    def processed(self) -> int:
        """Jobs run so far (completed or failed acknowledgements sent)."""
        return self._run.pipeline.processed if self._run is not None else self._processed

    async def run(self) -> int:
        """Work until ``close()`` or SIGTERM/SIGINT; returns the exit code. The lifecycle hooks' ``on_start``
        run first, their ``on_stop`` last (:mod:`qsim.engine.hooks`).

        Raises:
            RedisUnavailable: Redis cannot be reached at start.
        """
        if self._run is not None or self._starting is not None:
            raise RuntimeError("this worker is already running")
        self._starting, self._close_early = asyncio.Event(), None
        self._run_made = asyncio.Event()
        started: list[LifecycleHook] = []
        try:
            for hook in list(self._lifecycle):
                await hook.on_start(self)
                started.append(hook)
            return await self._work()
        finally:
            if self._starting is not None:  # an on_start raised or was cancelled: nothing connected
                self._starting.set()
                self._starting = None
            if self._run_made is not None:  # (a wait_taking_work still waiting learns the run ended)
                self._run_made.set()
                self._run_made = None
            for hook in reversed(started):
                try:
                    await hook.on_stop(self)
                except Exception:  # noqa: BLE001 - a hook's failure is logged, the run's outcome stands
                    logger.exception("lifecycle hook %r failed on stop", hook)

    async def _work(self) -> int:
        """Connect, work until closed, disconnect (``run()`` between its hooks)."""
        assert self._starting is not None
        s = self.settings
        client = connect_async(s.redis, socket_connect_timeout=5.0, socket_timeout=s.block_timeout + REPLY_TIMEOUT,
                               socket_keepalive=True)
        run = _Run(self, client)
        try:
            await client.ping()
            await check_eviction_policy(client, s.redis)
        except BaseException as e:
            await client.aclose()
            if isinstance(e, REDIS_ERRORS):
                raise RedisUnavailable(f"cannot reach Redis at {display_url(s.redis)}: {e}") from e
            raise
        finally:
            self._starting.set()
            self._starting = None
        self._run = run
        if self._run_made is not None:
            self._run_made.set()
        self._exit_code = EXIT_DRAINED
        if self._close_early is not None:
            self._request_close(run, self._close_early)
        loop = asyncio.get_running_loop()
        signals = self._install_signals(loop)
        side = self._side_tasks(run)
        logger.info("worker %s started on queue %s (concurrency %s)", s.id, ", ".join(s.names), s.concurrency)
        try:
            await run.pipeline.run()
            if run.pipeline.gave_up:
                self._exit_code = EXIT_CUT_OFF
        except asyncio.CancelledError:
            await self._abort(run)
            raise
        finally:
            # (a side task's one cancel may be lost on Python 3.11: see qsim.engine.eventloop.cancel_and_wait)
            await asyncio.gather(run.pipeline.aclose(), cancel_and_wait(side), return_exceptions=True)
            for sig in signals:
                loop.remove_signal_handler(sig)
            await client.aclose()
            self._processed = run.pipeline.processed
            self._run = None
            run.finished.set()
        logger.info("worker %s stopped (exit code %s, %s jobs processed)", s.id, self._exit_code, self._processed)
        return self._exit_code

    async def wait_taking_work(self) -> None:
        """Wait until ``run()`` takes work: connected, and its first fetch answered (its scripts loaded), so
        a job added from then on is picked up within a round trip. Call it while ``run()`` runs, from a task
        of its own (a lifecycle hook's ``on_start`` runs before the worker connects: see
        :class:`~qsim.engine.hooks.ColdStart`).

        Raises:
            RuntimeError: the worker is not running, or its run ended before it took work.
        """
        made = self._run_made
        if made is None:
            raise RuntimeError("the worker is not running")
        await made.wait()
        run = self._run
        if run is None:
            raise RuntimeError("the worker stopped before it took work")
        taking = asyncio.ensure_future(run.pipeline.taking_work.wait())
        ended = asyncio.ensure_future(run.finished.wait())
        try:
            await asyncio.wait([taking, ended], return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait([taking, ended])
        if not run.pipeline.taking_work.is_set():
            raise RuntimeError("the worker stopped before it took work")

    async def close(self, timeout: float | None = None) -> int:
        """Stop fetching, wait up to ``timeout`` s (default ``shutdown_grace``) for
        active jobs, hand back the rest; returns the exit code once ``run()`` ended."""
        grace = self.settings.shutdown_grace if timeout is None else timeout
        if self._run is None and self._starting is not None:  # run() is still connecting: stop right after
            self._close_early = grace
            await self._starting.wait()
        run = self._run
        if run is None:
            return self._exit_code
        self._request_close(run, grace)
        await run.finished.wait()
        return self._exit_code

    # -- lifecycle ------------------------------------------------------------
    def _side_tasks(self, run: _Run) -> list[asyncio.Future[None]]:
        """Per queue: lock renewal of the jobs held, stalled-job recovery."""
        s, ex = self.settings, run.executor
        tasks: list[asyncio.Future[None]] = []
        for k in s.keys:
            held = ex.locked if len(s.keys) == 1 else _held_of(ex, k.queue)
            tasks += [
                asyncio.ensure_future(renew_locks(run.context, k, s.lock_ms, s.lock_duration / 2, held)),
                asyncio.ensure_future(recover_stalled(run.context, k, s.max_stalled, s.stalled_interval)),
            ]
        return tasks

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        if not self.settings.handle_signals:
            return []
        done: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                done.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                logger.debug("cannot install a handler for %s here", sig)
        return done

    def _on_signal(self, signum: int) -> None:
        run = self._run
        if run is None:
            return
        name = signal.Signals(signum).name
        if run.shutdown is None:
            logger.info("%s: stop fetching, draining %s running jobs for up to %s s", name, len(run.executor.running),
                        self.settings.shutdown_grace)
            self._request_close(run, self.settings.shutdown_grace)
        else:
            logger.warning("%s again: cancelling %s running jobs now", name, len(run.executor.running))
            run.force.set()
            run.executor.changed.set()

    def _request_close(self, run: _Run, grace: float) -> None:
        if run.shutdown is None:
            run.shutdown = asyncio.ensure_future(self._shutdown(run, grace))

    async def _shutdown(self, run: _Run, grace: float) -> None:
        """Stop fetching, hand the held jobs back, wait up to ``grace`` s for the running ones, cut off the rest;
        then let the pipeline end."""
        ex = run.executor
        ex.close()
        run.pipeline.interrupt()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while ex.running and not run.force.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            ex.changed.clear()
            try:
                async with asyncio.timeout(remaining):
                    await ex.changed.wait()
            except TimeoutError:
                break
        if ex.running:
            self._exit_code = EXIT_CUT_OFF
            waited = loop.time() - (deadline - grace)
            why = "on a second signal" if run.force.is_set() else "at the end of the shutdown grace"
            logger.warning("cutting off %s jobs still running after %.1f s (%s); handing them back", len(ex.running),
                           waited, why)
            await ex.cut_off(5.0)
        run.pipeline.stop()

    async def _abort(self, run: _Run) -> None:
        """run() itself was cancelled: hand back what runs and what is held, best effort, quickly."""
        ex = run.executor
        jobs = [(j, True) for j, _ in ex.running.values()] + [(h[0], False) for h in ex.held.values()]
        ex.held.clear()
        ex.cancel_all()
        if jobs:
            self._exit_code = EXIT_CUT_OFF
            maxlen = self.settings.events_maxlen
            try:
                async with asyncio.timeout(2.0):
                    await run_calls_async(run.client, run.context.scripts, [
                        release_call(k, maxlen, [(j.id, j.token, started) for j, started in sub])
                        for k, sub in by_queue(self.settings.keys, jobs, lambda it: it[0])])
            except _HAND_BACK_ERRORS as e:
                logger.warning("could not hand back %s jobs: %s", len(jobs), e)


def _held_of(ex: Executor, queue: str) -> Callable[[], list[Job]]:
    """The jobs of ``queue`` whose lock ``ex``'s worker holds."""
    return lambda: [j for j in ex.locked() if j.queue == queue]
