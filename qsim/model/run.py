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

Everything per job lives in :class:`~qsim.model.state.JobTable` (columns, no
object per job); gates (:mod:`~qsim.model.limits`) close and reopen queues;
the dispatcher (:mod:`~qsim.model.dispatch`) owns the free slots.

Drain and horizon: arrivals happen in ``[0, duration)``; the run continues
after ``duration`` until every job has settled. As a guard (e.g. a pool with
no workers), it stops at the horizon ``duration + (total service time of all
jobs) + 1 s`` — by then even a single slot working from ``duration`` on would
have finished every job — and jobs not done are ``unfinished`` (their
``finished`` is NaN; a job running at the horizon keeps its ``started``).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

import numpy as np
import pandas as pd
import simpy
from simpy.events import Event, Timeout

from qsim.model.arrivals import ArrivalFeed, JobDraws, draw_jobs
from qsim.model.dispatch import Dispatcher, Pool, make_picker
from qsim.model.limits import ConcurrencyLimit, Gate
from qsim.model.queues import Queues
from qsim.model.state import COMPLETED, JobTable
from qsim.model.support import check_supported
from qsim.model.timeseries import Changes, ChangeLog, timeseries_frame
from qsim.records import Records
from qsim.scenario import Scenario
from qsim.summary import summarize

__all__ = ["simulate", "ModelResult", "Model"]

Progress = Callable[[float], None]


def _same(frame: pd.DataFrame) -> pd.DataFrame:
    return frame


class LazyFrames(Mapping[str, pd.DataFrame]):
    """A read-only mapping of DataFrames, each built on first access (then kept).

    ``records.extra["timeseries"]`` costs nothing until someone reads it, so
    sweeps that only need the Summary don't pay for it.
    """

    def __init__(self, builders: Mapping[str, Callable[[], pd.DataFrame]]) -> None:
        self._builders = dict(builders)
        self._frames: dict[str, pd.DataFrame] = {}

    def __getitem__(self, key: str) -> pd.DataFrame:
        if key not in self._frames:
            self._frames[key] = self._builders[key]()
        return self._frames[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __getstate__(self) -> dict[str, Any]:
        # pickling (e.g. results sent back from a process pool) builds every frame first
        return {"frames": {key: self[key] for key in self._builders}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._frames = dict(state["frames"])
        self._builders = {key: functools.partial(_same, frame) for key, frame in self._frames.items()}

    def __len__(self) -> int:
        return len(self._builders)


@dataclass(frozen=True)
class ModelResult:
    """What one model run produced."""

    scenario: Scenario
    seed: int
    records: Records
    summary: dict[str, Any]

    @property
    def jobs(self) -> pd.DataFrame:
        """The per-job records (``records.jobs``)."""
        return self.records.jobs

    @property
    def timeseries(self) -> pd.DataFrame:
        """Queue depth and active jobs per queue over time (see :mod:`qsim.model.timeseries`)."""
        return self.records.extra["timeseries"]


def simulate(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None,
             progress: Progress | None = None) -> ModelResult:
    """Simulate a scenario with the SimPy model.

    Args:
        scenario: the queue system to run.
        seed: overrides ``scenario.seed``; the same seed gives identical records.
        max_jobs: stop arrivals after this many jobs (the earliest arrivals over all types).
        progress: called now and then with the fraction (0..1) of jobs settled, last with 1.0.

    Raises:
        NotSupportedError: the scenario uses a feature the model cannot run yet.
        ValueError: ``seed`` or ``max_jobs`` is negative.
    """
    check_supported(scenario)
    seed = scenario.seed if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    seed = int(seed)
    draws = draw_jobs(scenario, seed=seed, max_jobs=max_jobs)
    return Model(scenario, draws, seed=seed).run(progress)


class Model:
    """One run of a scenario over drawn jobs (see the module docstring).

    :func:`simulate` draws the jobs with :func:`~qsim.model.arrivals.draw_jobs`;
    tests and notebooks may build a :class:`~qsim.model.arrivals.JobDraws` by
    hand (arrival times, type indexes, service times) and run it::

        result = Model(scenario, JobDraws(time=t, type=k, service=s), seed=0).run()

    A model runs once.
    """

    def __init__(self, scenario: Scenario, draws: JobDraws, *, seed: int) -> None:
        self.scenario = scenario
        self.seed = seed
        self.env = env = simpy.Environment()
        self.queue_names = [q.name for q in scenario.queues]
        self.type_names = [j.name for j in scenario.jobs]
        qindex = {name: i for i, name in enumerate(self.queue_names)}
        type_queue = [qindex[j.queue] for j in scenario.jobs]
        type_priority = [j.priority for j in scenario.jobs]

        types = draws.type
        self.jobs = JobTable(
            type_=types,
            queue=[type_queue[k] for k in types.tolist()],
            priority=[type_priority[k] for k in types.tolist()],
            enqueued=draws.time,
            service=draws.service,
        )

        gates: list[list[Gate]] = [[] for _ in scenario.queues]
        for i, qs in enumerate(scenario.queues):
            if qs.concurrency_limit is not None:
                gates[i].append(ConcurrencyLimit(qs.concurrency_limit))
        self.queues = Queues(len(scenario.queues), gates)

        pools: list[Pool] = []
        self.worker_names: list[str] = []
        slot = 0
        for i, spec in enumerate(scenario.pools):
            served = [qindex[name] for name in spec.queues]
            picker = make_picker(spec.policy, served, [spec.weight(name) for name in spec.queues], self.queues)
            pools.append(Pool(i, spec, served, slot, len(self.worker_names), picker))
            self.worker_names += [f"{spec.name}-{w}" for w in range(spec.workers)]
            slot += spec.slots
        self.n_slots = slot
        self.slot_worker = [p.slot_worker(s) for p in pools for s in p.slots]
        self.running = [-1] * slot  # job on each slot, -1 when free
        self.dispatcher = Dispatcher(pools, self.queues, slot, self.start_attempt)

        self.changes = ChangeLog()  # queue changes the job table cannot describe (none in the core)
        self.feed = ArrivalFeed(env, draws.time, on_arrival=self.enqueue, on_batch=self.enqueue_batch,
                                arrived=self.jobs.enqueued)
        self.settled = 0
        self.done = Event(env)
        last = float(draws.time[-1]) if len(draws) else 0.0
        self.horizon = max(scenario.duration, last) + float(draws.service.sum()) + 1.0
        self._progress: Progress | None = None
        self._next_tick = math.inf
        self._tick = 1
        self._ran = False
        # Hook for the mechanisms that decide how an attempt ended (retries, timeouts):
        # ``attempt_result(job, slot, now)`` settles the job or sends it back. None: every
        # attempt succeeds, and attempt_ended settles the job as completed itself.
        self.attempt_result: Callable[[int, int, float], None] | None = None
        self._bind()

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
        env = self.env
        now = env.now
        if self._attempts[job] == 0:
            self._started[job] = now
        self._attempts[job] += 1
        self._worker[job] = self._slot_worker[slot]
        self._active[q] += 1
        if self._gates[q]:
            self.queues.gates_started(q, now)
        self._running[slot] = job
        Timeout(env, self._service[job], slot).callbacks.append(self._on_end)

    def attempt_ended(self, event: Event) -> None:
        """Callback of an attempt's end: free the slot, settle the job, dispatch the next."""
        slot = event._value
        job = self.running[slot]
        if job < 0:  # the attempt was cancelled (crash, shutdown)
            return
        self.running[slot] = -1
        now = self.env.now
        q = self._job_queue[job]
        self._active[q] -= 1
        reopened = self.queues.gates_ended(q, now) if self._gates[q] else False
        if self.attempt_result is None:  # no mechanism can fail an attempt: it succeeded
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
        self.settled += 1
        if self.settled >= self._next_tick:
            self._report()
        if self.settled == self.jobs.n:
            self.done.succeed()

    def _report(self) -> None:
        if self._progress is not None:
            self._progress(min(self.settled / max(self.jobs.n, 1), 1.0))
        self._next_tick += self._tick

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
            self._next_tick = self._tick
        if self.jobs.n == 0:
            self.done.succeed()
        Timeout(env, self.horizon).callbacks.append(self._at_horizon)
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
        jobs = self.jobs.frame(type_names=self.type_names, queue_names=self.queue_names,
                               worker_names=self.worker_names)
        records = Records(jobs=jobs, slots=((0.0, self.n_slots),), extra=LazyFrames(
            {"timeseries": lambda: timeseries_frame(self.queue_names, self.timeseries_changes())}))
        summary = summarize(records, scenario=s.name, source="model", seed=self.seed, warmup=s.warmup)
        return ModelResult(scenario=s, seed=self.seed, records=records, summary=summary)
