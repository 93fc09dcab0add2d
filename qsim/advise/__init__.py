"""Live capacity advice: how many workers a running queue needs to meet its SLOs, now.

A queue that is already running has everything a plan needs: its measured jobs
in Redis. :func:`advise` calibrates a scenario from the jobs enqueued in the
last ``window`` (:mod:`qsim.calibrate`, read-only) and plans the least workers,
at the pool's concurrency, that meet the SLOs with confidence
(:mod:`qsim.analysis.plan.planner`); :func:`watch` repeats it, and :class:`Advisor`
does so in the background of a worker and exports ``qsim_recommended_workers``
for an autoscaler (:mod:`qsim.advise.live`).

Modules: :mod:`~qsim.advise.core` (advise), :mod:`~qsim.advise.capacity`
(load, limits, search range, shutdown grace; no simulation),
:mod:`~qsim.advise.result` (the :class:`Advice`), :mod:`~qsim.advise.live`
(watch, the background advisor and its Prometheus collector).

In a notebook (``qsim.advise(...)`` is :func:`advise`: this package is also the
verb, :mod:`qsim.callable_module`)::

    from qsim.advise import advise
    a = advise("redis://localhost:6379/0", "orders", "p95_wait<=2", window="15m")
    a                        # the recommendation, the measured load, the prediction
    a.recommended_workers    # or None, with a.reason
"""

from __future__ import annotations

from qsim.advise.capacity import Shutdown
from qsim.advise.core import (
    DEFAULT_JOBS_PER_RUN,
    DEFAULT_MAX_WORKERS,
    DEFAULT_WINDOW,
    advise,
    advise_from,
    parse_window,
)
from qsim.advise.live import (
    DEFAULT_EVERY,
    WORKER_BUDGET,
    AdviceCollector,
    AdviceProcess,
    Advisor,
    LatestAdvice,
    watch,
)
from qsim.advise.result import Advice, NoJobsInWindow, Unavailable, changes
from qsim.callable_module import make_callable

__all__ = ["advise", "advise_from", "watch", "changes", "parse_window", "Advice", "Unavailable", "NoJobsInWindow",
           "Shutdown", "Advisor", "LatestAdvice", "AdviceCollector", "AdviceProcess", "DEFAULT_WINDOW", "DEFAULT_JOBS_PER_RUN",
           "DEFAULT_MAX_WORKERS", "DEFAULT_EVERY", "WORKER_BUDGET"]

make_callable(__name__, advise)  # ``qsim.advise(url, queue, slo)``: this package is also the verb
