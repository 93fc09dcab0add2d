"""The SimPy model of a Redis-backed job-queue system.

``simulate(scenario)`` runs a :class:`~qsim.scenario.Scenario` and returns a
:class:`ModelResult`: per-job records, a time series of queue depth and active
jobs per queue, and the Summary of DESIGN.md. One module per mechanism:

- :mod:`~qsim.model.arrivals` — seeded per-type random streams, drawing every job, feeding arrivals;
- :mod:`~qsim.model.queues` — waiting lines (priority, FIFO within a level), per-queue gates;
- :mod:`~qsim.model.limits` — gates: the global per-queue concurrency limit;
- :mod:`~qsim.model.dispatch` — pools, slots, policies (priority, ordered, smooth WRR);
- :mod:`~qsim.model.state` — the central columnar per-job table;
- :mod:`~qsim.model.timeseries` — queue depth and active jobs over time;
- :mod:`~qsim.model.support` — what the model cannot run yet;
- :mod:`~qsim.model.run` — the wiring, :func:`simulate`.
"""

from qsim.model.arrivals import JobDraws, draw_jobs, stream
from qsim.model.run import Model, ModelResult, simulate
from qsim.model.support import check_supported

__all__ = ["simulate", "ModelResult", "Model", "draw_jobs", "JobDraws", "stream", "check_supported"]
