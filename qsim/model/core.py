"""The core of a model run: clock, job table, queues, dispatcher, slots, and the three hot paths.

A job's life in the core, written once for every kind of run:

- :meth:`ModelCore.enqueue` — a job becomes waiting (an arrival, a child) and
  the dispatcher is offered its queue; :meth:`ModelCore.requeue` — a job comes
  back (a retry after its backoff, a flow parent released): the same, logged
  for the time series; :meth:`ModelCore.requeue_front` — a stalled job put back
  or a job handed back at shutdown: to the front of its priority level;
- :meth:`ModelCore.start_attempt` — the dispatcher matched the job with a
  slot: ``running[slot]`` holds the job and the slot's
  :class:`~qsim.model.schedule.Alarm` is set for the end of the attempt, after
  the job's ``hold`` time (its service time; in runs with timeouts or engine
  overheads, ``fetch_overhead + min(service, timeout) + ack_overhead``). A
  crash or a forced shutdown :meth:`~ModelCore.cancel`\\ s an attempt by
  setting ``running[slot] = -1``: its alarm then finds the slot empty;
- :meth:`ModelCore.attempt_ended` — the alarm's callback: frees the queue's
  gates, then either the job completed (a run where every attempt succeeds)
  or the ``attempt_result`` mechanism decides (:mod:`~qsim.model.retries`:
  settle, or fail and retry after a backoff); then the slot takes the next
  job at once (a *retired* slot, of a process being stopped, takes none).

Two things vary between runs and are chosen once, before the run starts:

- the :class:`Recorder` — what is kept of each attempt: the job table's
  record columns (records on, :mod:`~qsim.model.recorders`) or streamed
  statistics only (records off, :mod:`~qsim.model.recordless`);
- the mechanisms plugged in (:mod:`~qsim.model.run` wires them):
  ``attempt_result``, ``on_settle`` (flows), ``retired`` and ``slot_done``
  (pool events), and the per-job ``hold`` and heap ``key`` columns.

:meth:`ModelCore.bind` then fetches everything the hot paths touch into
attributes, once; each hot path is one method whatever the run.
Mechanisms see the core through the protocols of :mod:`~qsim.model.context`.
"""

from __future__ import annotations

import functools
import math
from array import array
from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from typing import Protocol, cast

import numpy as np
import simpy
from simpy.events import Event

from qsim.model.dispatch import Dispatcher, Pool, make_picker
from qsim.model.lanes import Lanes
from qsim.model.limits import ConcurrencyLimit, Gate, RateLimit
from qsim.model.queues import Queues
from qsim.model.schedule import Alarm
from qsim.model.state import COMPLETED, JobTable
from qsim.model.timeseries import ChangeLog
from qsim.scenario import Scenario
from qsim.workload import JobDraws

__all__ = ["ModelCore", "Recorder", "Progress"]

Progress = Callable[[float], None]


class Recorder(Protocol):
    """What a run keeps of its attempts: records on or off (a strategy chosen once per run).

    ``started`` and ``completed`` run once per attempt, in the hot paths.
    """

    #: ``queued(q, depth, now)``: a job was put in queue ``q``'s waiting line (None: not needed).
    queued: Callable[[int, int, float], None] | None
    #: settled jobs between two calls of :meth:`tick` at most (``math.inf``: no periodic tick).
    every: float

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt of ``job`` (from queue ``q``) started on ``slot`` at ``now``."""

    def completed(self, job: int, slot: int, now: float) -> None:
        """The attempt on ``slot`` ended at ``now`` and ``job`` completed (runs without ``attempt_result``)."""

    def settled(self, job: int, outcome: int, now: float) -> None:
        """``job`` settled with ``outcome`` at ``now`` (through :meth:`ModelCore.settle`)."""

    def tick(self) -> None:
        """Called now and then (every ``every`` settled jobs at most, and at the end of the run)."""


class ModelCore:
    """The state and hot paths of one run (see the module docstring).

    ``records=False`` leaves the job table's record columns empty (a
    record-less core run).
    """

    def __init__(self, scenario: Scenario, arrivals: JobDraws, *, records: bool = True) -> None:
        self.scenario = scenario
        self.env = env = simpy.Environment()
        self.queue_names = [q.name for q in scenario.queues]
        self.type_names = [j.name for j in scenario.jobs]
        qindex = {name: i for i, name in enumerate(self.queue_names)}
        self.type_queue = [qindex[j.queue] for j in scenario.jobs]
        self.type_priority = [j.priority for j in scenario.jobs]
        types = arrivals.type
        self.jobs = jobs = JobTable(
            type_=types,
            queue=np.asarray(self.type_queue, dtype=np.int64)[types] if len(types) else [],
            priority=np.asarray(self.type_priority, dtype=np.int64)[types] if len(types) else [],
            enqueued=arrivals.time,
            service=arrivals.service,
            records=records,
        )

        # Lanes (qsim.model.lanes): one waiting line per queue, or per key value of a keyed queue.
        # "q" in the hot paths below is a lane; jobs.queue keeps the queue (records, time series).
        self.lanes = lanes = Lanes.of(scenario)
        self.lane_of: list[int] = jobs.queue  # each job's lane (the queue column itself unless keyed)
        if lanes.keyed:
            self.lane_of = np.asarray(lanes.of_type, dtype=np.int64)[types].tolist() if len(types) else []
        gates: list[list[Gate]] = [[] for _ in lanes.queue]
        for i, qs in enumerate(scenario.queues):
            shared = ConcurrencyLimit(qs.concurrency_limit) if qs.concurrency_limit is not None else None
            for lane in lanes.of_queue[i]:
                if shared is not None:
                    gates[lane].append(shared)
                if qs.rate_limit is not None:
                    gates[lane].append(RateLimit(qs.rate_limit.max, qs.rate_limit.per, env=env,
                                                 reopen=functools.partial(self._reopen, lane)))
        self.aging = [q.aging for q in scenario.queues]
        self.queues = Queues(len(lanes.queue), gates, [self.aging[q] for q in lanes.queue], lanes.family())

        pools: list[Pool] = []
        self.worker_names: list[str] = []
        slot = 0
        for i, spec in enumerate(scenario.pools):
            served = [qindex[name] for name in spec.queues]
            groups = lanes.served(served)
            picker = make_picker(spec.policy, served, [spec.weight(name) for name in spec.queues], self.queues,
                                 groups)
            pools.append(Pool(i, spec, [lane for g in groups for lane in g], slot, len(self.worker_names), picker))
            self.worker_names += [f"{spec.name}-{w}" for w in range(spec.workers)]
            slot += spec.slots
        self.n_slots = slot
        self.slot_worker = [p.slot_worker(s) for p in pools for s in p.slots]
        self.running = [-1] * slot  # job on each slot, -1 when free
        self.dispatcher = Dispatcher(pools, self.queues, slot, self.start_attempt)
        self.pools: Sequence[Pool] = self.dispatcher.pools
        self._alarms = [Alarm(env, self.attempt_ended, s) for s in range(slot)]  # each slot's attempt end
        self._set_end = [a.set for a in self._alarms]

        # Per job: the heap key of its queue (its priority; with aging, priority + ready / aging) and
        # how long its next attempt holds its slot (its service time; see set_timing). Each is the job
        # table's own column unless something makes it differ.
        self.key = cast("list[float]", jobs.priority)  # int priorities: keys as they are
        if any(a > 0 for a in self.aging):
            self.key = [self._key_of(job) for job in range(jobs.n)]
        self.hold: array[float] = jobs.service
        self._timing: tuple[float, float, list[float]] | None = None

        self.changes = ChangeLog()  # requeues: queue changes the job table cannot describe
        self.settled = 0
        self.done = Event(env)

        # Plug-in points, set before the run (see the module docstring), then bind().
        self.recorder: Recorder | None = None
        #: ``attempt_result(job, slot, now)`` settles the job or sends it back; None: every attempt succeeds.
        self.attempt_result: Callable[[int, int, float], None] | None = None
        self.on_settle: Callable[[int, int, float], None] | None = None  # flows: called as a job settles
        self.retired: list[bool] | None = None  # per slot: its process is stopping (takes no more jobs)
        self.slot_done: Callable[[int, float], None] | None = None  # an attempt ended on a retired slot

        self._progress: Progress | None = None
        self._progress_step = 1
        self._next_progress = math.inf
        self._check_at = 0.0

    # ------------------------------------------------------------------ setup

    def _key_of(self, job: int) -> float:
        a = self.aging[self.jobs.queue[job]]
        p = self.jobs.priority[job]
        return p + self.jobs.enqueued[job] / a if a > 0 else p

    def set_timing(self, fetch: float, ack: float, timeouts: Sequence[float]) -> None:
        """Attempts hold their slot ``fetch + min(service, timeout) + ack`` (timeout per type, 0: none)."""
        self._timing = (float(fetch), float(ack), list(timeouts))
        jobs = self.jobs
        svc = np.frombuffer(jobs.service, dtype=np.float64) if jobs.n else np.zeros(0)
        t = np.asarray(self._timing[2], dtype=np.float64)[np.asarray(jobs.type, dtype=np.int64)]
        run = np.where((t > 0) & (t < svc), t, svc) + ack
        self.hold = array("d", (fetch + run if fetch else run).tobytes())

    def _hold_of(self, type_: int, service: float) -> float:
        assert self._timing is not None
        fetch, ack, timeouts = self._timing
        t = timeouts[type_]
        run = (t if 0 < t < service else service) + ack
        return fetch + run if fetch else run

    def set_service(self, job: int, service: float) -> None:
        """The service time of the job's next attempt."""
        self.jobs.service[job] = service
        if self.hold is not self.jobs.service:
            self.hold[job] = self._hold_of(self.jobs.type[job], service)

    def add_job(self, type_: int, service: float, parent: int, now: float) -> int:
        """Add a job of type ``type_`` (a child of ``parent``) now, not yet waiting; returns its number."""
        jobs = self.jobs
        job = jobs.add(type_=type_, queue=self.type_queue[type_], priority=self.type_priority[type_],
                       enqueued=now, service=service, parent=parent)
        if self.lane_of is not jobs.queue:
            self.lane_of.append(self.lanes.of_type[type_])
        if self.key is not jobs.priority:
            self.key.append(self._key_of(job))
        if self.hold is not jobs.service:
            self.hold.append(self._hold_of(type_, service))
        return job

    def retime(self, job: int, now: float) -> None:
        """A drawn job arrived at ``now``, one ulp after its drawn time (see the arrival feed)."""
        self.jobs.enqueued[job] = now
        if self.key is not self.jobs.priority:
            self.key[job] = self._key_of(job)

    def add_worker(self, pool: Pool, name: str) -> int:
        """A new process named ``name`` in ``pool``; returns its index."""
        self.worker_names.append(name)
        return len(self.worker_names) - 1

    def add_slot(self, pool: Pool, worker: int) -> int:
        """A new slot of process ``worker`` in ``pool`` (not yet free); returns its id."""
        slot = self.n_slots
        self.n_slots += 1
        self.running.append(-1)
        self.slot_worker.append(worker)
        alarm = Alarm(self.env, self.attempt_ended, slot)
        self._alarms.append(alarm)
        self._set_end.append(alarm.set)
        self.dispatcher.pool_of_slot.append(pool)
        self.dispatcher.idle_since.append(self.env.now)
        pool.slots.append(slot)
        return slot

    def bind(self, progress: Progress | None = None) -> None:
        """Fetch what the hot paths use into attributes, once, after everything plugged in."""
        rec = self.recorder
        if rec is None:
            raise RuntimeError("ModelCore.bind: no recorder")
        jobs, queues, d = self.jobs, self.queues, self.dispatcher
        self._job_lane, self._key, self._hold = self.lane_of, self.key, self.hold
        self._heaps, self._active, self._gates, self._open = queues.heaps, queues.active, queues.gates, queues.open
        self._fill, self._offer = d.fill, d.offer
        self._pool_of_slot, self._idle_since = d.pool_of_slot, d.idle_since
        # the one pool serving each queue (None when several do: Dispatcher.offer chooses)
        self._solo = [pools[0] if len(pools) == 1 else None for pools in d.pools_of]
        self._running = self.running
        self._record_start, self._completed, self._queued = rec.started, rec.completed, rec.queued
        self._record_settle, self._tick, self._every = rec.settled, rec.tick, rec.every
        self._result, self._retired, self._slot_done = self.attempt_result, self.retired, self.slot_done
        self._progress = progress
        if progress is not None:
            self._progress_step = max(1, math.ceil(jobs.n / 100))
            self._next_progress = self._progress_step
        self._check_at = min(self._every, self._next_progress, jobs.n)

    # ------------------------------------------------------------------ hot paths

    def enqueue(self, job: int, now: float) -> None:
        """Job ``job`` becomes waiting now; offer its queue to the pools."""
        q = self._job_lane[job]
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
        queues, heaps, queue_of, key = self.queues, self._heaps, self._job_lane, self._key
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
        q = self._job_lane[job]
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
            self._slot_done(slot, now)  # type: ignore[misc]
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
        if self.on_settle is not None:  # flows: release or fail a parent, fan out (adds jobs first)
            self.on_settle(job, outcome, now)
        self.settled += 1
        if self.settled >= self._check_at:
            self._check()

    def _check(self) -> None:
        """Every so many settled jobs: the recorder's tick, progress, and the end of the run."""
        s, n = self.settled, self.jobs.n
        self._tick()
        if s >= self._next_progress:
            if self._progress is not None:
                self._progress(min(s / max(n, 1), 1.0))
            self._next_progress += self._progress_step
        if s == n and not self.done.triggered:
            self.done.succeed()
        self._check_at = min(s + self._every, self._next_progress, n if n > s else s + 1)

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
        queues, heaps, lane_of, key, queue_of = self.queues, self._heaps, self.lane_of, self._key, self.jobs.queue
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
        return self.running[slot]

    def cancel(self, slot: int) -> int:
        """Stop the attempt on ``slot`` (see :class:`~qsim.model.context.PoolContext`); its job, or -1."""
        job = self.running[slot]
        if job >= 0:
            self.running[slot] = -1
            self.queues.active[self.lane_of[job]] -= 1
        return job

    def lane(self, job: int) -> int:
        """The lane (waiting line) ``job`` joins: its queue's, or its key value's in a keyed queue."""
        return self.lane_of[job]

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
