"""The SimPy model of a Redis-backed job-queue system.

``simulate(scenario)`` runs a :class:`~qsim.scenario.Scenario` and returns a
:class:`ModelResult`: per-job records, a time series of queue depth and active
jobs per queue, and the Summary of DESIGN.md::

    from qsim.model import simulate
    result = simulate(scenario, seed=7, max_jobs=None, progress=None)
    result.jobs, result.timeseries, result.summary

One module per mechanism:

- :mod:`~qsim.model.arrivals` — seeded per-type random streams, drawing every job, feeding arrivals;
- :mod:`~qsim.model.queues` — waiting lines (priority, FIFO within a level), per-queue gates;
- :mod:`~qsim.model.limits` — gates: the global per-queue concurrency limit;
- :mod:`~qsim.model.dispatch` — pools, slots, policies (priority, ordered, smooth WRR);
- :mod:`~qsim.model.state` — the central columnar per-job table;
- :mod:`~qsim.model.timeseries` — queue depth and active jobs over time;
- :mod:`~qsim.model.support` — what the model cannot run yet;
- :mod:`~qsim.model.run` — the wiring (:class:`Model`: enqueue, start_attempt,
  attempt_ended, settle) and :func:`simulate`.

Where later mechanisms plug in (see :mod:`qsim.model.run`):

- retries / DLQ / timeouts: set ``Model.attempt_result(job, slot, now)``; it
  settles the job (``Model.settle(job, COMPLETED | DEAD, now)``) or re-enqueues
  it after a backoff (``Model.enqueue``); draw from ``stream(seed, type,
  "failure" | "backoff" | "retry_service")``; keep attempt rows and feed them to
  ``Model.timeseries_changes``;
- rate limits: a new gate in :mod:`~qsim.model.limits` that reopens its queue
  from a timer (``Queues.refresh(q)`` then ``Dispatcher.offer(q)``);
- crashes, stalls, SIGTERM drain: generator processes on ``Model.env`` that
  cancel attempts (``running[slot] = -1``), retire slots and put jobs back with
  ``Model.enqueue``;
- fan-out and flows: ``JobTable.add`` children, then ``Model.enqueue`` them.
"""

from qsim.model.arrivals import JobDraws, draw_jobs, stream
from qsim.model.run import Model, ModelResult, simulate
from qsim.model.support import check_supported

__all__ = ["simulate", "ModelResult", "Model", "draw_jobs", "JobDraws", "stream", "check_supported"]
