"""The asyncio worker: fetch in batches, run handlers, acknowledge in batches.

One loop task does all of the worker's Redis writes for jobs: every pass it
sends, in one pipeline (one round trip), the completions, failures and
hand-backs gathered since the last pass, a promotion of due delayed jobs
(at most every 50 ms while busy) and a fetch of up to "free slots" jobs.
While one pass is in flight the next batch gathers, so acknowledgements are
batched by themselves. When the queue is empty the worker blocks on the
queue's marker list (BLPOP) until ``add`` (or a retry, a promotion, a
stalled-job recovery) pushes to it: no sleep-polling.

Several queues: one ``fetch`` script call chooses among them by ``policy``
(``priority`` / ``ordered`` / ``wrr``) and honours each queue's concurrency
limit, rate limit and aging (:mod:`qsim.engine.limiter`); the smooth-WRR
state lives in Redis (a hash per worker, updated by the same script, so
pipelined fetches share it). Idle, the worker BLPOPs on all its queues'
markers at once; when every queue with work is held back by its rate limit
it waits exactly the delay the fetch returned.

Two side tasks: one renews the locks of all active jobs in one script call
every ``lock_duration / 2`` seconds; one recovers stalled jobs every
``stalled_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis
import redis.asyncio

from qsim.engine.backoff import Backoff
from qsim.engine.connection import connect_async, is_cluster_url, display_url
from qsim.engine.events import Emitter
from qsim.engine.job import Job
from qsim.engine.keys import DEFAULT_PREFIX, QueueKeys
from qsim.engine.failures import AttemptTimeout, corrupt_fields, describe
from qsim.engine.maintenance import check_eviction_policy, recover_stalled, renew_locks
from qsim.engine.payload import (
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_REDACT,
    encode_payload,
    normalize_fields,
    redact,
    scrub_text,
)
from qsim.engine.protocol import (
    POLICIES,
    Fetched,
    complete_call,
    fail_call,
    fetch_multi_call,
    parse_fetch_status,
    progress_call,
    promote_call,
    release_call,
)
from qsim.engine.queue import DEFAULT_EVENTS_MAXLEN, DEFAULT_KEEP_COMPLETED
from qsim.engine.scripts import CONNECTION_ERRORS, Call, ScriptSet, run_calls_async
from qsim.errors import LockLost, PayloadError, RedisUnavailable, UnrecoverableError, WaitingForChildren

__all__ = ["Worker", "Handler", "EXIT_DRAINED", "EXIT_CUT_OFF"]

logger = logging.getLogger(__name__)

Handler = Callable[[Job], Awaitable[Any]]

#: ``run()`` / ``close()`` result when every active job finished.
EXIT_DRAINED = 0
#: ``run()`` / ``close()`` result when jobs were cut off at shutdown and handed back.
EXIT_CUT_OFF = 3

_PROMOTE_EVERY = 0.05
_MAX_RECONNECT_DELAY = 5.0
_FINAL_FLUSH_TIMEOUT = 10.0


class Worker:
    """Runs ``handler`` on the jobs of a queue, ``concurrency`` at a time.

    Args:
        queues: A queue name, or a list of names served together.
        policy: How a fetch chooses among several queues: ``"priority"``
            (lowest job priority across the queues, FIFO within a level),
            ``"ordered"`` (first listed queue with a job first) or ``"wrr"``
            (smooth weighted round-robin over the queues with a startable job).
        weights: ``{queue: int >= 1}`` for ``wrr`` (default 1 each).
        group: Hash tag the queues share (the same ``group=`` as on their
            :class:`~qsim.engine.queue.Queue`); needed on Redis Cluster
            when serving several queues.
        handler: ``async def handler(job) -> result``; the result must be JSON.
        redis: A ``redis://`` URL, or ``redis+cluster://`` for Redis Cluster (the
            worker makes its own asyncio client).
        concurrency: Jobs run at the same time by this process.
        lock_duration: Seconds a job's lock lasts; renewed every half of it.
        stalled_interval: Seconds between checks for jobs whose lock expired.
        max_stalled: Stalls a job may have before it goes to the DLQ.
        shutdown_grace: Seconds ``close()`` / SIGTERM waits for active jobs.
        prefix: Key prefix.
        redact: Sensitive field names hidden in logs, events and errors.
        max_payload: Largest return value in bytes.
        keep_completed: Completed jobs kept (None: all) unless the queue's
            ``set_retention`` says otherwise.
        keep_completed_for: Seconds completed jobs are kept (None: no limit).
        block_timeout: Longest single BLPOP wait in seconds.
        batch_size: At most this many fetches and as many acknowledgements
            per round trip; small batches, several in flight, keep jobs from
            moving in lock-step (tuned with benchmarks/engine_throughput.py).
        max_inflight: Batches (round trips) in flight at once.
        prefetch: Jobs fetched and locked beyond ``concurrency``; they wait in
            this process (locks renewed with the running ones) so a slot that
            frees starts its next job at once instead of one round trip later.
            Their "started" timestamp is the fetch; at shutdown the ones not
            started go back unstarted (the attempt does not count). 0 (the
            default) fetches only for free slots. Lifts short I/O-bound jobs
            near the event loop's own limit (benchmarks/engine_throughput.py).
        handle_signals: Install SIGTERM/SIGINT handlers while ``run()`` runs.
        worker_id: Name of this worker in job records (default host:pid:random).

    ``run()`` returns :data:`EXIT_DRAINED` (0) when it stopped with every
    active job finished, :data:`EXIT_CUT_OFF` (3) when some were cancelled
    at the end of the grace period and handed back to the queue.
    """

    def __init__(
        self,
        queues: str | Sequence[str],
        handler: Handler,
        *,
        policy: str = "priority",
        weights: dict[str, int] | None = None,
        group: str | None = None,
        redis: str = "redis://127.0.0.1:6379/0",  # noqa: F811
        concurrency: int = 10,
        lock_duration: float = 30.0,
        stalled_interval: float = 30.0,
        max_stalled: int = 1,
        shutdown_grace: float = 30.0,
        prefix: str = DEFAULT_PREFIX,
        redact: Sequence[str] = DEFAULT_REDACT,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
        keep_completed: int | None = DEFAULT_KEEP_COMPLETED,
        keep_completed_for: float | None = None,
        block_timeout: float = 5.0,
        batch_size: int = 8,
        max_inflight: int = 2,
        prefetch: int = 0,
        handle_signals: bool = True,
        worker_id: str | None = None,
    ) -> None:
        names = [queues] if isinstance(queues, str) else list(queues)
        if not names:
            raise ValueError(f"queues must name at least one queue, got {queues!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"queues must not repeat a name, got {names!r}")
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        weights = dict(weights or {})
        for q, w in weights.items():
            if q not in names:
                raise ValueError(f"weights name a queue this worker does not serve: {q!r} (queues: {names!r})")
            if isinstance(w, bool) or not isinstance(w, int) or w < 1:
                raise ValueError(f"weight of queue {q!r} must be an int >= 1, got {w!r}")
        if not callable(handler):
            raise ValueError(f"handler must be an async function, got {handler!r}")
        if not isinstance(redis, str):
            raise ValueError(f"redis must be a redis:// URL, got {redis!r}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
        for what, v in (("lock_duration", lock_duration), ("stalled_interval", stalled_interval),
                        ("block_timeout", block_timeout)):
            if not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{what} must be > 0 seconds, got {v!r}")
        if not isinstance(shutdown_grace, (int, float)) or not shutdown_grace >= 0:
            raise ValueError(f"shutdown_grace must be >= 0 seconds, got {shutdown_grace!r}")
        if isinstance(max_stalled, bool) or not isinstance(max_stalled, int) or max_stalled < 0:
            raise ValueError(f"max_stalled must be an int >= 0, got {max_stalled!r}")
        for what, n in (("batch_size", batch_size), ("max_inflight", max_inflight)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"{what} must be an int >= 1, got {n!r}")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"prefetch must be an int >= 0, got {prefetch!r}")
        if keep_completed is not None and (not isinstance(keep_completed, int) or keep_completed < 0):
            raise ValueError(f"keep_completed must be an int >= 0 or None, got {keep_completed!r}")
        if keep_completed_for is not None and not keep_completed_for >= 0:
            raise ValueError(f"keep_completed_for must be >= 0 seconds or None, got {keep_completed_for!r}")
        self.queue = names[0]
        self.queues = names
        self.policy = policy
        self.weights = [weights.get(q, 1) for q in names]
        self.all_keys = [QueueKeys(q, prefix, group) for q in names]
        self.keys = self.all_keys[0]
        self._keys_of = dict(zip(names, self.all_keys))
        if len(names) > 1 and group is None and isinstance(redis, str) and is_cluster_url(redis):
            raise ValueError(f"serving several queues on Redis Cluster needs a shared group= (hash tag), got "
                             f"queues {names!r} without one")
        self.handler = handler
        self.url = redis
        self.concurrency = concurrency
        self.lock_duration = float(lock_duration)
        self.stalled_interval = float(stalled_interval)
        self.max_stalled = max_stalled
        self.shutdown_grace = float(shutdown_grace)
        self.redact_fields = normalize_fields(redact)
        self.max_payload = max_payload
        self.events_maxlen = events_maxlen
        self.keep_count = -1 if keep_completed is None else keep_completed
        self.keep_age_ms = -1 if keep_completed_for is None else int(keep_completed_for * 1000)
        self.block_timeout = float(block_timeout)
        self.batch_size = batch_size
        self.max_inflight = max_inflight
        self.prefetch = prefetch
        self.handle_signals = handle_signals
        wid = worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.id = wid.replace(",", "_").replace(";", "_")
        #: State the flow helpers (qsim.engine.flow) keep per worker, e.g. the queues' rate-limit keys.
        self.flow_state: dict[str, Any] = {}
        self._emitter = Emitter()
        self._rng = random.Random()
        self._lock_ms = int(self.lock_duration * 1000)
        self._backoffs: dict[str, Backoff | None] = {"": None}
        self._running = False
        self._exit_code = EXIT_DRAINED
        #: jobs run so far (completed or failed acknowledgements sent)
        self.processed = 0

    # -- public -------------------------------------------------------------
    def on(self, event: str, callback: Callable[..., Any]) -> None:
        """Call ``callback`` on ``event`` (see :data:`qsim.engine.events.EVENTS`)."""
        self._emitter.on(event, callback)

    @property
    def active(self) -> int:
        """Jobs running right now."""
        return len(self._active) if self._running else 0

    async def run(self) -> int:
        """Work until ``close()`` or SIGTERM/SIGINT; returns the exit code.

        Raises:
            RedisUnavailable: Redis cannot be reached at start.
        """
        if self._running:
            raise RuntimeError("this worker is already running")
        self._setup()
        try:
            await self.client.ping()
        except (*CONNECTION_ERRORS, redis.exceptions.RedisError) as e:
            await self.client.aclose()
            raise RedisUnavailable(f"cannot reach Redis at {display_url(self.url)}: {e}") from e
        await check_eviction_policy(self.client, self.url)
        self._running = True
        loop = asyncio.get_running_loop()
        signals = self._install_signals(loop)
        side = []
        for k in self.all_keys:
            held = self._held if len(self.all_keys) == 1 else self._held_of(k.queue)
            side += [
                asyncio.ensure_future(renew_locks(self.client, self.scripts, k, self._lock_ms,
                                                  self.lock_duration / 2, held, self.events_maxlen)),
                asyncio.ensure_future(recover_stalled(self.client, self.scripts, k, self.events_maxlen,
                                                      self.max_stalled, self.stalled_interval,
                                                      lambda jid: self._emitter.emit("stalled", jid))),
            ]
        logger.info("worker %s started on queue %s (concurrency %s)", self.id, ", ".join(self.queues),
                    self.concurrency)
        try:
            await self._loop()
        except asyncio.CancelledError:
            await self._abort()
            raise
        finally:
            for t in [*side, *self._ticks]:
                t.cancel()
            if self._blpop is not None:
                self._blpop.cancel()
            rest = [*side, *self._ticks, *([self._blpop] if self._blpop else [])]
            await asyncio.gather(*rest, return_exceptions=True)
            for s in signals:
                loop.remove_signal_handler(s)
            await self.client.aclose()
            self._running = False
            self._finished.set()
        logger.info("worker %s stopped (exit code %s, %s jobs processed)", self.id, self._exit_code, self.processed)
        return self._exit_code

    async def close(self, timeout: float | None = None) -> int:
        """Stop fetching, wait up to ``timeout`` s (default ``shutdown_grace``) for
        active jobs, hand back the rest; returns the exit code once ``run()`` ended."""
        if not self._running:
            return self._exit_code
        self._request_close(self.shutdown_grace if timeout is None else timeout)
        await self._finished.wait()
        return self._exit_code

    # -- setup ----------------------------------------------------------------
    def _setup(self) -> None:
        self.client = connect_async(self.url, socket_connect_timeout=5.0, socket_keepalive=True)
        self.scripts = ScriptSet(self.client)
        self._active: dict[str, tuple[Job, asyncio.Task[None]]] = {}
        self._acks: list[tuple[Job, str, Any]] = []
        self._fails: list[tuple[Job, str, str, int, BaseException]] = []
        self._releases: list[tuple[Job, bool]] = []  # (job, its handler was started)
        self._cutting: set[asyncio.Future[None]] = set()  # handler tasks this worker cancels (shutdown cut-off)
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._force = asyncio.Event()
        self._finished = asyncio.Event()
        self._closing = False
        self._stopped = False
        self._shutdown_task: asyncio.Task[None] | None = None
        self._blpop: asyncio.Future[Any] | None = None
        self._maybe_ready = True
        self._next_promote = 0.0
        self._next_due = 0.0  # loop time the next delayed job is due (inf: none)
        self._fetch_seq = 0
        # Lock tokens are "<worker id>:<random>:<fetch>:<k>": the random part differs per run, so replicas or
        # restarts sharing a fixed worker_id never repeat a token (a stale completion is refused, rate-limit
        # window entries, keyed by token, never merge).
        self._token_base = f"{self.id}:{secrets.token_hex(4)}"
        self._exit_code = EXIT_DRAINED
        self._inflight = 0
        self._reserved = 0
        self._slots = asyncio.Semaphore(self.concurrency) if self.prefetch else None  # handlers running at once
        self._ticks: set[asyncio.Future[None]] = set()
        self._retry_at = 0.0
        self._delay = 0.05
        self._flush_deadline: float | None = None
        self._gave_up = False
        self._rate_until = 0.0  # loop time a rate-limited queue may start a job again
        self._rate_held: set[int] = set()  # (0-based) queues held back by their rate limit until then

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        if not self.handle_signals:
            return []
        done = []
        for s in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(s, self._on_signal, s)
                done.append(s)
            except (NotImplementedError, RuntimeError, ValueError):
                logger.debug("cannot install a handler for %s here", s)
        return done

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._shutdown_task is None:
            logger.info("%s: stop fetching, draining %s active jobs for up to %s s", name, len(self._active),
                        self.shutdown_grace)
            self._request_close(self.shutdown_grace)
        else:
            logger.warning("%s again: cancelling %s active jobs now", name, len(self._active))
            self._force.set()
            self._changed.set()

    def _request_close(self, grace: float) -> None:
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.ensure_future(self._shutdown(grace))

    # -- the loop -------------------------------------------------------------
    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            slots = 0 if self._closing else self.concurrency + self.prefetch - len(self._active) - self._reserved
            pending = bool(self._acks or self._fails or self._releases)
            if self._stopped and not pending and not self._inflight:
                return
            if self._gave_up:
                return
            now = loop.time()
            if now < self._retry_at:
                await asyncio.sleep(self._retry_at - now)
                continue
            promote = slots > 0 and now >= self._next_promote
            fetch = slots > 0 and (self._maybe_ready or promote)
            if fetch and now < self._rate_until and len(self._rate_held) == len(self.all_keys):
                fetch = False  # every queue with work waits for its rate limit: block until it may start
            if self._inflight >= self.max_inflight or not (pending or fetch):
                if slots > 0 and self._blpop is None and not self._inflight:
                    wait = min(self.block_timeout, self._next_due - now)
                    if now < self._rate_until:
                        wait = min(wait, self._rate_until - now)
                    self._start_blpop(max(0.001, wait))
                self._wake.clear()
                await self._wake.wait()
                continue
            acks, self._acks = self._acks[:self.batch_size], self._acks[self.batch_size:]
            fails, self._fails = self._fails[:self.batch_size], self._fails[self.batch_size:]
            rels, self._releases = self._releases, []
            calls: list[Call] = []
            for k, sub in self._groups(acks):
                calls.append(complete_call(k, self.events_maxlen, self.keep_count, self.keep_age_ms,
                                           [(j.id, j.token, rv) for j, rv, _ in sub]))
            for k, sub in self._groups(fails):
                calls.append(fail_call(k, self.events_maxlen, [
                    (j.id, j.token, e, tb, d, "timeout" if isinstance(x, AttemptTimeout) else "failed")
                    for j, e, tb, d, x in sub]))
            for k, sub in self._groups(rels):
                calls.append(release_call(k, self.events_maxlen, [(j.id, j.token, started) for j, started in sub]))
            if promote:
                calls += [promote_call(k, maxlen=self.events_maxlen) for k in self.all_keys]
                self._next_promote = now + _PROMOTE_EVERY
            n = min(slots, self.batch_size) if fetch else 0
            if n:
                self._fetch_seq += 1
                calls.append(fetch_multi_call(self.all_keys, n, self._lock_ms, self.id,
                                              f"{self._token_base}:{self._fetch_seq}", self.policy, self.weights))
                self._reserved += n
            self._inflight += 1
            tick = asyncio.ensure_future(self._tick(calls, acks, fails, rels, promote, n))
            self._ticks.add(tick)
            tick.add_done_callback(self._ticks.discard)

    async def _tick(self, calls: list[Call], acks: list[Any], fails: list[Any], rels: list[tuple[Job, bool]], promote: bool,
                    n: int) -> None:
        """Send one batch (one round trip) and act on the replies."""
        loop = asyncio.get_running_loop()
        try:
            try:
                replies = await run_calls_async(self.client, self.scripts, calls)
            except redis.exceptions.ResponseError as e:
                # Not a connection problem: resending the same batch would fail again. Drop it; the
                # jobs' locks expire and stalled-job recovery puts them back (at-least-once).
                logger.error("Redis refused a batch of %s results (%s); their jobs will be recovered as stalled",
                             len(acks) + len(fails) + len(rels), e)
                return
            except (*CONNECTION_ERRORS, redis.exceptions.RedisError) as e:
                self._acks[:0], self._fails[:0], self._releases[:0] = acks, fails, rels
                if self._stopped:
                    self._flush_deadline = self._flush_deadline or loop.time() + _FINAL_FLUSH_TIMEOUT
                    if loop.time() > self._flush_deadline:
                        logger.error("giving up flushing %s results to Redis: %s (stalled-job recovery will put "
                                     "their jobs back)", len(self._acks) + len(self._fails) + len(self._releases), e)
                        self._gave_up = True
                        self._exit_code = EXIT_CUT_OFF
                        return
                logger.warning("Redis error in worker %s: %s; retrying in %.2f s", self.id, e, self._delay)
                self._retry_at = loop.time() + self._delay
                self._delay = min(self._delay * 2, _MAX_RECONNECT_DELAY)
                return
            if self._delay > 0.05:
                logger.info("worker %s reconnected to Redis", self.id)
            self._delay = 0.05
            self._after_tick(replies, acks, fails, rels, promote, n)
        except Exception:  # noqa: BLE001 - a bug here must not silently stop the worker
            logger.exception("worker %s: unexpected error handling a batch", self.id)
        finally:
            self._reserved -= n
            self._inflight -= 1
            self._wake.set()

    def _after_tick(self, replies: list[Any], acks: list[Any], fails: list[Any], rels: list[tuple[Job, bool]], promote: bool,
                    n: int) -> None:
        """Act on the replies of one batch, in the order the calls were made."""
        loop = asyncio.get_running_loop()
        i = 0
        for _, sub in self._groups(acks):
            self._after_complete(sub, replies[i])
            i += 1
        for _, sub in self._groups(fails):
            self._after_fail(sub, replies[i])
            i += 1
        for k, _ in self._groups(rels):
            logger.info("handed %s cut-off jobs back to queue %s", replies[i], k.queue)
            i += 1
        if promote:
            lefts = [int(r) for r in replies[i:i + len(self.all_keys)]]
            i += len(self.all_keys)
            due = [x for x in lefts if x >= 0]
            self._next_due = loop.time() + min(due) / 1000.0 if due else float("inf")
            self._next_promote = min(self._next_promote, self._next_due)
        if n:
            got, wait_ms, held = parse_fetch_status(replies[i])
            self._maybe_ready = len(got) >= n
            if wait_ms >= 0:
                self._rate_until = loop.time() + wait_ms / 1000.0
                self._rate_held = {h - 1 for h in held}
            else:
                self._rate_until, self._rate_held = 0.0, set()
            if got and self._closing:
                self._hand_back(got)
            elif got:
                self._start(got)

    def _groups(self, items: Sequence[Any]) -> list[tuple[QueueKeys, list[Any]]]:
        """``items`` (jobs, or tuples starting with a job) split by queue, in the worker's queue order."""
        if not items:
            return []
        if len(self.all_keys) == 1:
            return [(self.keys, list(items))]
        by: dict[str, list[Any]] = {}
        for it in items:
            by.setdefault((it if isinstance(it, Job) else it[0]).queue, []).append(it)
        return [(k, by[k.queue]) for k in self.all_keys if k.queue in by]

    def _start_blpop(self, timeout: float) -> None:
        self._blpop = asyncio.ensure_future(self._block(timeout))

    async def _block(self, timeout: float) -> None:
        held = self._rate_held if asyncio.get_running_loop().time() < self._rate_until else set()
        markers = [k.marker for i, k in enumerate(self.all_keys) if i not in held]
        try:
            if markers:
                await self.client.blpop(markers, timeout=round(timeout, 3) or 0.001)
            else:  # every queue waits for its rate limit: nothing to block on until then
                await asyncio.sleep(timeout)
        except asyncio.CancelledError:
            raise
        except (*CONNECTION_ERRORS, redis.exceptions.RedisError) as e:
            logger.debug("BLPOP failed: %s", e)
            await asyncio.sleep(0.1)
        finally:
            self._blpop = None
        self._maybe_ready = True
        self._next_promote = 0.0
        self._wake.set()

    def _hand_back(self, got: list[Fetched]) -> None:
        """Jobs whose fetch was in flight when the stop came: back to the queue unstarted (no attempt counted)."""
        logger.info("worker %s is stopping: handing %s just-fetched jobs back", self.id, len(got))
        for f in got:
            queue = self.queues[int(f.queue_index) - 1]
            self._releases.append((Job(f.id, f.name, None, 1, queue, 1, 0.0, None, f.token, self), False))

    def _start(self, got: list[Fetched]) -> None:
        for f in got:
            try:
                job = self._job(f)
            except (ValueError, KeyError, TypeError, RecursionError, PayloadError) as e:
                queue = self.queues[int(f.queue_index) - 1]
                if not isinstance(e, PayloadError):
                    e = PayloadError(f"job hash is corrupt: {corrupt_fields(f) or e}")
                logger.error("job %s of queue %s is corrupt (%s): moving it to the DLQ", f.id, queue, e)
                job = Job(f.id, f.name, None, 1, queue, 1, 0.0, None, f.token, self)
                err = e
                self._fails.append((job, f"PayloadError: {err}", "", -1, err))
                continue
            self._active[f.id] = (job, asyncio.ensure_future(self._run_job(job)))

    def _job(self, f: Fetched) -> Job:
        """Build the handler's Job from a fetched hash; raises on corrupt fields."""
        if not f.name:
            raise PayloadError("job hash is corrupt: it has no name")
        bo = self._backoffs.get(f.backoff)
        if bo is None and f.backoff:
            bo = self._backoffs[f.backoff] = Backoff.from_json(f.backoff)
        try:
            data = json.loads(f.data)
        except (ValueError, RecursionError) as e:
            raise PayloadError(f"job data is not valid JSON: {e}") from e
        queue = self.queues[int(f.queue_index) - 1]
        job = Job(f.id, f.name, data, int(f.attempts_made) + 1, queue, int(f.max_attempts),
                  float(f.timeout or 0), bo, f.token, self)
        if f.wait:
            job.wait = float(f.wait)
        return job

    async def _run_job(self, job: Job) -> None:
        slot = False
        try:
            if self._slots is not None:  # fetched ahead: wait for a free slot
                await self._slots.acquire()
                slot = True
                if self._closing:  # never started: hand it back, the attempt does not count
                    self._releases.append((job, False))
                    return
            if job.timeout > 0:
                cm = asyncio.timeout(job.timeout)
                try:
                    async with cm:
                        result = await self.handler(job)
                except TimeoutError as e:
                    if cm.expired():
                        raise AttemptTimeout(f"attempt timed out after {job.timeout:g} s") from e
                    raise
            else:
                result = await self.handler(job)
            rv = "null" if result is None else encode_payload(
                result, what=f"job {job.id} return value", max_bytes=self.max_payload, warn_bytes=self.max_payload)
            self._acks.append((job, rv, result))
        except asyncio.CancelledError as e:
            if asyncio.current_task() in self._cutting:
                self._releases.append((job, True))  # cut off at shutdown: handed back, the attempt does not count
            else:
                self._failed(job, e)  # the handler's own CancelledError: a failed attempt like any error
        except WaitingForChildren:
            pass  # the park script took the job out of active: nothing to acknowledge
        except Exception as e:  # noqa: BLE001 - a handler may raise anything
            self._failed(job, e)
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt, SystemExit, GeneratorExit from a handler
            # A handler's sys.exit() or KeyboardInterrupt fails its attempt like any error (retry, then the
            # DLQ); it does not stop the worker: only signals (SIGTERM/SIGINT) and close() do that.
            self._failed(job, e)
        finally:
            if slot:
                self._slots.release()  # type: ignore[union-attr]
            if self._active.get(job.id, (None,))[0] is job:  # not a newer attempt of the same id
                del self._active[job.id]
            self._wake.set()
            self._changed.set()

    def _failed(self, job: Job, e: BaseException) -> None:
        """Queue the failure of ``job``'s attempt; never raises (a failure not sent would leave the job to stall)."""
        err, tb, delay = f"{type(e).__name__}: <the error could not be recorded>", "", 0
        try:
            text, trace = describe(e)
            err = scrub_text(text, job.data, self.redact_fields)[:2000]
            tb = scrub_text(trace, job.data, self.redact_fields)[-20000:]  # (only ever the scrubbed text)
            if isinstance(e, UnrecoverableError):
                delay = -1
            elif job.backoff is not None:
                delay = int(job.backoff.delay_for(job.attempt, self._rng) * 1000)
        except BaseException as x:  # noqa: BLE001 - record the attempt whatever went wrong
            logger.error("job %s: recording its failure raised %s; recorded as %r", job.id, type(x).__name__, err)
        logger.warning("job %s (%s) attempt %s/%s failed: %s", job.id, job.name, job.attempt, job.max_attempts, err)
        self._fails.append((job, err, tb, delay, e))

    def _after_complete(self, acks: list[tuple[Job, str, Any]], codes: list[int]) -> None:
        emit = self._emitter.callbacks.get("completed")
        self.processed += len(acks)
        for (job, _, result), code in zip(acks, codes):
            if code == 1:
                if emit:
                    self._emitter.emit("completed", job, result)
            elif code < 0:
                self._lost(job, "completion", code)

    def _after_fail(self, fails: list[tuple[Job, str, str, int, BaseException]], codes: list[int]) -> None:
        self.processed += len(fails)
        for (job, err, _, _, exc), code in zip(fails, codes):
            if code > 0:
                self._emitter.emit("failed", job, exc)
                if code == 3:
                    logger.error("job %s (%s) moved to the dead-letter queue: %s", job.id, job.name, err)
                    self._emitter.emit("dead", job, exc)
                else:
                    self._emitter.emit("retrying", job, exc)
            elif code < 0:
                self._lost(job, "failure", code)

    def _lost(self, job: Job, what: str, code: int = -1) -> None:
        job.lock_lost = True
        if code == -3:
            logger.error("job %s: %s refused, its key holds another type than a hash: moved to the DLQ "
                         "(and the queue's corrupt set)", job.id, what)
        else:
            logger.warning("job %s: %s refused, this worker no longer holds its lock (it stalled or was "
                           "recovered elsewhere)", job.id, what)
        self._emitter.emit("lock_lost", job)

    def _held_of(self, queue: str) -> Callable[[], list[Job]]:
        return lambda: [j for j in self._held() if j.queue == queue]

    def _held(self) -> list[Job]:
        """Jobs whose lock this worker holds: running, or finished but not yet acknowledged."""
        return [j for j, _ in self._active.values()] + [a[0] for a in self._acks] + [f[0] for f in self._fails]

    async def _report_progress(self, job: Job, value: Any) -> None:
        text = encode_payload(redact(value, self.redact_fields), what="progress", max_bytes=self.max_payload,
                              warn_bytes=self.max_payload)
        try:
            code = (await run_calls_async(self.client, self.scripts, [
                progress_call(self._keys_of[job.queue], self.events_maxlen, job.id, job.token, text)]))[0]
        except (*CONNECTION_ERRORS, redis.exceptions.RedisError) as e:
            raise RedisUnavailable(f"cannot report progress of job {job.id}: {e}") from e
        if code < 0:
            raise LockLost(f"job {job.id}: this worker no longer holds its lock")
        self._emitter.emit("progress", job, value)

    # -- shutdown -------------------------------------------------------------
    async def _shutdown(self, grace: float) -> None:
        self._closing = True
        if self._blpop is not None:
            self._blpop.cancel()
        self._wake.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._active and not self._force.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            self._changed.clear()
            try:
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            except TimeoutError:
                break
        tasks = [t for _, t in self._active.values()]
        if tasks:
            self._exit_code = EXIT_CUT_OFF
            logger.warning("cutting off %s jobs still running after %s s; handing them back", len(tasks), grace)
            for t in tasks:
                self._cutting.add(t)
                t.cancel()
            await asyncio.wait(tasks, timeout=5.0)
            for job, t in list(self._active.values()):
                logger.error("job %s ignored cancellation; handing it back anyway", job.id)
                self._releases.append((job, True))
        self._stopped = True
        self._wake.set()

    async def _abort(self) -> None:
        """run() itself was cancelled: hand back what runs, best effort, quickly."""
        jobs = [j for j, _ in self._active.values()]
        for _, t in self._active.values():
            self._cutting.add(t)
            t.cancel()
        if jobs:
            self._exit_code = EXIT_CUT_OFF
            try:
                async with asyncio.timeout(2.0):
                    await run_calls_async(self.client, self.scripts, [
                        release_call(k, self.events_maxlen, [(j.id, j.token) for j in sub])
                        for k, sub in self._groups(jobs)])
            except (*CONNECTION_ERRORS, redis.exceptions.RedisError, TimeoutError) as e:
                logger.warning("could not hand back %s jobs: %s", len(jobs), e)
