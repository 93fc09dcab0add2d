"""The worker's fetch/ack pipeline: one round trip per batch, several batches in flight.

Every pass of :meth:`Pipeline.run` builds a :class:`Batch`: the completions,
failures and hand-backs waiting in the outbox, a promotion of due delayed
jobs (at most every 50 ms while busy) and a fetch of up to "free slots"
jobs, and sends it in one pipeline (one round trip). While a batch is in
flight the next one gathers, so acknowledgements are batched by themselves.
Each part of a batch carries the function that reads its replies (an
:class:`~qsim.engine.scripts.Op`), so a batch's replies are read part by
part whatever parts it has. When there is nothing to send and no job can be
fetched, the pipeline blocks on the queues' marker lists (BLPOP) until
``add`` (or a retry, a promotion, a stalled-job recovery) pushes to one:
no sleep-polling (woken by a push, the first fetch goes alone, without the
promotion, and no second one follows until its reply: the pickup costs one
script call after the push; a push this worker cannot act on, its slots full
since it blocked, is pushed on for another worker). A BLPOP that times out with nothing pushed is
followed by an idle check, not a fetch: a promotion that also re-arms the marker of a queue with
jobs waiting (a wake-up taken by a worker that died before it fetched is given again, and the BLPOP
that follows wakes at once); when every queue with work waits for its rate limit it
waits exactly the delay the fetch returned. Redis ends a BLPOP's timeout on
its own clock tick (``hz``: 10 a second by default), up to 100 ms late, so a
block that ends at a deadline (a keyed rate window reopening, a delayed job
due) also sets a local timer that wakes the loop on time, while the BLPOP
runs out still listening for new jobs; a deadline learnt while an earlier
BLPOP still runs out sets the timer too (a keyed lane that reopens every few
ms is fetched from on time, not at the next wake-up).

Fetching ahead (docs/explanation/fetch-ahead.md): with ``prefetch="auto"``
(the default) a fetch may also ask for a few jobs beyond the free slots, so a
slot that frees starts its next job at once instead of a round trip later. It
asks for as many as would each wait in the worker no longer than about a round
trip (``AHEAD_HOLD``, 2 ms: the k-th waits about k x the handler's average run
time / concurrency), at most ``batch_size``; ``prefetch=N`` asks for N. Neither
fetches ahead while a queue served has a concurrency or rate limit (a job held
here would count against the limit, and its handler would start later than
the limiter counted it; the fetch reply says, and the jobs held when a limit
appears go back), nor while the executor is
``blocked`` (held jobs just went back because no slot freed within their hold
bound, :mod:`qsim.engine.executor`). Short jobs get the gain (no-op jobs and
10 ms I/O jobs, benchmarks/engine_throughput.py); a job of a second or more at
concurrency 10 is never fetched ahead by ``auto``. When a hold may last
``MARK_HELD`` (0.1 s) or more, the fetch marks the jobs beyond the free slots
held in Redis; when one starts, the queue's next completion call carries a
notice that clears the mark (a stalled check puts a job that never started
back without counting a stall); notices never make a batch of their own. The wait of a job fetched ahead is sent with its
result, and Redis moves the attempt's recorded start on by it, so waits and run
times in the records stay the handler's own. A higher-priority job added
meanwhile starts after the few held here (at most their hold bound later).

Several queues: one ``fetch`` script call chooses among them by ``policy``
(``priority`` / ``ordered`` / ``wrr``) and honours each queue's concurrency
limit, rate limit and aging (:mod:`qsim.engine.limiter`); the smooth-WRR
state lives in Redis (a hash per worker, updated by the same script, so
pipelined fetches share it).

Redis errors: a batch that could not be sent goes back to the outbox and is
sent again after a backoff (50 ms doubling up to 5 s); once the worker
stopped (:meth:`Pipeline.stop`), it gives up 10 s later, whether batches
failed or still wait for their replies (a frozen Redis): stalled-job
recovery puts their jobs back.
Each call of a batch gets its own reply: a call Redis refused for a passing
reason (``OOM`` under ``maxmemory-policy noeviction``, ``READONLY`` during a
failover, ``TRYAGAIN``) puts its results back in the outbox, to be sent again
after the same backoff, while the other calls' replies are used as usual (a
fetch that succeeded starts its jobs). Any other refusal is logged and its
results dropped: their jobs' locks expire and stalled-job recovery puts them
back (at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import redis

from qsim.engine.context import JobContext
from qsim.engine.eventloop import cancel_and_wait
from qsim.engine.events import Emitter
from qsim.engine.executor import MARK_HELD, Executor
from qsim.engine.failures import AttemptTimeout
from qsim.engine.job import Job
from qsim.engine.keys import QueueKeys
from qsim.engine.outbox import Ack, Failure, Outbox, Release
from qsim.engine.protocol import (
    complete_call,
    fail_call,
    fetch_multi_call,
    parse_fetch_status,
    promote_call,
    release_call,
)
from qsim.engine.scripts import REDIS_ERRORS, Call, Op, run_calls_async
from qsim.engine.settings import WorkerSettings

__all__ = ["Pipeline", "Batch", "by_queue"]

logger = logging.getLogger(__name__)

_PROMOTE_EVERY = 0.05
#: With ``prefetch="auto"``, jobs are fetched ahead only as many as would wait in the worker for a slot
#: no longer than this (seconds; about a round trip): the k-th about k * run time / concurrency.
AHEAD_HOLD = 0.002
_MAX_RECONNECT_DELAY = 5.0
_FINAL_FLUSH_TIMEOUT = 10.0
#: Refusals that pass by themselves: the refused results are sent again after a backoff.
_PASSING = (redis.exceptions.OutOfMemoryError, redis.exceptions.ReadOnlyError, redis.exceptions.TryAgainError,
            redis.exceptions.ClusterDownError)

T = TypeVar("T")


def by_queue(keys: Sequence[QueueKeys], items: Sequence[T],
             job: Callable[[T], Job]) -> list[tuple[QueueKeys, list[T]]]:
    """``items`` split by the queue of ``job(item)``, in the order of ``keys`` (the worker's queues)."""
    if not items:
        return []
    if len(keys) == 1:
        return [(keys[0], list(items))]
    by: dict[str, list[T]] = {}
    for it in items:
        by.setdefault(job(it).queue, []).append(it)
    return [(k, by[k.queue]) for k in keys if k.queue in by]


def _job_of(item: tuple[Job, *tuple[Any, ...]]) -> Job:
    """The job of an outbox entry (its first item)."""
    return item[0]


def _self(job: Job) -> Job:
    return job


class Batch:
    """The calls of one round trip, in parts that each read their own replies.

    ``acks``, ``fails``, ``releases`` and ``started`` are the outbox entries the
    batch carries (put back when it cannot be sent); ``fetching`` is how many
    jobs its fetch asks for.
    """

    __slots__ = ("parts", "acks", "fails", "releases", "started", "fetching", "probe")

    def __init__(self, acks: list[Ack], fails: list[Failure], releases: list[Release],
                 started: list[Job] | None = None) -> None:
        self.parts: list[tuple[Op[Any], Callable[[], None] | None]] = []
        self.acks, self.fails, self.releases = acks, fails, releases
        self.started = [] if started is None else started
        self.fetching = 0
        self.probe = False  # its fetch is the first after a wake-up (see Pipeline._probing)

    def add(self, calls: list[Call], on_replies: Callable[[list[Any]], Any],
            on_refused: Callable[[], None] | None = None) -> None:
        """Add ``calls``; ``on_replies`` gets their replies, in order, once the batch is back; ``on_refused``
        is called instead when Redis refused one of them for a passing reason (OOM, READONLY)."""
        self.parts.append((Op(calls, on_replies), on_refused))

    def calls(self) -> list[Call]:
        return [c for part, _ in self.parts for c in part.calls]

    def dispatch(self, replies: list[Any]) -> Exception | None:
        """Hand each part its replies; a part whose reader fails is logged, the others still read theirs.

        A part with a refused call does not read its replies: a passing refusal calls its ``on_refused``
        (the results go back to the outbox), another one is logged. Returns the first passing refusal.
        """
        i, passing = 0, None
        for part, on_refused in self.parts:
            n = len(part.calls)
            mine = replies[i:i + n]
            i += n
            error = next((r for r in mine if isinstance(r, Exception)), None)
            try:
                if error is None:
                    part.parse(mine)
                elif isinstance(error, _PASSING):
                    passing = passing or error
                    if on_refused is not None:
                        on_refused()
                else:
                    logger.error("Redis refused %s (%s); their jobs will be recovered as stalled",
                                 [c.script for c in part.calls], error)
            except Exception:  # noqa: BLE001 - a bug here must not silently stop the worker
                logger.exception("unexpected error reading the replies of %s", [c.script for c in part.calls])
        return passing

    @property
    def results(self) -> int:
        """How many results (completions, failures, hand-backs) the batch carries."""
        return len(self.acks) + len(self.fails) + len(self.releases)


class Pipeline:
    """Sends the outbox and fetches jobs for the executor, a batch per round trip.

    Args:
        settings: The worker's settings.
        context: Client and scripts (the worker's run context).
        executor: Starts the fetched jobs.
        outbox: The results to send.
        events: Outcome events (completed, failed, retrying, dead, lock_lost).
        processed: Initial value of :attr:`processed`.
    """

    def __init__(self, settings: WorkerSettings, context: JobContext, executor: Executor, outbox: Outbox,
                 events: Emitter, processed: int = 0) -> None:
        self.settings = settings
        self.client = context.client
        self.scripts = context.scripts
        self.executor = executor
        self.outbox = outbox
        self.events = events
        #: Jobs whose completion or failure Redis acknowledged (or refused).
        self.processed = processed
        #: Set when the results left could not be sent after the worker stopped.
        self.gave_up = False
        #: Set once Redis answered the first fetch (connected, scripts loaded): a job added from then on is
        #: picked up within a round trip (or by the BLPOP that follows an empty answer).
        self.taking_work = asyncio.Event()
        self._inflight = 0
        self._reserved = 0
        self._ticks: set[asyncio.Future[None]] = set()
        self._blpop: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None  # wakes the loop at a deadline (see _wake_at)
        self._maybe_ready = True
        self._next_promote = 0.0
        self._next_due = 0.0  # loop time the next delayed job is due (inf: none)
        self._fetch_seq = 0
        # Lock tokens are "<worker id>:<random>:<fetch>:<k>": the random part differs per run, so replicas or
        # restarts sharing a fixed worker_id never repeat a token (a stale completion is refused, rate-limit
        # window entries, keyed by token, never merge).
        self._token_base = f"{settings.id}:{secrets.token_hex(4)}"
        self._retry_at = 0.0
        self._delay = 0.05
        self._flush_deadline = float("inf")  # loop time the final flush gives up (set by stop())
        self._flush_timer: asyncio.TimerHandle | None = None
        self._rate_until = 0.0  # loop time a rate-limited queue may start a job again
        self._rate_held: set[int] = set()  # (0-based) queues held back by their rate limit until then
        self._limited = True  # a queue has a concurrency or rate limit (as the last fetch said): never fetch ahead
        # Redis' clock minus this loop's, at most (the least of a fetch's Redis time minus the loop time before it
        # was sent): a held job's lock is aged from its fetch's Redis time, never younger than it is
        self._clock_ahead = float("inf")
        # Woken by a push to a marker, the first fetch is a probe: usually one job was added. It goes alone, and
        # no second fetch goes out until its reply says whether more wait (either would sit on the pickup's path).
        self._woken = False
        self._probing = False
        # The BLPOP timed out with nothing pushed: the next pass is an idle check, a promotion that re-arms the
        # markers of queues with jobs waiting (a wake-up lost with a worker that died), without a fetch.
        self._idle_check = False

    # -- the loop ---------------------------------------------------------------
    async def run(self) -> None:
        """Send and fetch until :attr:`stopped` and everything is sent (or :attr:`gave_up`)."""
        loop = asyncio.get_running_loop()
        s, ex, out = self.settings, self.executor, self.outbox
        queues = len(s.keys)
        while True:
            slots = self._free()
            pending = bool(out.acks or out.fails or out.releases)
            if self.stopped and not pending and not self._inflight:
                return
            if self.gave_up:
                return
            now = loop.time()
            if now >= self._flush_deadline:
                logger.error("giving up flushing %s results to Redis after %.0f s (%s batches unanswered); "
                             "stalled-job recovery will put their jobs back", len(out), _FINAL_FLUSH_TIMEOUT,
                             self._inflight)
                self.gave_up = True
                return
            if now < self._retry_at:
                await asyncio.sleep(self._retry_at - now)
                continue
            # a probe after a push goes alone (the promotion follows its reply): the pickup's round trip is one call
            promote = slots > 0 and now >= self._next_promote and not self._woken
            idle_check = promote and self._idle_check and not self._maybe_ready
            fetch = slots > 0 and (self._maybe_ready or (promote and not idle_check)) and not self._probing
            if fetch and now < self._rate_until and len(self._rate_held) == queues:
                fetch = False  # every queue with work waits for its rate limit: block until it may start
            if self._inflight >= s.max_inflight or not (pending or fetch or idle_check):
                if slots > 0 and not self._inflight:
                    wait = min(s.block_timeout, self._next_due - now)
                    if now < self._rate_until:
                        wait = min(wait, self._rate_until - now)
                    if self._blpop is None:
                        self._blpop = asyncio.ensure_future(self._block(max(0.001, wait),
                                                                        deadline=wait < s.block_timeout))
                    elif wait < s.block_timeout:
                        self._wake_at(now + max(0.001, wait))  # the running BLPOP may end up to 100 ms late
                out.wake.clear()
                await out.wake.wait()
                continue
            batch = self._batch(now, min(slots, s.batch_size) if fetch else 0, promote, idle_check)
            self._inflight += 1
            tick = asyncio.ensure_future(self._send(batch))
            self._ticks.add(tick)
            tick.add_done_callback(self._ticks.discard)

    def _free(self) -> int:
        """How many jobs a fetch may ask for now: free slots and room to fetch ahead, less fetches in flight."""
        ex = self.executor
        return 0 if ex.closing else self.settings.concurrency + self.ahead() - ex.fetched - self._reserved

    def ahead(self) -> int:
        """How many jobs to fetch beyond the free slots now (see "Fetching ahead" in the module docstring)."""
        s = self.settings
        if self._limited or self.executor.blocked or s.prefetch == 0:
            return 0
        if s.prefetch != "auto":
            return int(s.prefetch)
        run_time = self.executor.run_time
        if run_time is None:
            return 0
        # the k-th job fetched ahead starts after about k * run_time / concurrency s in the worker
        return min(s.batch_size, int(AHEAD_HOLD * s.concurrency / max(run_time, 1e-9)))

    def _batch(self, now: float, n: int, promote: bool, rearm: bool = False) -> Batch:
        """The next batch: results and start notices from the outbox, then a promotion (``rearm``: an idle
        check's, see :meth:`_block`), then a fetch of ``n``."""
        s, out = self.settings, self.outbox
        keys, maxlen = s.keys, s.events_maxlen
        acks, fails, rels = out.take(s.batch_size)
        batch = Batch(acks, fails, rels)
        # start notices ride with their queue's completions (the held job took the slot one of them freed)
        notices = {k.queue: jobs for k, jobs in by_queue(keys, out.started, _self)} if out.started else {}
        for k, done in by_queue(keys, acks, _job_of):
            items = [(j.id, j.token, rv, j.held_us) for j, rv, _ in done]
            started = notices.pop(k.queue, [])
            batch.started += started
            batch.add([complete_call(k, maxlen, s.keep_count, s.keep_age_ms, items, [(j.id, j.token) for j in started])],
                      partial(self._completed, done), partial(out.put_back, done, [], [], started))
        if notices or out.started:
            out.started = [j for jobs in notices.values() for j in jobs]
        for k, failed in by_queue(keys, fails, _job_of):
            outcomes = [(j.id, j.token, e, tb, d, "timeout" if isinstance(x, AttemptTimeout) else "failed", j.held_us)
                        for j, e, tb, d, x in failed]
            batch.add([fail_call(k, maxlen, outcomes)], partial(self._failed, failed),
                      partial(out.put_back, [], failed, [], []))
        for k, back in by_queue(keys, rels, _job_of):
            batch.add([release_call(k, maxlen, [(j.id, j.token, started) for j, started in back])],
                      partial(self._released, k), partial(out.put_back, [], [], back, []))
        if promote:
            batch.add([promote_call(k, maxlen=maxlen, rearm=rearm) for k in keys], self._promoted)
            self._next_promote = now + _PROMOTE_EVERY
            self._idle_check = False
        probe, self._woken = self._woken, False
        if n:
            batch.probe = self._probing = probe
            self._fetch_seq += 1
            # the jobs beyond the free slots (not counting other fetches in flight) are held in the worker: marked
            # so in Redis when a hold may be long (short holds are treated as starts: a mark costs per job)
            ex = self.executor
            at_once = n if ex.hold_bound(1) < MARK_HELD else max(0, min(n, s.concurrency - ex.fetched - self._reserved))
            batch.add([fetch_multi_call(keys, n, s.lock_ms, s.id, f"{self._token_base}:{self._fetch_seq}", s.policy,
                                        s.weight_list, at_once)], partial(self._fetched, n, at_once, now))
            batch.fetching = n
            self._reserved += n
        return batch

    async def _send(self, batch: Batch) -> None:
        """Send one batch (one round trip) and hand each part its replies."""
        loop = asyncio.get_running_loop()
        try:
            try:
                replies = await run_calls_async(self.client, self.scripts, batch.calls(), errors_in_replies=True)
            except REDIS_ERRORS as e:
                self.outbox.put_back(batch.acks, batch.fails, batch.releases, batch.started)
                logger.warning("Redis error in worker %s: %s; retrying in %.2f s", self.settings.id, e, self._delay)
                self._retry_at = loop.time() + self._delay
                self._delay = min(self._delay * 2, _MAX_RECONNECT_DELAY)
                return
            refused = batch.dispatch(replies)
            if refused is not None:
                logger.warning("Redis refused writes of worker %s: %s; sending them again in %.2f s",
                               self.settings.id, refused, self._delay)
                self._retry_at = loop.time() + self._delay
                self._delay = min(self._delay * 2, _MAX_RECONNECT_DELAY)
                return
            if self._delay > 0.05:
                logger.info("worker %s reaches Redis again", self.settings.id)
            self._delay = 0.05
        except Exception:  # noqa: BLE001 - a bug here must not silently stop the worker
            logger.exception("worker %s: unexpected error handling a batch", self.settings.id)
        finally:
            self._reserved -= batch.fetching
            if batch.probe:
                self._probing = False
            self._inflight -= 1
            self.outbox.wake.set()

    async def _block(self, timeout: float, *, deadline: bool = False) -> None:
        """Wait for a push to the markers of the queues not held back by their rate limit, at most
        ``timeout`` s; when that is a ``deadline``, the loop is woken on time (see the module docstring)."""
        loop = asyncio.get_running_loop()
        held = self._rate_held if loop.time() < self._rate_until else set()
        markers = [k.marker for i, k in enumerate(self.settings.keys) if i not in held]
        if deadline and markers:
            self._wake_at(loop.time() + timeout)
        pushed = timed_out = False
        try:
            if markers:
                got = await self.client.blpop(markers, timeout=round(timeout, 3) or 0.001)
                pushed = got is not None
                timed_out = not pushed and not deadline
                if pushed and self._free() <= 0:
                    # a wake-up this worker cannot act on (its slots filled while it waited, or its held jobs
                    # just went back): pass it on, or the worker that could take the jobs sleeps on
                    await self.client.rpush(got[0], "1")
            else:  # every queue waits for its rate limit: nothing to block on until then
                await asyncio.sleep(timeout)
        except asyncio.CancelledError:
            raise
        except REDIS_ERRORS as e:
            logger.debug("BLPOP failed: %s", e)
            await asyncio.sleep(0.1)
        finally:
            self._blpop = None
        self._woken = pushed
        if timed_out:
            # nothing was pushed for a whole block_timeout: promote and re-arm the markers of queues with jobs
            # waiting (the BLPOP then wakes at once), but do not fetch from queues that are most likely empty
            self._idle_check = True
            self._next_promote = 0.0
            self.outbox.wake.set()
        else:
            self._wake_to_fetch()

    def _wake_at(self, at: float) -> None:
        """Have the loop promote and fetch at loop time ``at`` (or earlier, if a timer is set for earlier)."""
        t = self._timer
        if t is not None and t.when() <= at:
            return
        if t is not None:
            t.cancel()
        self._timer = asyncio.get_running_loop().call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._wake_to_fetch()

    def _wake_to_fetch(self) -> None:
        """Have the loop promote and fetch now."""
        self._maybe_ready = True
        self._next_promote = 0.0
        self.outbox.wake.set()

    # -- replies ------------------------------------------------------------------
    def _completed(self, acks: list[Ack], replies: list[Any]) -> None:
        events = self.events
        emit = events.callbacks.get("completed")
        self.processed += len(acks)
        for (job, _, result), code in zip(acks, replies[0]):
            if code == 1:
                if emit:
                    events.emit("completed", job, result)
            elif code < 0:
                self._lost(job, "completion", code)

    def _failed(self, fails: list[Failure], replies: list[Any]) -> None:
        events = self.events
        self.processed += len(fails)
        for (job, err, _, _, exc), code in zip(fails, replies[0]):
            if code > 0:
                events.emit("failed", job, exc)
                if code == 3:
                    logger.error("job %s (%s) moved to the dead-letter queue: %s", job.id, job.name, err)
                    events.emit("dead", job, exc)
                else:
                    events.emit("retrying", job, exc)
            elif code < 0:
                self._lost(job, "failure", code)

    def _released(self, k: QueueKeys, replies: list[Any]) -> None:
        logger.info("handed %s cut-off jobs back to queue %s", replies[0], k.queue)

    def _promoted(self, replies: list[Any]) -> None:
        due = [x for x in map(int, replies) if x >= 0]  # ms until each queue's next delayed job (-1: none)
        self._next_due = asyncio.get_running_loop().time() + min(due) / 1000.0 if due else float("inf")
        self._next_promote = min(self._next_promote, self._next_due)

    def _fetched(self, n: int, at_once: int, sent: float, replies: list[Any]) -> None:
        got, wait_ms, held, self._limited, at = parse_fetch_status(replies[0])
        self.taking_work.set()
        self._clock_ahead = min(self._clock_ahead, at - sent)
        self._maybe_ready = len(got) >= n
        if wait_ms >= 0:
            self._rate_until = asyncio.get_running_loop().time() + wait_ms / 1000.0
            self._rate_held = {h - 1 for h in held}
        else:
            self._rate_until, self._rate_held = 0.0, set()
        if got and self.executor.closing:
            logger.info("worker %s is stopping: handing %s just-fetched jobs back", self.settings.id, len(got))
            self.executor.hand_back(got)
        elif got:
            self.executor.start(got, at_once, locked_at=at - self._clock_ahead)
        if self._limited and self.executor.held:
            # a limit was set since these jobs were fetched: a held job would start later than the limiter counted
            logger.info("worker %s: a queue has a limit now: handing %s held jobs back", self.settings.id,
                        self.executor.hand_back_held())

    def _lost(self, job: Job, what: str, code: int = -1) -> None:
        job.lock_lost = True
        if code == -3:
            logger.error("job %s: %s refused, its key holds another type than a hash: moved to the DLQ "
                         "(and the queue's corrupt set)", job.id, what)
        else:
            logger.warning("job %s: %s refused, this worker no longer holds its lock (it stalled or was "
                           "recovered elsewhere)", job.id, what)
        self.events.emit("lock_lost", job)

    # -- stopping -------------------------------------------------------------------
    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called: send what is left, then return."""
        return self._flush_deadline < float("inf")

    def stop(self) -> None:
        """The worker stopped: send what is left, then end :meth:`run`; give up ``_FINAL_FLUSH_TIMEOUT`` s
        from now if that is not done by then (Redis refuses or does not answer)."""
        loop = asyncio.get_running_loop()
        self._flush_deadline = loop.time() + _FINAL_FLUSH_TIMEOUT
        self._flush_timer = loop.call_at(self._flush_deadline, self.outbox.wake.set)
        self.outbox.wake.set()

    def interrupt(self) -> None:
        """Stop waiting for work (the worker is stopping): cancel the BLPOP, wake the loop."""
        if self._blpop is not None:
            self._blpop.cancel()
        self.outbox.wake.set()

    async def aclose(self) -> None:
        """Cancel what is still in flight (batches, the BLPOP) and wait for it to end."""
        for timer in (self._timer, self._flush_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._flush_timer = None
        await cancel_and_wait([*self._ticks, *([self._blpop] if self._blpop is not None else [])])
