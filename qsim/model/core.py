"""The core of a model run: clock, job table, queues, dispatcher, slots, and the three hot paths.

A job's life in the core, written once for every kind of run:

- :meth:`ModelCore.enqueue` — a job becomes waiting (an arrival, a child) and
  the dispatcher is offered its queue; :meth:`ModelCore.requeue` — a job comes
  back (a retry after its backoff, a flow parent released): the same, logged
  for the time series; :meth:`ModelCore.requeue_front` — a stalled job put back
  or a job handed back at shutdown: to the front of its priority level;
- :meth:`ModelCore.start_attempt` — the dispatcher matched the job with a
  slot: the slot holds the job and its :class:`~qsim.model.schedule.Alarm`
  is set for the end of the attempt, after the job's *hold* (its service
  time; with timeouts or engine overheads, :class:`~qsim.model.timing.Timing`).
  A crash or a forced shutdown :meth:`~ModelCore.cancel`\\ s an attempt: its
  alarm then finds the slot empty;
- :meth:`ModelCore.attempt_ended` — the alarm's callback: frees the queue's
  gates, then either the job completed (a run where every attempt succeeds)
  or the :class:`~qsim.model.hooks.AttemptResult` decides
  (:mod:`~qsim.model.retries`: settle, or fail and retry after a backoff);
  then the slot takes the next job at once (a *retired* slot, of a process
  being stopped, takes none).

What varies between runs is chosen once and handed to the constructor (see
:mod:`~qsim.model.hooks`), as factories the core calls with itself once its
state is built, each mechanism getting its small context
(:mod:`~qsim.model.context`):

- ``recorder`` — what is kept of each attempt: the job table's record columns
  (records on, :mod:`~qsim.model.recorders`) or streamed statistics only
  (records off, :mod:`~qsim.model.recordless`);
- ``attempt_result``, ``flows``, ``events`` — the mechanisms of a full run
  (:mod:`~qsim.model.run` chooses them), and ``timing``: each job's hold.

The constructor ends by copying what the hot paths touch into private
attributes (the *speed copies*: one attribute lookup instead of two); each hot
path is one method whatever the run. :meth:`ModelCore.run` plays the
arrivals to the end.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from typing import cast

import numpy as np
import simpy
from simpy.events import Event, Timeout

from qsim.model.arrivals import ArrivalFeed
from qsim.model.context import FlowContext, PoolContext, RetryContext
from qsim.model.dispatch import Dispatcher, Pool, make_picker
from qsim.model.hooks import AttemptResult, FlowHooks, PoolHooks, Recorder
from qsim.model.lanes import Lanes
from qsim.model.limits import ConcurrencyLimit, Gate, RateLimit
from qsim.model.queues import Queues
from qsim.model.schedule import Alarm
from qsim.model.state import JobTable
from qsim.model.timeseries import ChangeLog
from qsim.model.timing import Timing
from qsim.spec.scenario import Scenario
from qsim.spec.workload import JobDraws

__all__ = ["ModelCore", "Recorder", "Progress"]

Progress = Callable[[float], None]


class ModelCore:
    """The state and hot paths of one run (see the module docstring), built whole.

    Args:
        scenario: the system to run.
        arrivals: the drawn jobs (arrival times, types, first service times).
        recorder: makes the run's :class:`~qsim.model.hooks.Recorder` from the core.
        attempt_result: makes the :class:`~qsim.model.hooks.AttemptResult` (None: every attempt succeeds).
        flows: makes the :class:`~qsim.model.hooks.FlowHooks` (None: arrivals are enqueued as they come).
        events: makes the :class:`~qsim.model.hooks.PoolHooks` (None: no process ever stops).
        timing: engine overheads and timeouts (None: an attempt holds its slot for its service time).
        records: False leaves the job table's record columns empty (a record-less core run).
    """

    def __init__(self, scenario: Scenario, arrivals: JobDraws, *, recorder: Callable[[ModelCore], Recorder],
                 attempt_result: Callable[[RetryContext], AttemptResult] | None = None,
                 flows: Callable[[FlowContext], FlowHooks] | None = None,
                 events: Callable[[PoolContext], PoolHooks] | None = None,
                 timing: Timing | None = None, records: bool = True) -> None:
        self.scenario = scenario
        self.env = env = simpy.Environment()
        lanes = Lanes.of(scenario)
        qindex = {q.name: i for i, q in enumerate(scenario.queues)}
        # per job type: its queue, priority and lane (qsim.model.lanes; the queue itself unless keyed)
        self._type_of = [(qindex[j.queue], j.priority, lanes.of_type[k]) for k, j in enumerate(scenario.jobs)]
        self.jobs = jobs = _job_table(arrivals, self._type_of, records)
        # "q" in the hot paths below is a lane; jobs.queue keeps the queue (records, time series)
        self._lane: list[int] = jobs.queue
        if lanes.keyed:
            self._lane = np.asarray(lanes.of_type, dtype=np.int64)[arrivals.type].tolist() if jobs.n else []
        aging = [q.aging for q in scenario.queues]
        self.queues = queues = Queues(len(lanes.queue), _gates(scenario, lanes, env, self._reopen),
                                      [aging[q] for q in lanes.queue], lanes.family())
        pools, self.worker_names = _pools(scenario, lanes, qindex, queues)
        self.slot_worker = [p.slot_worker(s) for p in pools for s in p.slots]
        self._running = [-1] * len(self.slot_worker)  # job on each slot, -1 when free
        self.dispatcher = d = Dispatcher(pools, queues, len(self._running), self.start_attempt)
        self._set_end = [Alarm(env, self.attempt_ended, s).set for s in range(len(self._running))]
        # Per job: the heap key of its lane (its priority; with aging, priority + ready / aging) and
        # how long its next attempt holds its slot (its service time unless timing says otherwise).
        self._key = cast("list[float]", jobs.priority)  # int priorities: keys as they are
        if any(a > 0 for a in aging):
            self._key = [self._key_of(job) for job in range(jobs.n)]
        self._timing = timing
        self._hold = jobs.service if timing is None else timing.column(jobs.type, jobs.service)
        self.changes = ChangeLog()  # requeues: queue changes the job table cannot describe
        self.settled = 0
        self.done = Event(env)

        # The strategy and the mechanisms, each made now from the core (through its context).
        self.recorder = rec = recorder(self)
        self._result = attempt_result(self) if attempt_result is not None else None
        self.flows = flows(self) if flows is not None else None
        self.events = events(self) if events is not None else None
        # the feed reads the enqueued column itself (retime writes a time once it is read)
        fl = self.flows
        self._feed = ArrivalFeed(env, jobs.enqueued, retime=self.retime,
                                 on_arrival=self.enqueue if fl is None else fl.arrive,
                                 on_batch=self.enqueue_batch if fl is None else fl.arrive_batch)

        # Speed copies: what the hot paths touch, one attribute lookup away.
        self._heaps, self._active, self._gates, self._open = queues.heaps, queues.active, queues.gates, queues.open
        self._fill, self._offer = d.fill, d.offer
        self._pool_of_slot, self._idle_since = d.pool_of_slot, d.idle_since
        # the one pool serving each lane (None when several do: Dispatcher.offer chooses)
        self._solo = [ps[0] if len(ps) == 1 else None for ps in d.pools_of]
        self._record_start, self._completed, self._queued = rec.started, rec.completed, rec.queued
        self._record_settle = rec.settled
        self._on_settle = self.flows.settled if self.flows is not None else None
        self._retired = self.events.retired if self.events is not None else None
        self._slot_done = self.events.slot_done if self.events is not None else _no_slot_done
        self._progress = _Progress(None, jobs.n)
        self._check_at = min(rec.every, jobs.n)

    # ------------------------------------------------------------------ the run

    def run(self, until: float, progress: Progress | None = None) -> None:
        """Play the arrivals until every job settled, or the horizon ``until`` (a core runs once).

        ``progress`` is called now and then with the fraction (0..1) of jobs settled.
        """
        env = self.env
        if progress is not None:
            self._progress = _Progress(progress, self.jobs.n)
            self._check_at = min(self.recorder.every, self._progress.next, self.jobs.n)
        self.recorder.start()
        if self.jobs.n == 0:
            self.done.succeed()
        Timeout(env, until).callbacks.append(self._at_horizon)
        if self.events is not None:
            self.events.start()
        self._feed.start()
        env.run(until=self.done)

    def _at_horizon(self, _event: Event) -> None:
        if not self.done.triggered:
            self.done.succeed()

    @property
    def arrived(self) -> int:
        """How many of the drawn jobs arrived so far (jobs ``0 .. arrived - 1``)."""
        return self._feed.next

    @property
    def drawn(self) -> int:
        """How many jobs were drawn (the arrivals, before any child was added)."""
        return self._feed.n

    @property
    def type_names(self) -> list[str]:
        """The job types' names, by index."""
        return [j.name for j in self.scenario.jobs]

    @property
    def queue_names(self) -> list[str]:
        """The queues' names, by index."""
        return [q.name for q in self.scenario.queues]

    @property
    def pools(self) -> Sequence[Pool]:
        """The pools, by index."""
        return self.dispatcher.pools

    @property
    def n_slots(self) -> int:
        """Slots so far (ids ``0 .. n_slots - 1``)."""
        return len(self._running)

    # ------------------------------------------------------------------ setup

    def _key_of(self, job: int) -> float:
        a = self.queues.aging[self._lane[job]]  # a lane ages as its queue
        p = self.jobs.priority[job]
        return p + self.jobs.enqueued[job] / a if a > 0 else p

    def set_service(self, job: int, service: float) -> None:
        """The service time of the job's next attempt."""
        self.jobs.service[job] = service
        if self._timing is not None:
            self._hold[job] = self._timing.hold(self.jobs.type[job], service)

    def add_job(self, type_: int, service: float, parent: int, now: float) -> int:
        """Add a job of type ``type_`` (a child of ``parent``) now, not yet waiting; returns its number."""
        jobs = self.jobs
        queue, priority, lane = self._type_of[type_]
        job = jobs.add(type_=type_, queue=queue, priority=priority, enqueued=now, service=service, parent=parent)
        if self._lane is not jobs.queue:
            self._lane.append(lane)
        if self._key is not jobs.priority:
            self._key.append(self._key_of(job))
        if self._timing is not None:
            self._hold.append(self._timing.hold(type_, service))
        return job

    def retime(self, job: int, now: float) -> None:
        """A drawn job arrived at ``now``, one ulp after its drawn time (see the arrival feed)."""
        self.jobs.enqueued[job] = now
        if self._key is not self.jobs.priority:
            self._key[job] = self._key_of(job)

    def add_worker(self, pool: Pool, name: str) -> int:
        """A new process named ``name`` in ``pool``; returns its index."""
        self.worker_names.append(name)
        return len(self.worker_names) - 1

    def add_slot(self, pool: Pool, worker: int) -> int:
        """A new slot of process ``worker`` in ``pool`` (not yet free); returns its id."""
        slot = len(self._running)
        self._running.append(-1)
        self.slot_worker.append(worker)
        self._set_end.append(Alarm(self.env, self.attempt_ended, slot).set)
        self.dispatcher.pool_of_slot.append(pool)
        self.dispatcher.idle_since.append(self.env.now)
        pool.slots.append(slot)
        return slot

    # ------------------------------------------------------------------ hot paths

    def enqueue(self, job: int, now: float) -> None:
        """Job ``job`` becomes waiting now; offer its queue to the pools."""
        q = self._lane[job]
        heap = self._heaps[q]
        pool = self._solo[q]
        if pool is not None and pool.free and not heap and self._open[q]:
            # Fast path: nothing waits in q and the one pool serving it has a free slot,
            # so (at rest) none of the pool's queues holds a startable job: whatever the
            # policy, this job is the pick (a smooth WRR pick with one candidate is a no-op).
            self.start_attempt(job, q, pool.free.popleft(), now)
            return
        queues = self.queues
        queues.seq += 1
        heappush(heap, (self._key[job], queues.seq, job))
        if self._queued is not None:
            self._queued(q, len(heap), now)
        if pool is None:
            self._offer(q, now)
        elif pool.free:
            self._fill(pool, now)

    def enqueue_batch(self, jobs: list[int], now: float) -> None:
        """Several jobs become waiting at the same instant (added in bulk): all are
        queued before the pools are offered their queues, so the best priority starts first."""
        queues, heaps, queue_of, key = self.queues, self._heaps, self._lane, self._key
        touched: list[int] = []
        for job in jobs:
            q = queue_of[job]
            queues.seq += 1
            heappush(heaps[q], (key[job], queues.seq, job))
            if q not in touched:
                touched.append(q)
        self._announce(touched, now)

    def _announce(self, touched: list[int], now: float) -> None:
        """Queues ``touched`` got jobs at once: record their lengths, then offer each to the pools."""
        if self._queued is not None:
            for q in touched:
                self._queued(q, len(self._heaps[q]), now)
        for q in touched:
            self._offer(q, now)

    def start_attempt(self, job: int, q: int, slot: int, now: float) -> None:
        """Start an attempt of ``job`` (taken from queue ``q``) on ``slot`` now."""
        self._active[q] += 1
        if self._gates[q]:
            self.queues.gates_started(q, now)
        self._running[slot] = job
        self._record_start(job, q, slot, now)
        self._set_end[slot](now + self._hold[job])

    def attempt_ended(self, alarm: Alarm) -> None:
        """A slot's alarm: its attempt ended. Free the gates, settle or retry the job, dispatch the next."""
        slot = alarm.data
        running = self._running
        job = running[slot]
        if job < 0:  # the attempt was cancelled (crash, shutdown)
            return
        running[slot] = -1
        now = alarm.at
        q = self._lane[job]
        self._active[q] -= 1
        reopened = self.queues.gates_ended(q, now) if self._gates[q] else False
        if self._result is None:  # every attempt succeeds: the job completed (settle, inlined)
            self._completed(job, slot, now)
            self.settled += 1
            if self.settled >= self._check_at:
                self._check()
        else:
            self._result(job, slot, now)
        if self._retired is not None and self._retired[slot]:  # its process is stopping: no more jobs
            self._slot_done(slot, now)
            if reopened:
                self.offer(q, now)
            return
        pool = self._pool_of_slot[slot]
        if pool.only >= 0 and not reopened:
            # Fast path for a one-queue pool: its other free slots (if any) had nothing
            # startable and nothing reopened, so this slot takes the queue's next job.
            heap = self._heaps[q]
            if heap and self._open[q]:
                self.start_attempt(heappop(heap)[2], q, slot, now)
            else:
                pool.free.append(slot)
                self._idle_since[slot] = now
            return
        pool.free.append(slot)  # the slot joins its pool's free slots and the pool fills
        self._idle_since[slot] = now
        self._fill(pool, now)
        if reopened:
            self.offer(q, now)

    def settle(self, job: int, outcome: int, now: float) -> None:
        """The job is done for good (completed or dead)."""
        self._record_settle(job, outcome, now)
        if self._on_settle is not None:  # flows: release or fail a parent, fan out (adds jobs first)
            self._on_settle(job, outcome, now)
        self.settled += 1
        if self.settled >= self._check_at:
            self._check()

    def _check(self) -> None:
        """Every so many settled jobs: the recorder's tick, progress, and the end of the run."""
        s, n, rec, p = self.settled, self.jobs.n, self.recorder, self._progress
        rec.tick()
        if s >= p.next:
            if p.call is not None:
                p.call(min(s / max(n, 1), 1.0))
            p.next += p.step
        if s == n and not self.done.triggered:
            self.done.succeed()
        self._check_at = min(s + rec.every, p.next, n if n > s else s + 1)

    # ------------------------------------------------------------------ for the mechanisms

    def requeue(self, job: int, now: float) -> None:
        """A job comes back to waiting (a retry, a put-back, a released flow parent)."""
        self.changes.add(now, self.jobs.queue[job], 1, 0)
        self.enqueue(job, now)

    def requeue_batch(self, jobs: list[int], now: float) -> None:
        """Several jobs come back to waiting at once."""
        queue_of = self.jobs.queue
        for job in jobs:
            self.changes.add(now, queue_of[job], 1, 0)
        self.enqueue_batch(jobs, now)

    def requeue_front(self, jobs: list[int], now: float) -> None:
        """Jobs put back by a stalled check or handed back at shutdown: each to the *front* of its
        priority level, the batch in the order given (the first leaves first), ahead of every job of
        its level already waiting (``recover_stalled.lua``, ``release.lua``; see :mod:`~qsim.model.queues`)."""
        queues, heaps, lane_of, key, queue_of = self.queues, self._heaps, self._lane, self._key, self.jobs.queue
        queues.front += len(jobs)
        touched: list[int] = []
        for i, job in enumerate(jobs):
            self.changes.add(now, queue_of[job], 1, 0)
            q = lane_of[job]
            heappush(heaps[q], (key[job], i - queues.front, job))
            if q not in touched:
                touched.append(q)
        self._announce(touched, now)

    def job_on(self, slot: int) -> int:
        """The job running on ``slot``, or -1."""
        return self._running[slot]

    def cancel(self, slot: int) -> int:
        """Stop the attempt on ``slot`` (see :class:`~qsim.model.context.PoolContext`); its job, or -1."""
        job = self._running[slot]
        if job >= 0:
            self._running[slot] = -1
            self._active[self._lane[job]] -= 1
        return job

    def lane(self, job: int) -> int:
        """The lane (waiting line) ``job`` joins: its queue's, or its key value's in a keyed queue."""
        return self._lane[job]

    def release(self, q: int, now: float) -> bool:
        """A stopped job of lane ``q`` gives up its place under the gates; True when ``q`` reopened."""
        return bool(self.queues.gates[q]) and self.queues.gates_ended(q, now)

    def offer(self, q: int, now: float) -> None:
        """Let the pools serving lane ``q`` (and the other lanes of its queue) take their jobs."""
        for lane in self.queues.lanes(q):
            self.dispatcher.offer(lane, now)

    def fill(self, pool: Pool, now: float) -> None:
        """Let ``pool``'s free slots take jobs."""
        self.dispatcher.fill(pool, now)

    def _reopen(self, q: int) -> None:
        """A gate of ``q`` reopened on its own (a rate-limit window rolled)."""
        if self.queues.refresh(q):
            self.dispatcher.offer(q, self.env.now)


class _Progress:
    """When a run calls its progress callback: every ``step`` settled jobs (1% of the drawn ones)."""

    def __init__(self, call: Progress | None, n: int) -> None:
        self.call = call
        self.step = max(1, math.ceil(n / 100))
        self.next: float = self.step if call is not None else math.inf  # settled count of the next call


def _no_slot_done(slot: int, now: float) -> None:
    """Runs without pool events retire no slot."""


def _job_table(arrivals: JobDraws, type_of: Sequence[tuple[int, int, int]], records: bool) -> JobTable:
    """The job table of the drawn arrivals (``type_of``: per type, its queue, priority and lane)."""
    types = arrivals.type
    queue = np.asarray([t[0] for t in type_of], dtype=np.int64)[types] if len(types) else []
    priority = np.asarray([t[1] for t in type_of], dtype=np.int64)[types] if len(types) else []
    return JobTable(type_=types, queue=queue, priority=priority, enqueued=arrivals.time,
                    service=arrivals.service, records=records)


def _gates(scenario: Scenario, lanes: Lanes, env: simpy.Environment,
           reopen: Callable[[int], None]) -> list[list[Gate]]:
    """Each lane's gates: its queue's concurrency limit (shared by the queue's lanes), its own rate limit."""
    gates: list[list[Gate]] = [[] for _ in lanes.queue]
    for i, qs in enumerate(scenario.queues):
        shared = ConcurrencyLimit(qs.concurrency_limit) if qs.concurrency_limit is not None else None
        for lane in lanes.of_queue[i]:
            if shared is not None:
                gates[lane].append(shared)
            if qs.rate_limit is not None:
                gates[lane].append(RateLimit(qs.rate_limit.max, qs.rate_limit.per, env=env,
                                             reopen=functools.partial(reopen, lane)))
    return gates


def _pools(scenario: Scenario, lanes: Lanes, qindex: dict[str, int], queues: Queues) -> tuple[list[Pool], list[str]]:
    """The pools (slots numbered pool by pool, process by process) and the processes' names."""
    pools: list[Pool] = []
    names: list[str] = []
    slot = 0
    for i, spec in enumerate(scenario.pools):
        served = [qindex[name] for name in spec.queues]
        groups = lanes.served(served)
        picker = make_picker(spec.policy, served, [spec.weight(name) for name in spec.queues], queues, groups)
        pools.append(Pool(i, spec, [lane for g in groups for lane in g], slot, len(names), picker))
        names += [f"{spec.name}-{w}" for w in range(spec.workers)]
        slot += spec.slots
    return pools, names
