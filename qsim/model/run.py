"""One model run: the core, a recorder and the mechanisms wired together, and :func:`simulate`.

``Scenario -> Workload -> Model -> Records -> Summary``: :func:`simulate`
draws the scenario's :class:`~qsim.workload.Workload` (the very jobs,
attempts and failures the engine harness runs with the same seed) and plays
it on a :class:`~qsim.model.core.ModelCore`.

Event budget (what keeps the model fast): one SimPy event per distinct
arrival time and one per attempt, each with a plain callback; no process per
job and no ``simpy.Resource``. Everything else (dispatch, gates, records)
happens inside those callbacks at the same simulated time. The events are
not even new objects: the arrival feed and each slot set one
:class:`~qsim.model.schedule.Alarm` again and again.

Core and full runs: a scenario that uses nothing beyond pools, priorities,
policies and the concurrency limit is a *core* run: one attempt per job, no
mechanism plugged in, and its recorder is :class:`~qsim.model.recorders.JobRecords`
(its attempts table is derived from the job table) or, with ``records=False``,
:class:`~qsim.model.recordless.StreamRecords` (statistics only). Any other
mechanism (:func:`needs_full`) makes a *full* run: every attempt is logged
(:class:`~qsim.model.recorders.AttemptRecords`), every requeue too (for the
time series), and the mechanisms plug into the core:

- :mod:`~qsim.model.retries` — ``attempt_result``: ok, failed, timeout
  (an attempt holds its slot ``min(service, timeout)``), backoff, the DLQ,
  from the workload's draws (:mod:`~qsim.model.draws` maps jobs to them);
- :mod:`~qsim.model.limits` — the sliding-window rate limit (a gate with a
  timer); :mod:`~qsim.model.dispatch` — priority aging (the core's heap keys);
- :mod:`~qsim.model.events` — sigkill (stalled recovery), sigterm (drain,
  cut-off, hand-back), start (new processes and slots); the core's
  ``retired`` slots never rejoin their pool;
- :mod:`~qsim.model.flows` — the arrivals' entry and ``on_settle``: flow
  parents in waiting-children, fan-out children;
- ``fetch_overhead``: each attempt's handler starts that long after its slot
  took the job (the slot is held meanwhile);
- ``ack_overhead``: each attempt's result reaches Redis that long after its
  handler returned (or failed, or timed out): the slot is held meanwhile, and
  the attempt's end (and the job's ``finished``) is that later time. With
  ``overhead_by_load`` both are read from the table at the scenario's offered
  utilization (:func:`qsim.load.engine_overhead`; :attr:`Model.overhead` says which);
- ``pickup_latency``: every drawn arrival becomes takeable that long after its
  enqueue (the feed runs late by it; its ``enqueued`` stays the drawn time),
  holding no slot: part of each wait. Children and retries are taken at once.

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

from collections.abc import Callable

import numpy as np
import pandas as pd
from simpy.events import Event, Timeout

from qsim.load import engine_overhead
from qsim.model.arrivals import ArrivalFeed
from qsim.model.core import ModelCore, Progress
from qsim.model.draws import DrawIndex
from qsim.model.events import PoolEvents
from qsim.model.flows import Flows
from qsim.model.recordless import StreamRecords
from qsim.model.recorders import AttemptRecords, JobRecords
from qsim.model.result import LazyFrames, ModelResult, core_attempts
from qsim.model.retries import Retries, backoff_delay
from qsim.model.support import check_supported
from qsim.model.timeseries import Changes, timeseries_frame
from qsim.records import Records
from qsim.scenario import Scenario
from qsim.summary import summarize
from qsim.workload import JobDraws, Workload, draw_workload

__all__ = ["simulate", "ModelResult", "Model", "needs_full"]


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
    # (no name for the workload: its arrays are freed once the model is built, see qsim.model.recordless)
    return Model.from_workload(draw_workload(scenario, seed=seed, max_jobs=max_jobs), records=records).run(progress)


def needs_full(scenario: Scenario) -> bool:
    """Whether a scenario uses a mechanism beyond the core (then every attempt is logged)."""
    return (any(j.fail_prob > 0 or j.poison_prob > 0 or j.timeout > 0 or j.fan_out is not None
                or j.flow is not None for j in scenario.jobs)
            or any(q.rate_limit is not None or q.aging > 0 for q in scenario.queues)
            or bool(scenario.events) or scenario.engine.fetch_overhead > 0 or scenario.engine.ack_overhead > 0
            or bool(scenario.engine.overhead_by_load))


class Model:
    """One run of a scenario over drawn jobs (see the module docstring).

    :func:`simulate` plays a drawn :class:`~qsim.workload.Workload`
    (:meth:`from_workload`); tests and notebooks may build the arrivals by
    hand (arrival times, type indexes, first service times) and run them::

        result = Model(scenario, JobDraws(time=t, type=k, service=s), seed=0).run()

    A model runs once. ``records=False``: see :func:`simulate`.
    """

    def __init__(self, scenario: Scenario, draws: JobDraws, *, seed: int, records: bool = True) -> None:
        self._build(Workload(scenario, seed, draws), records)

    @classmethod
    def from_workload(cls, workload: Workload, *, records: bool = True) -> Model:
        """A run of ``workload`` (attempt draws it holds already are not drawn again)."""
        model = cls.__new__(cls)
        model._build(workload, records)
        return model

    def _build(self, workload: Workload, records: bool) -> None:
        # The workload is not kept: the core copies what it needs (its drawn arrays are freed).
        self.scenario = s = workload.scenario
        self.seed = workload.seed
        arrivals = workload.arrivals
        self.full = full = needs_full(s)
        self.keep_records = records
        self.streaming = streaming = not records and not full
        self.core = core = ModelCore(s, arrivals, records=not streaming)
        self.env = core.env
        self.jobs = core.jobs
        self.flows: Flows | None = None
        self.events: PoolEvents | None = None
        self.recorder: JobRecords | StreamRecords
        on_arrival: Callable[[int, float], None] = core.enqueue
        on_batch: Callable[[list[int], float], None] = core.enqueue_batch
        last = float(arrivals.time[-1]) if len(arrivals) else 0.0
        pickup = s.engine.pickup_latency
        self.horizon = max(s.duration, last) + pickup + float(arrivals.service.sum()) + 1.0
        #: The engine overhead applied (the scalars, or overhead_by_load at the offered utilization).
        self.overhead = eng = engine_overhead(s)
        if full:
            draws = DrawIndex(workload)
            self.recorder = rec = AttemptRecords(core, eng.fetch)
            if eng.fetch > 0 or eng.ack > 0 or any(j.timeout > 0 for j in s.jobs):
                core.set_timing(eng.fetch, eng.ack, [j.timeout for j in s.jobs])
            core.attempt_result = Retries(core, draws, rec, s, self.seed)
            if any(j.flow is not None or j.fan_out is not None for j in s.jobs):
                self.flows = Flows(core, draws, s)
                core.on_settle = self.flows.settled
                on_arrival, on_batch = self.flows.arrive, self.flows.arrive_batch
            if s.events:
                self.events = PoolEvents(core, rec, s)
                core.retired, core.slot_done = self.events.retired, self.events.slot_done
            self.horizon = _full_horizon(s, draws, arrivals, eng.fetch + eng.ack) + pickup
        elif streaming:
            self.recorder = StreamRecords(core, self.seed)
        else:
            self.recorder = JobRecords(core)
        core.recorder = self.recorder
        # a record-less run's feed reads the enqueued column itself (one O(jobs) array less)
        times = core.jobs.enqueued if streaming else arrivals.time
        retime = core.retime
        if pickup > 0:  # takeable pickup_latency after the drawn enqueue, which the job keeps (< its start)
            times, retime = np.asarray(times, dtype=np.float64) + pickup, _keep_enqueued
        self.feed = ArrivalFeed(core.env, times, on_arrival=on_arrival, on_batch=on_batch, retime=retime)
        self._ran = False

    # ------------------------------------------------------------------ run

    def run(self, progress: Progress | None = None) -> ModelResult:
        """Run to the end (every job settled, or the horizon) and build the result."""
        if self._ran:
            raise RuntimeError("a Model runs once; build a new one")
        self._ran = True
        core, env = self.core, self.env
        core.bind(progress)
        if isinstance(self.recorder, StreamRecords):
            self.recorder.start()
        if core.jobs.n == 0:
            core.done.succeed()
        Timeout(env, self.horizon).callbacks.append(self._at_horizon)
        if self.events is not None:
            self.events.start()
        self.feed.start()
        env.run(until=core.done)
        if progress is not None:
            progress(1.0)
        return self.result()

    def _at_horizon(self, _event: Event) -> None:
        if not self.core.done.triggered:
            self.core.done.succeed()

    def timeseries_changes(self) -> list[Changes]:
        """Every change of queue depth and active jobs (see :mod:`qsim.model.timeseries`)."""
        assert isinstance(self.recorder, JobRecords)
        entered = np.ones(self.jobs.n, dtype=bool)
        entered[self.feed.next:self.feed.n] = False  # drawn jobs still to come when the run stopped
        if self.flows is not None:  # flow parents joined their queue when released (a logged requeue)
            entered[np.asarray(self.flows.parents, dtype=np.int64)] = False
        return self.recorder.changes(entered)

    def result(self) -> ModelResult:
        """Records, time series and Summary of the run so far."""
        s, core, rec = self.scenario, self.core, self.recorder
        if isinstance(rec, StreamRecords):
            return ModelResult(scenario=s, seed=self.seed, records=None, summary=rec.summary())
        jobs = core.jobs.frame(type_names=core.type_names, queue_names=core.queue_names,
                               worker_names=core.worker_names)
        extra: dict[str, Callable[[], pd.DataFrame]] = {
            "timeseries": lambda: timeseries_frame(core.queue_names, self.timeseries_changes())}
        slots: tuple[tuple[float, int], ...] = ((0.0, core.n_slots),)
        if isinstance(rec, AttemptRecords):
            attempts = rec.log.frame(core.worker_names, jobs["job_id"].to_numpy())
            if self.events is not None:
                slots = tuple(self.events.slot_steps)
                extra["drains"] = self.events.frame
        else:  # one attempt per job: the job table says it all
            attempts = core_attempts(jobs)
        records = Records(jobs=jobs, attempts=attempts, slots=slots, extra=LazyFrames(extra))
        summary = summarize(records, scenario=s.name, source="model", seed=self.seed, warmup=s.warmup)
        return ModelResult(scenario=s, seed=self.seed, records=records if self.keep_records else None, summary=summary)


def _keep_enqueued(job: int, now: float) -> None:
    """The feed's ``retime`` under a pickup latency: the job keeps its drawn enqueue time (before ``now``)."""


def _full_horizon(s: Scenario, draws: DrawIndex, arrivals: JobDraws, overhead: float) -> float:
    """A time by which every job could have settled even on one slot (see the module docstring)."""
    work = backoff = rated = 0.0
    for k, table in enumerate(draws.tables):
        if table is None or not len(table):
            continue
        job = s.jobs[k % len(s.jobs)]
        svc = table.service if job.timeout <= 0 else np.minimum(table.service, job.timeout)
        n, a = table.service.shape
        work += float(svc.sum()) + n * a * overhead
        backoff += n * sum(backoff_delay(job.backoff, i, 0.0) for i in range(1, a))
        rl = s.queue(job.queue).rate_limit
        if rl is not None:
            rated += n * a * rl.per / rl.max
    eng = s.engine
    events = sum(e.grace if e.kind == "sigterm" else eng.lock_duration + eng.stalled_interval for e in s.events)
    last = max([s.duration, float(arrivals.time[-1]) if len(arrivals) else 0.0,
                *(e.at + eng.start_delay for e in s.events)])
    return last + work + backoff + rated + events + 1.0
