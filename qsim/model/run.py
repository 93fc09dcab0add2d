"""One model run: the core, a recorder and the mechanisms wired together, and :func:`simulate`.

``Scenario -> Workload -> Model -> Records -> Summary``: :func:`simulate`
draws the scenario's :class:`~qsim.spec.workload.Workload` (the very jobs,
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
time series); with ``records=False``, :class:`~qsim.model.spans.SpanRecords`
logs each attempt's span only and computes the exact Summary from column
views. The core is built with the mechanisms (:func:`_core`;
what the core calls of each: :mod:`~qsim.model.hooks`):

- :mod:`~qsim.model.retries` — ``attempt_result``: ok, failed, timeout
  (an attempt holds its slot ``min(service, timeout)``), backoff, the DLQ,
  from the workload's draws (:mod:`~qsim.model.draws` maps jobs to them);
  a run where no attempt can fail (no ``fail_prob``, ``poison_prob``,
  ``timeout`` or flow: e.g. an autoscaled day) has none, and its attempts
  complete in the core as a core run's do (the recorder ends each row ``ok``);
- :mod:`~qsim.model.limits` — the sliding-window rate limit (a gate with a
  timer); :mod:`~qsim.model.dispatch` — priority aging (the core's heap keys);
- :mod:`~qsim.model.events` — ``events``: sigkill (stalled recovery), sigterm
  (drain, cut-off, hand-back), start (new processes and slots); its
  ``retired`` slots never rejoin their pool;
- :mod:`~qsim.model.flows` — ``flows``: the arrivals' entry and what follows
  a settled job: flow parents in waiting-children, fan-out children;
- ``timing`` (:mod:`~qsim.model.timing`): ``fetch_overhead``: each attempt's handler starts that long after its slot
  took the job (the slot is held meanwhile);
- ``ack_overhead``: each attempt's result reaches Redis that long after its
  handler returned (or failed, or timed out): the slot is held meanwhile, and
  the attempt's end (and the job's ``finished``) is that later time. With
  ``overhead_by_load`` both are read from the table at the scenario's offered
  utilization (:func:`qsim.spec.offered_load.engine_overhead`; :attr:`Model.overhead` says which);
- ``pickup_latency``: every drawn arrival becomes takeable that long after its
  enqueue, holding no slot: the core is fed the arrivals that much later and
  the job table gets the drawn enqueue times back before the records are read
  (a full run), so it is part of each wait. Children and retries are taken at once.

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

import os
from collections.abc import Callable
from functools import partial

import numpy as np
import pandas as pd

from qsim.model.attempts import AttemptLog
from qsim.model.autoscaling import AutoscaledPools, Recommenders, extra_horizon
from qsim.model.core import ModelCore, Progress
from qsim.model.draws import DrawIndex
from qsim.model.events import PoolEvents
from qsim.model.flows import Flows
from qsim.model.recorders import AttemptRecords, JobRecords
from qsim.model.recordless import StreamRecords
from qsim.model.result import LazyFrames, ModelResult, core_attempts
from qsim.model.retries import Retries, backoff_delay
from qsim.model.spans import SpanLog, SpanRecords
from qsim.model.support import check_supported
from qsim.model.timeseries import Changes, timeseries_frame
from qsim.model.timing import Timing
from qsim.results.records import Records
from qsim.results.summary import Summary, summarize
from qsim.scenarios import load
from qsim.spec.offered_load import AppliedOverhead, engine_overhead
from qsim.spec.scenario import Scenario
from qsim.spec.workload import JobDraws, JobPlan, Workload, draw_workload

__all__ = ["simulate", "ModelResult", "Model", "needs_full"]


def simulate(scenario: Scenario | str | os.PathLike[str], *, seed: int | None = None, max_jobs: int | None = None,
             progress: Progress | None = None, records: bool = True,
             recommend: Recommenders | None = None) -> ModelResult:
    """Simulate a scenario with the SimPy model.

    Args:
        scenario: the queue system to run: a Scenario, a TOML path or a built-in name (``qsim.simulate``
            also takes None for ``workshop``).
        seed: overrides ``scenario.seed``; the same seed gives identical records.
        max_jobs: stop arrivals after this many jobs (the earliest arrivals over all types).
        progress: called now and then with the fraction (0..1) of jobs settled, last with 1.0.
        records: False keeps only what the Summary needs (for sweeps and long runs):
            ``result.records`` is None and ``result.jobs`` and ``result.timeseries`` raise
            :class:`~qsim.model.result.RecordsNotKept`. A core run streams its statistics
            (:mod:`qsim.model.recordless`: p50/p95/p99 within
            :data:`~qsim.results.summary.STREAM_REL_ERROR`, about 0.6%, of the exact ones; every
            other figure exact); a run with any other mechanism computes the exact Summary
            from the job columns and each attempt's start and end (:mod:`qsim.model.spans`:
            no job ids, frames or per-attempt job, worker and result).
        recommend: per autoscaled pool whose policy scales on ``qsim advise``'s
            recommendation (``qsim``), the function making it
            (:class:`qsim.advise.load.LoadAdvisor`; ``qsim simulate`` and ``qsim.simulate`` pass it).

    Raises:
        ScenarioError: no such file or built-in name, or not a valid scenario.
        NotSupportedError: the scenario uses a feature the model cannot run yet.
        ValueError: ``seed`` or ``max_jobs`` is negative.
    """
    if not isinstance(scenario, Scenario):
        scenario = load(os.fspath(scenario))
    check_supported(scenario)
    # (no name for the workload: its arrays are freed once the model is built, see qsim.model.recordless)
    return Model(draw_workload(scenario, seed=seed, max_jobs=max_jobs), records=records,
                 recommend=recommend).run(progress)


def needs_full(scenario: Scenario) -> bool:
    """Whether a scenario uses a mechanism beyond the core (then every attempt is logged)."""
    eng = scenario.engine
    return (any(j.fail_prob > 0 or j.poison_prob > 0 or j.timeout > 0 or j.fan_out is not None
                or j.flow is not None for j in scenario.jobs)
            or any(q.rate_limit is not None or q.aging > 0 for q in scenario.queues)
            or bool(scenario.events) or bool(scenario.autoscalers) or eng.fetch_overhead > 0 or eng.ack_overhead > 0
            or bool(eng.overhead_by_load) or eng.pickup_latency > 0)


class Model:
    """One run of a scenario over drawn jobs (see the module docstring).

    ``Model(workload)`` plays a drawn :class:`~qsim.spec.workload.Workload` (what
    :func:`simulate` does); tests and notebooks may build the arrivals by hand
    (arrival times, type indexes, first service times) and run them::

        result = Model(scenario, JobDraws(time=t, type=k, service=s), seed=0).run()

    A model runs once. ``records=False``: see :func:`simulate`.
    """

    def __init__(self, scenario: Scenario | Workload, draws: JobDraws | None = None, *, seed: int | None = None,
                 records: bool = True, recommend: Recommenders | None = None) -> None:
        # The workload is not kept: the core copies what it needs (its drawn arrays are freed).
        workload = _workload(scenario, draws, seed)
        self.scenario = s = workload.scenario
        self.seed = workload.seed
        self.keep_records = records
        #: The engine overhead applied (the scalars, or overhead_by_load at the offered utilization).
        self.overhead = engine_overhead(s)
        self.pickup = s.engine.pickup_latency
        arrivals = workload.arrivals
        if self.pickup > 0:  # the core is fed each arrival pickup_latency late (see the module docstring)
            arrivals = JobDraws(time=arrivals.time + self.pickup, type=arrivals.type, service=arrivals.service)
        self.core = core = _core(workload, records, arrivals, self.overhead, recommend)
        self.jobs = core.jobs
        if needs_full(s):
            self.horizon = _full_horizon(s, workload.attempts, arrivals, self.overhead) + extra_horizon(s)
        else:
            last = float(arrivals.time[-1]) if len(arrivals) else 0.0
            self.horizon = max(s.duration, last) + float(arrivals.service.sum()) + 1.0
        self._ran = False
        self._enqueued_back = self.pickup <= 0

    @classmethod
    def from_workload(cls, workload: Workload, *, records: bool = True,
                      recommend: Recommenders | None = None) -> Model:
        """A run of ``workload`` (attempt draws it holds already are not drawn again); ``Model(workload)``."""
        return cls(workload, records=records, recommend=recommend)

    # ------------------------------------------------------------------ run

    def run(self, progress: Progress | None = None) -> ModelResult:
        """Run to the end (every job settled, or the horizon) and build the result."""
        if self._ran:
            raise RuntimeError("a Model runs once; build a new one")
        self._ran = True
        self.core.run(self.horizon, progress)
        if progress is not None:
            progress(1.0)
        return self.result()

    def timeseries_changes(self) -> list[Changes]:
        """Every change of queue depth and active jobs (see :mod:`qsim.model.timeseries`)."""
        core = self.core
        assert isinstance(core.recorder, JobRecords)
        entered = np.ones(self.jobs.n, dtype=bool)
        entered[core.arrived:core.drawn] = False  # drawn jobs still to come when the run stopped
        if core.flows is not None:  # flow parents joined their queue when released (a logged requeue)
            entered[np.asarray(core.flows.parents, dtype=np.int64)] = False
        return core.recorder.changes(entered)

    def result(self) -> ModelResult:
        """Records, time series and Summary of the run (its frames view the run's columns: after :meth:`run`)."""
        if not self._ran:
            raise RuntimeError("run the model first: Model.run() returns its result")
        s, core = self.scenario, self.core
        rec = core.recorder
        if not self._enqueued_back:  # the drawn enqueue times, before the pickup latency (once)
            self._enqueued_back = True
            enq = np.frombuffer(core.jobs.enqueued, dtype=np.float64)
            enq[:core.drawn] -= self.pickup
        if isinstance(rec, StreamRecords):
            return ModelResult(scenario=s, seed=self.seed, records=None, summary=rec.summary())
        slots: tuple[tuple[float, int], ...] = ((0.0, core.n_slots),)
        workers: dict[str, tuple[tuple[float, int], ...]] = {p.name: ((0.0, p.workers),) for p in s.pools}
        if isinstance(rec, AttemptRecords) and core.events is not None:
            slots = tuple(core.events.slot_steps)
            workers = {name: tuple(steps) for name, steps in core.events.pool_steps.items()}
        if isinstance(rec, SpanRecords):  # records off, a full run: the exact Summary from column views
            records = rec.records(type_names=core.type_names, queue_names=core.queue_names, slots=slots,
                                  workers=workers)
            return ModelResult(scenario=s, seed=self.seed, records=None, summary=self._summary(records))
        jobs = core.jobs.frame(type_names=core.type_names, queue_names=core.queue_names,
                               worker_names=core.worker_names)
        extra: dict[str, Callable[[], pd.DataFrame]] = {
            "timeseries": lambda: timeseries_frame(core.queue_names, self.timeseries_changes())}
        if isinstance(rec, AttemptRecords):
            attempts = rec.log.frame(core.worker_names, jobs["job_id"].to_numpy())
            if core.events is not None:
                extra["drains"] = core.events.frame
        else:  # one attempt per job: the job table says it all
            attempts = core_attempts(jobs)
        records = Records(jobs=jobs, attempts=attempts, slots=slots, extra=LazyFrames(extra), workers=workers)
        summary = self._summary(records)
        return ModelResult(scenario=s, seed=self.seed, records=records if self.keep_records else None, summary=summary)

    def _summary(self, records: Records) -> Summary:
        """The Summary of ``records`` (this run's), with the autoscalers' section when there are any."""
        s, core = self.scenario, self.core
        summary = summarize(records, scenario=s.name, source="model", seed=self.seed, warmup=s.warmup,
                            window=s.window_length)
        if isinstance(core.events, AutoscaledPools):
            summary["autoscaling"] = core.events.section()
        return summary


def _workload(scenario: Scenario | Workload, draws: JobDraws | None, seed: int | None) -> Workload:
    """``Model``'s two forms: a drawn workload, or a scenario with hand-made arrivals and a seed."""
    if isinstance(scenario, Workload):
        if draws is not None or seed is not None:
            raise TypeError("Model(workload) takes no draws or seed: the workload holds them")
        return scenario
    if draws is None or seed is None:
        raise TypeError("Model(scenario, draws, seed=...) needs the drawn arrivals and a seed")
    return Workload(scenario, seed, draws)


def _core(workload: Workload, records: bool, arrivals: JobDraws, overhead: AppliedOverhead,
          recommend: Recommenders | None = None) -> ModelCore:
    """The core of a run of ``workload`` fed ``arrivals``, with its recorder and (a full run) its mechanisms
    (module docstring)."""
    s, seed = workload.scenario, workload.seed
    if not needs_full(s):  # a core run: records on, or streamed statistics (records=False)
        return ModelCore(s, arrivals, recorder=JobRecords if records else partial(StreamRecords, seed=seed),
                         records=records)
    log = AttemptLog() if records else SpanLog()  # the attempt log the mechanisms share
    flows = any(j.flow is not None or j.fan_out is not None for j in s.jobs)
    fails = any(j.fail_prob > 0 or j.poison_prob > 0 or j.timeout > 0 for j in s.jobs)
    draws = DrawIndex(workload) if fails or flows else None  # each job's draws (every attempt succeeds: unread)
    return ModelCore(
        s, arrivals, timing=Timing.of(s, overhead.fetch, overhead.ack),
        recorder=(partial(AttemptRecords, log=log, fetch_overhead=overhead.fetch) if not isinstance(log, SpanLog)
                  else partial(SpanRecords, log=log, fetch_overhead=overhead.fetch)),
        attempt_result=partial(Retries, draws=draws, log=log, scenario=s, seed=seed) if draws is not None else None,
        flows=partial(Flows, draws=draws, scenario=s) if flows and draws is not None else None,
        events=(partial(AutoscaledPools, log=log, scenario=s, seed=seed, recommend=recommend) if s.autoscalers
                else partial(PoolEvents, log=log, scenario=s) if s.events else None))


def _full_horizon(s: Scenario, plan: JobPlan, arrivals: JobDraws, applied: AppliedOverhead) -> float:
    """A time by which every job could have settled even on one slot (see the module docstring)."""
    work = backoff = rated = 0.0
    overhead = applied.fetch + applied.ack
    for k, table in enumerate([*plan.own, *plan.child]):  # arriving jobs' draws per type, then children's
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
