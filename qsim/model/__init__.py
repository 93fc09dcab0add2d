"""The SimPy model of a Redis-backed job-queue system.

``simulate(scenario)`` runs a :class:`~qsim.spec.scenario.Scenario` and returns a
:class:`ModelResult`: per-job records, a time series of queue depth and active
jobs per queue, and the Summary (docs/reference/summary.md)::

    from qsim.model import simulate
    result = simulate(scenario, seed=7, max_jobs=None, progress=None)
    result.jobs, result.timeseries, result.summary
    simulate(scenario, records=False).summary   # only the Summary (sweeps, long runs): flat memory

The jobs a run plays are drawn once, before it, by :mod:`qsim.spec.workload` (the
same draws the engine harness runs). The model is a small core plus
mechanisms:

- :mod:`~qsim.model.core` — :class:`~qsim.model.core.ModelCore`: clock, job table, queues,
  dispatcher, slots and the hot paths (enqueue, start and end of an attempt, settle);
- :mod:`~qsim.model.context` — the small typed contexts the mechanisms get of the core;
- :mod:`~qsim.model.hooks` — what the core calls of its recorder and mechanisms (all handed to its constructor);
- :mod:`~qsim.model.timing` — how long an attempt holds its slot (engine overheads, timeouts);
- :mod:`~qsim.model.schedule` — every use of SimPy internals (reusable alarms);
- :mod:`~qsim.model.recorders` / :mod:`~qsim.model.recordless` — records on / off, the
  core's two recorder strategies (``records=False`` core runs: streamed statistics, no records);
- :mod:`~qsim.model.spans` — records off in a full run: the exact Summary from the job columns and
  each attempt's span (no ids, frames or per-attempt job, worker and result);
- :mod:`~qsim.model.arrivals` — the arrival feed;
- :mod:`~qsim.model.queues` — waiting lines (priority, FIFO within a level; put-backs at the
  front of their level), per-lane gates;
- :mod:`~qsim.model.lanes` — a keyed rate limit's queue split into one lane (and window) per key value;
- :mod:`~qsim.model.limits` — gates: the global per-queue concurrency limit, the sliding-window rate limit;
- :mod:`~qsim.model.dispatch` — pools, slots, policies (priority, ordered, smooth WRR), priority aging;
- :mod:`~qsim.model.draws` — which of the workload's attempt draws each job plays;
- :mod:`~qsim.model.retries` — failures, timeouts, backoff, the dead-letter queue;
- :mod:`~qsim.model.attempts` — the per-attempt log;
- :mod:`~qsim.model.events` — crashes and stalled recovery (the engine's lock renewal and check phase),
  graceful shutdown (drain records), scale-up;
- :mod:`~qsim.model.flows` — flows (waiting-children) and fan-out;
- :mod:`~qsim.model.state` — the central columnar per-job table;
- :mod:`~qsim.model.timeseries` — queue depth and active jobs over time;
- :mod:`~qsim.model.support` — what the model cannot run (nested children);
- :mod:`~qsim.model.run` — the wiring (:class:`Model`) and :func:`simulate`;
- :mod:`~qsim.model.replicate` — :func:`simulate_replications`: per-window bands over replications.

How the mechanisms plug into the core: see :mod:`qsim.model.core` and :mod:`qsim.model.run`.
"""

from qsim.model.run import Model, ModelResult, simulate
from qsim.model.replicate import simulate_replications
from qsim.model.support import check_supported
from qsim.spec.workload import JobDraws, draw_jobs, stream

__all__ = ["simulate", "simulate_replications", "ModelResult", "Model", "draw_jobs", "JobDraws", "stream", "check_supported"]
