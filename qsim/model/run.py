"""One model run: wiring the mechanisms together, and :func:`simulate`.

Event budget (what keeps the model fast): one SimPy timeout per distinct
arrival time and one per attempt, each with a plain callback; no process per
job and no ``simpy.Resource``. Everything else (dispatch, gates, records)
happens inside those callbacks at the same simulated time.

A job's life, and the hooks later mechanisms plug into:

- :meth:`Model.enqueue` — a job becomes waiting (an arrival now; a retry
  after its backoff, a stalled job put back or a child later) and the
  dispatcher is offered its queue;
- :meth:`Model.start_attempt` — the dispatcher matched the job with a slot:
  the attempt's end is scheduled as ``Timeout(service, value=slot)`` and
  ``running[slot]`` holds the job. A crash or a forced shutdown cancels an
  attempt by setting ``running[slot] = -1`` and retiring the slot (never
  handing it out again): the pending callback then ignores the event;
- :meth:`Model.attempt_ended` — the callback: frees the queue's gates, then
  either settles the job as completed (:meth:`Model.settle`) or, when a
  mechanism has set ``Model.attempt_result(job, slot, now)``, lets it decide
  (fail and retry after a backoff, dead-letter, timeout); then the slot takes
  the next job at once.

The core's timeouts are not even new objects: the arrival feed and each slot
reschedule one event (:func:`~qsim.model.arrivals.rearm`). ``records=False``
swaps in the record-less core hooks of :mod:`~qsim.model.recordless`.

Everything per job lives in :class:`~qsim.model.state.JobTable` (columns, no
object per job); gates (:mod:`~qsim.model.limits`) close and reopen queues;
the dispatcher (:mod:`~qsim.model.dispatch`) owns the free slots.

Core and full runs: a scenario that uses nothing beyond pools, priorities,
policies and the concurrency limit runs the lean core path above (one
attempt per job; its attempts table is derived from the job table). Any
other mechanism (:func:`needs_full`) switches the model to the *full* path
(``_enqueue_full``, ``_start_full``, ``_ended_full``): every enqueue is logged
for the time series, every attempt in an :class:`~qsim.model.attempts.AttemptLog`,
and the mechanisms plug in:

- :mod:`~qsim.model.draws` — each attempt's service time and failure flag,
  the very draws the engine harness plans;
- :mod:`~qsim.model.retries` — ``attempt_result``: ok, failed, timeout
  (an attempt is scheduled to end at ``min(service, timeout)``), backoff,
  the DLQ;
- :mod:`~qsim.model.limits` — the sliding-window rate limit (a gate with a
  timer); :mod:`~qsim.model.dispatch` — priority aging;
- :mod:`~qsim.model.events` — sigkill (stalled recovery), sigterm (drain,
  cut-off, hand-back), start (new processes and slots); retired slots never
  rejoin their pool;
- :mod:`~qsim.model.flows` — ``on_settle``: flow parents in
  waiting-children, fan-out children;
- ``fetch_overhead``: each attempt's handler starts that long after its slot
  took the job (the slot is held meanwhile);
- ``ack_overhead``: each attempt's result reaches Redis that long after its
  handler returned (or failed, or timed out): the slot is held meanwhile, and
  the attempt's end (and the job's ``finished``) is that later time.

Drain and horizon: arrivals happen in ``[0, duration)``; the run continues
after ``duration`` until every job has settled. As a guard (e.g. a pool with
no workers), it stops at the horizon ``duration + (total service time of all
jobs) + 1 s`` — by then even a single slot working from ``duration`` on would
have finished every job — and jobs not done are ``unfinished`` (their
``finished`` is NaN; a job running at the horizon keeps its ``started``). A
full run's horizon adds every planned attempt (capped by its timeout) and its
overheads, every backoff, the rate limits' pace, and each event's grace or
lock + stalled interval, after the last event.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from heapq import heappop, heappush

import numpy as np
import pandas as pd
import simpy
from simpy.events import NORMAL, Event, Timeout

from qsim.model.arrivals import ArrivalFeed, JobDraws, draw_jobs
from qsim.model.attempts import AttemptLog
from qsim.model.dispatch import Dispatcher, Pool, make_picker
from qsim.model.draws import Attempts, plan_attempts
from qsim.model.events import PoolEvents
from qsim.model.flows import Flows
from qsim.model.limits import ConcurrencyLimit, Gate, RateLimit
from qsim.model.queues import Queues
from qsim.model.result import LazyFrames, ModelResult, core_attempts
from qsim.model.retries import Retries, backoff_delay
from qsim.model.state import COMPLETED, JobTable
from qsim.model.recordless import FLUSH, StreamHooks
from qsim.model.support import check_supported
from qsim.model.timeseries import Changes, ChangeLog, timeseries_frame
from qsim.records import Records
from qsim.scenario import Scenario
from qsim.summary import summarize

__all__ = ["simulate", "ModelResult", "Model", "needs_full"]

Progress = Callable[[float], None]


def simulate(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None,
             progress: Progress | None = None, records: bool = True) -> ModelResult:
    """Simulate a scenario with the SimPy model.

    Args:
        scenario: the queue system to run.
        seed: overrides ``scenario.seed``; the same seed gives identical records.
        max_jobs: stop arrivals after this many jobs (the earliest arrivals over all types).
        progress: called now and then with the fraction (0..1) of jobs settled, last with 1.0.
        records: False keeps only what the Summary needs (for sweeps and long runs):
            ``result.records`` is None and ``result.jobs`` and ``result.timeseries`` raise
            :class:`~qsim.model.result.RecordsNotKept`. A core run streams its statistics
            (:mod:`qsim.model.recordless`: p50/p95/p99 within
            :data:`~qsim.summary.STREAM_REL_ERROR`, about 0.6%, of the exact ones; every
            other figure exact); a run with any other mechanism computes the exact Summary
            from its records and drops them.

    Raises:
        NotSupportedError: the scenario uses a feature the model cannot run yet.
        ValueError: ``seed`` or ``max_jobs`` is negative.
    """
    check_supported(scenario)
    seed = scenario.seed if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    seed = int(seed)
    model = Model(scenario, draw_jobs(scenario, seed=seed, max_jobs=max_jobs), seed=seed, records=records)
    return model.run(progress)


def needs_full(scenario: Scenario) -> bool:
    """Whether a scenario uses a mechanism beyond the core (then every attempt is logged)."""
    return (any(j.fail_prob > 0 or j.poison_prob > 0 or j.timeout > 0 or j.fan_out is not None
                or j.flow is not None for j in scenario.jobs)
            or any(q.rate_limit is not None or q.aging > 0 for q in scenario.queues)
            or bool(scenario.events) or scenario.engine.fetch_overhead > 0 or scenario.engine.ack_overhead > 0)


class Model(StreamHooks):
    """One run of a scenario over drawn jobs (see the module docstring).

    :func:`simulate` draws the jobs with :func:`~qsim.model.arrivals.draw_jobs`;
    tests and notebooks may build a :class:`~qsim.model.arrivals.JobDraws` by
    hand (arrival times, type indexes, service times) and run it::

        result = Model(scenario, JobDraws(time=t, type=k, service=s), seed=0).run()

    A model runs once. ``records=False``: see :func:`simulate`.
    """

    def __init__(self, scenario: Scenario, draws: JobDraws, *, seed: int, records: bool = True) -> None:
        self.scenario = scenario
        self.seed = seed
        self.full = full = needs_full(scenario)
        self.keep_records = records
        self.streaming = not records and not full  # the record-less core hooks (qsim.model.recordless)
        self.env = env = simpy.Environment()
        self.queue_names = [q.name for q in scenario.queues]
        self.type_names = [j.name for j in scenario.jobs]
        qindex = {name: i for i, name in enumerate(self.queue_names)}
        type_queue = [qindex[j.queue] for j in scenario.jobs]
        type_priority = [j.priority for j in scenario.jobs]

        types = draws.type
        self.jobs = JobTable(
            type_=types,
            queue=np.asarray(type_queue, dtype=np.int64)[types] if len(types) else [],
            priority=np.asarray(type_priority, dtype=np.int64)[types] if len(types) else [],
            enqueued=draws.time,
            service=draws.service,
            records=not self.streaming,
        )

        gates: list[list[Gate]] = [[] for _ in scenario.queues]
        for i, qs in enumerate(scenario.queues):
            if qs.concurrency_limit is not None:
                gates[i].append(ConcurrencyLimit(qs.concurrency_limit))
            if qs.rate_limit is not None:
                gates[i].append(RateLimit(qs.rate_limit.max, qs.rate_limit.per, env=env,
                                          reopen=functools.partial(self._reopen, i)))
        aging = [q.aging for q in scenario.queues]
        self.queues = Queues(len(scenario.queues), gates, aging)
        clock = (lambda: env.now) if any(a > 0 for a in aging) else None

        pools: list[Pool] = []
        self.worker_names: list[str] = []
        slot = 0
        for i, spec in enumerate(scenario.pools):
            served = [qindex[name] for name in spec.queues]
            picker = make_picker(spec.policy, served, [spec.weight(name) for name in spec.queues], self.queues,
                                 clock)
            pools.append(Pool(i, spec, served, slot, len(self.worker_names), picker))
            self.worker_names += [f"{spec.name}-{w}" for w in range(spec.workers)]
            slot += spec.slots
        self.n_slots = slot
        self.slot_worker = [p.slot_worker(s) for p in pools for s in p.slots]
        self.running = [-1] * slot  # job on each slot, -1 when free
        self.dispatcher = Dispatcher(pools, self.queues, slot, self._start_full if full else self.start_attempt)

        self.changes = ChangeLog()  # queue changes the job table cannot describe (full runs: every enqueue)
        self.settled = 0
        self.done = Event(env)
        last = float(draws.time[-1]) if len(draws) else 0.0
        self.horizon = max(scenario.duration, last) + float(draws.service.sum()) + 1.0
        # Hook for the mechanisms that decide how an attempt ended (retries, timeouts):
        # ``attempt_result(job, slot, now)`` settles the job or sends it back. None: every
        # attempt succeeds, and attempt_ended settles the job as completed itself.
        self.attempt_result: Callable[[int, int, float], None] | None = None
        self.on_settle: Callable[[int, int, float], None] | None = None  # flows: called as a job settles
        self.flows: Flows | None = None
        self.events: PoolEvents | None = None
        on_arrival, on_batch = self.enqueue, self.enqueue_batch
        if full:
            self._init_full(draws, type_queue, type_priority)
            on_arrival, on_batch = self.enqueue, self.enqueue_batch
            if self.flows is not None:
                on_arrival, on_batch = self.flows.arrive, self.flows.arrive_batch
        # a record-less run's feed reads the enqueued column itself (one O(jobs) array less)
        self.feed = ArrivalFeed(env, self.jobs.enqueued if self.streaming else draws.time,
                                on_arrival=on_arrival, on_batch=on_batch,
                                arrived=self.jobs.enqueued)
        self._progress: Progress | None = None
        self._next_tick = math.inf
        self._tick = 1
        self._ran = False
        self._next_progress = math.inf
        self._bind()
        if self.streaming:
            self._init_stream()

    # ------------------------------------------------------------------ hooks
    # The three hooks below run once or twice per job: they read columns and
    # collaborators through attributes bound in __init__ (see _bind).

    def _bind(self) -> None:
        jobs, queues, d = self.jobs, self.queues, self.dispatcher
        self._job_queue, self._job_priority, self._service = jobs.queue, jobs.priority, jobs.service
        self._started, self._attempts, self._worker = jobs.started, jobs.attempts, jobs.worker
        self._finished, self._outcome = jobs.finished, jobs.outcome
        self._heaps, self._active, self._gates, self._open = queues.heaps, queues.active, queues.gates, queues.open
        self._fill, self._offer = d.fill, d.offer
        self._pool_of_slot, self._idle_since = d.pool_of_slot, d.idle_since
        # the one pool serving each queue (None when several do: Dispatcher.offer chooses)
        self._solo = [pools[0] if len(pools) == 1 else None for pools in d.pools_of]
        self._on_end, self._slot_worker, self._running = self.attempt_ended, self.slot_worker, self.running
        self._queue, self._eid = self.env._queue, self.env._eid  # type: ignore[attr-defined]
        self._slot_events = [self._done_event(slot) for slot in range(self.n_slots)]
        if self.full:
            self._on_end = self._ended_full
            self._type, self._enqueued_at, self._aging = self.jobs.type, self.jobs.enqueued, self.queues.aging

    def _done_event(self, slot: int) -> Event:
        """An event of ``slot`` for core attempt ends: scheduled again for each attempt, value ``slot``."""
        ev = Event(self.env)
        ev._ok, ev._value = True, slot
        return ev

    def enqueue(self, job: int) -> None:
        """Job ``job`` becomes waiting now; offer its queue to the pools."""
        q = self._job_queue[job]
        heap = self._heaps[q]
        pool = self._solo[q]
        if pool is not None and pool.free and not heap and self._open[q]:
            # Fast path: nothing waits in q and the one pool serving it has a free slot,
            # so (at rest) none of the pool's queues holds a startable job: whatever the
            # policy, this job is the pick (a smooth WRR pick with one candidate is a no-op).
            self.start_attempt(job, q, pool.free.popleft())
            return
        queues = self.queues
        queues.seq += 1
        heappush(heap, (self._job_priority[job], queues.seq, job))
        if pool is None:
            self._offer(q)
        elif pool.free:
            self._fill(pool)

    def enqueue_batch(self, jobs: list[int]) -> None:
        """Several jobs become waiting at the same instant (added in bulk): all are
        queued before the pools are offered their queues, so the best priority starts first."""
        queues, heaps, queue_of, priority_of = self.queues, self._heaps, self._job_queue, self._job_priority
        touched: list[int] = []
        for job in jobs:
            q = queue_of[job]
            queues.seq += 1
            heappush(heaps[q], (priority_of[job], queues.seq, job))
            if q not in touched:
                touched.append(q)
        for q in touched:
            self._offer(q)

    def start_attempt(self, job: int, q: int, slot: int) -> None:
        """Start an attempt of ``job`` (taken from queue ``q``) on ``slot`` now."""
        now = self.env._now
        if self._attempts[job] == 0:
            self._started[job] = now
        self._attempts[job] += 1
        self._worker[job] = self._slot_worker[slot]
        self._active[q] += 1
        if self._gates[q]:
            self.queues.gates_started(q, now)
        self._running[slot] = job
        # the slot's end event, reused (see arrivals.rearm): Timeout(env, service, slot) without the object
        ev = self._slot_events[slot]
        ev.callbacks = [self._on_end]
        heappush(self._queue, (now + self._service[job], NORMAL, next(self._eid), ev))

    def attempt_ended(self, event: Event) -> None:
        """Callback of an attempt's end: free the slot, settle the job, dispatch the next."""
        slot = event._value
        job = self.running[slot]
        if job < 0:  # the attempt was cancelled (crash, shutdown)
            return
        self.running[slot] = -1
        now = self.env._now
        q = self._job_queue[job]
        self._active[q] -= 1
        reopened = self.queues.gates_ended(q, now) if self._gates[q] else False
        if self.attempt_result is None and self.on_settle is None:  # it succeeded (settle, inlined)
            self._finished[job] = now
            self._outcome[job] = COMPLETED
            self.settled += 1
            if self.settled >= self._next_tick:
                self._report()
            if self.settled == self.jobs.n and not self.done.triggered:
                self.done.succeed()
        elif self.attempt_result is None:
            self.settle(job, COMPLETED, now)
        else:
            self.attempt_result(job, slot, now)
        pool = self._pool_of_slot[slot]
        if pool.only >= 0 and not reopened:
            # Fast path for a one-queue pool: its other free slots (if any) had nothing
            # startable and nothing reopened, so this slot takes the queue's next job.
            heap = self._heaps[q]
            if heap and self._open[q]:
                self.start_attempt(heappop(heap)[2], q, slot)
            else:
                pool.free.append(slot)
                self._idle_since[slot] = now
            return
        pool.free.append(slot)  # the slot joins its pool's free slots and the pool fills
        self._idle_since[slot] = now
        self._fill(pool)
        if reopened:
            self._offer(q)

    def settle(self, job: int, outcome: int, now: float) -> None:
        """The job is done for good (completed or dead)."""
        self._finished[job] = now
        self._outcome[job] = outcome
        if self.on_settle is not None:  # flows: release or fail a parent, fan out (adds jobs first)
            self.on_settle(job, outcome, now)
        self.settled += 1
        if self.settled >= self._next_tick:
            self._report()
        if self.settled == self.jobs.n and not self.done.triggered:
            self.done.succeed()

    def _report(self) -> None:
        if self._progress is not None:
            self._progress(min(self.settled / max(self.jobs.n, 1), 1.0))
        self._next_tick += self._tick


    # ------------------------------------------------------------------ full runs
    # A scenario with any mechanism beyond the core (needs_full) runs through the
    # methods below: every enqueue and attempt is logged, attempts may fail, time
    # out, stall or be cut off, slots may retire or be added, and jobs may have
    # children. The core path above stays as lean as it was.

    def _init_full(self, draws: JobDraws, type_queue: list[int], type_priority: list[int]) -> None:
        s = self.scenario
        n_slots = self.n_slots
        self.retired = [False] * n_slots  # slots of a signalled process: never handed out again
        self.slot_attempt = [-1] * n_slots  # attempt-log row of each slot's running attempt
        self.log = AttemptLog()
        self.plan = plan_attempts(s, draws, self.seed)
        self.tables: list[Attempts | None] = [*self.plan.own, *self.plan.child]
        self.src: list[int] = np.asarray(draws.type, dtype=np.int64).tolist()  # job -> index into tables
        self.row: list[int] = self.plan.rank.tolist()  # job -> row of its table
        self._type_queue, self._type_priority = type_queue, type_priority
        self.overhead = s.engine.fetch_overhead
        self.ack = s.engine.ack_overhead
        self.timeouts = [j.timeout for j in s.jobs]
        self.attempt_result = Retries(self)
        if any(j.flow is not None or j.fan_out is not None for j in s.jobs):
            self.flows = Flows(self)
            self.on_settle = self.flows.settled
        if s.events:
            self.events = PoolEvents(self)
        self.enqueue = self._enqueue_full  # type: ignore[method-assign]
        self.enqueue_batch = self._enqueue_batch_full  # type: ignore[method-assign]
        self.horizon = self._full_horizon(draws)

    def _full_horizon(self, draws: JobDraws) -> float:
        """A time by which every job could have settled even on one slot (see the module docstring)."""
        s = self.scenario
        work = backoff = rated = 0.0
        for k, table in enumerate(self.tables):
            if table is None or not len(table):
                continue
            job = s.jobs[k % len(s.jobs)]
            svc = table.service if job.timeout <= 0 else np.minimum(table.service, job.timeout)
            n, a = table.service.shape
            work += float(svc.sum()) + n * a * (self.overhead + self.ack)
            backoff += n * sum(backoff_delay(job.backoff, i, 0.0) for i in range(1, a))
            rl = s.queue(job.queue).rate_limit
            if rl is not None:
                rated += n * a * rl.per / rl.max
        eng = s.engine
        events = sum(e.grace if e.kind == "sigterm" else eng.lock_duration + eng.stalled_interval for e in s.events)
        last = max([s.duration, float(draws.time[-1]) if len(draws) else 0.0, *(e.at for e in s.events)])
        return last + work + backoff + rated + events + 1.0

    def _reopen(self, q: int) -> None:
        """A gate of ``q`` reopened on its own (a rate-limit window rolled)."""
        if self.queues.refresh(q):
            self.dispatcher.offer(q)

    def add_child(self, type_: int, row: int, parent: int) -> int:
        """Add a child job of type ``type_`` (row ``row`` of its child draws) now; returns its number."""
        table = self.tables[len(self.scenario.jobs) + type_]
        assert table is not None
        job = self.jobs.add(type_=type_, queue=self._type_queue[type_], priority=self._type_priority[type_],
                            enqueued=self.env.now, service=float(table.service[row, 0]), parent=parent)
        self.src.append(len(self.scenario.jobs) + type_)
        self.row.append(row)
        return job

    def add_slot(self, pool: Pool, worker: int) -> int:
        """A new slot of process ``worker`` in ``pool`` (not yet free); returns its id."""
        slot = self.n_slots
        self.n_slots += 1
        self.running.append(-1)
        self.slot_worker.append(worker)
        self.retired.append(False)
        self.slot_attempt.append(-1)
        self.dispatcher.pool_of_slot.append(pool)
        self.dispatcher.idle_since.append(self.env.now)
        pool.slots.append(slot)
        return slot

    def _heap_key(self, job: int, q: int) -> float:
        a = self._aging[q]
        return self._job_priority[job] + self._enqueued_at[job] / a if a > 0 else self._job_priority[job]

    def _enqueue_full(self, job: int) -> None:
        q = self._job_queue[job]
        self.changes.add(self.env.now, q, 1, 0)
        heap = self._heaps[q]
        pool = self._solo[q]
        if pool is not None and pool.free and not heap and self._open[q]:
            self._start_full(job, q, pool.free.popleft())
            return
        queues = self.queues
        queues.seq += 1
        heappush(heap, (self._heap_key(job, q), queues.seq, job))
        if pool is None:
            self._offer(q)
        elif pool.free:
            self._fill(pool)

    def _enqueue_batch_full(self, jobs: list[int]) -> None:
        queues, heaps, queue_of, now = self.queues, self._heaps, self._job_queue, self.env.now
        touched: list[int] = []
        for job in jobs:
            q = queue_of[job]
            self.changes.add(now, q, 1, 0)
            queues.seq += 1
            heappush(heaps[q], (self._heap_key(job, q), queues.seq, job))
            if q not in touched:
                touched.append(q)
        for q in touched:
            self._offer(q)

    def _start_full(self, job: int, q: int, slot: int) -> None:
        env = self.env
        now = env.now
        overhead = self.overhead
        start = now + overhead if overhead else now
        if self._attempts[job] == 0:
            self._started[job] = start
        self._attempts[job] += 1
        w = self._slot_worker[slot]
        self._worker[job] = w
        self._active[q] += 1
        if self._gates[q]:
            self.queues.gates_started(q, now)
        self._running[slot] = job
        svc = self._service[job]
        t = self.timeouts[self._type[job]]
        run = (t if 0 < t < svc else svc) + self.ack  # the slot is free when the result reaches Redis
        self.slot_attempt[slot] = self.log.begin(job, self._attempts[job], w, start)
        Timeout(env, overhead + run if overhead else run, slot).callbacks.append(self._on_end)

    def _ended_full(self, event: Event) -> None:
        slot = event._value
        job = self._running[slot]
        if job < 0:  # the attempt was cancelled (crash, shutdown)
            return
        self._running[slot] = -1
        now = self.env.now
        q = self._job_queue[job]
        self._active[q] -= 1
        reopened = self.queues.gates_ended(q, now) if self._gates[q] else False
        self.attempt_result(job, slot, now)  # type: ignore[misc]
        if self.retired[slot]:  # its process is draining: the slot takes nothing more
            if self.events is not None:
                self.events.slot_done(slot, now)
            if reopened:
                self._offer(q)
            return
        pool = self._pool_of_slot[slot]
        if pool.only >= 0 and not reopened:
            heap = self._heaps[q]
            if heap and self._open[q]:
                self._start_full(heappop(heap)[2], q, slot)
            else:
                pool.free.append(slot)
                self._idle_since[slot] = now
            return
        pool.free.append(slot)
        self._idle_since[slot] = now
        self._fill(pool)
        if reopened:
            self._offer(q)

    # ------------------------------------------------------------------ run

    def run(self, progress: Progress | None = None) -> ModelResult:
        """Run to the end (every job settled, or the horizon) and build the result."""
        env = self.env
        if self._ran:
            raise RuntimeError("a Model runs once; build a new one")
        self._ran = True
        if progress is not None:
            self._progress = progress
            self._tick = max(1, math.ceil(self.jobs.n / 100))
            self._next_tick = self._next_progress = self._tick
        if self.streaming:
            self._next_tick = min(self._next_progress, FLUSH)
            if self._warmup > 0:  # the depth at warmup, before anything else happens then
                Timeout(env, self._warmup).callbacks.append(self._at_warmup_cb)
        if self.jobs.n == 0:
            self.done.succeed()
        Timeout(env, self.horizon).callbacks.append(self._at_horizon)
        if self.events is not None:
            self.events.start()
        self.feed.start()
        env.run(until=self.done)
        if progress is not None:
            progress(1.0)
        return self.result()

    def _at_horizon(self, _event: Event) -> None:
        if not self.done.triggered:
            self.done.succeed()

    def timeseries_changes(self) -> list[Changes]:
        """Every change of queue depth and active jobs (see :mod:`qsim.model.timeseries`).

        The core's jobs run one attempt each, so the job table says it all:
        enqueued (waiting + 1), started (waiting - 1, active + 1), finished
        (active - 1). Mechanisms with several attempts or re-enqueues replace
        the started/finished part with their attempt records and add their
        :attr:`changes`.
        """
        j = self.jobs
        q = np.asarray(j.queue, dtype=np.int64)
        if self.full:  # every enqueue is in self.changes; starts and ends come from the attempt log
            job, _, _, start, end, _ = self.log.arrays()
            aq = q[job]
            ended = ~np.isnan(end)
            one = np.ones(job.size, dtype=np.int64)
            return [self.changes.changes(), (start, aq, -one, one), (end[ended], aq[ended], 0 * one[ended], -one[ended])]
        enqueued = np.frombuffer(j.enqueued, dtype=np.float64)
        started = np.frombuffer(j.started, dtype=np.float64)
        finished = np.frombuffer(j.finished, dtype=np.float64)
        arrived = np.ones(j.n, dtype=bool)
        arrived[self.feed.next:len(self.feed.times)] = False  # drawn jobs still to come when the run stopped
        ran, ended = ~np.isnan(started), ~np.isnan(finished)
        one = np.ones(j.n, dtype=np.int64)
        return [
            (enqueued[arrived], q[arrived], one[arrived], 0 * one[arrived]),
            (started[ran], q[ran], -one[ran], one[ran]),
            (finished[ended], q[ended], 0 * one[ended], -one[ended]),
            self.changes.changes(),
        ]

    def result(self) -> ModelResult:
        """Records, time series and Summary of the run so far."""
        s = self.scenario
        if self.streaming:
            return ModelResult(scenario=s, seed=self.seed, records=None, summary=self.stream_summary())
        jobs = self.jobs.frame(type_names=self.type_names, queue_names=self.queue_names,
                               worker_names=self.worker_names)
        extra: dict[str, Callable[[], pd.DataFrame]] = {
            "timeseries": lambda: timeseries_frame(self.queue_names, self.timeseries_changes())}
        slots: tuple[tuple[float, int], ...] = ((0.0, self.n_slots),)
        if self.full:
            attempts = self.log.frame(self.worker_names)
            if self.events is not None:
                slots = tuple(self.events.slot_steps)
                extra["drains"] = self.events.frame
        else:  # one attempt per job: the job table says it all
            attempts = core_attempts(jobs)
        records = Records(jobs=jobs, attempts=attempts, slots=slots, extra=LazyFrames(extra))
        summary = summarize(records, scenario=s.name, source="model", seed=self.seed, warmup=s.warmup)
        return ModelResult(scenario=s, seed=self.seed, records=records if self.keep_records else None, summary=summary)
