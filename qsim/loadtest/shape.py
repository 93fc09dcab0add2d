"""ScenarioShape: the scenario's load for the scenario's duration, then a drain, then stop.

The rate itself is kept by the producers' pacing (:class:`~qsim.loadtest.users.ProducerUser`);
the shape keeps the right number of users running for as long as the
scenario says:

- users: the producer users (``-u``, or enough that each adds at most
  :data:`~qsim.loadtest.config.MAX_RATE_PER_PRODUCER` jobs/s at the peak of
  the scenario's rate profiles) plus the one observer; all started within
  about 0.1 s unless ``-r`` says otherwise. The number stays the same through
  the window: a rate profile is followed by the producers' schedule
  (:mod:`~qsim.loadtest.schedule`), idle producers wait for their next add;
- for the arrival window (``-t``, or the scenario's ``duration`` times
  ``--time-scale``, :mod:`~qsim.loadtest.timescale`), counted from
  the moment the window opened (after ``--start-workers`` pools are up);
- then up to ``--drain`` seconds more, so the jobs still queued or running
  finish and their latencies are reported (it stops as soon as every job
  added has been seen to end: a master knows it from its workers' statistics);
- then ``None``: the test stops (and a headless run quits).

Locust ticks a shape once a second, so the test ends up to a second after
that; no job is added after the window (the producers check it themselves).
"""

from __future__ import annotations

import math
from typing import Any

from locust import LoadTestShape
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner

from qsim.loadtest.config import LoadTestConfig
from qsim.loadtest.hooks import run_of
from qsim.loadtest.run import LoadTestRun

__all__ = ["ScenarioShape"]


class ScenarioShape(LoadTestShape):
    """Follows the scenario: its producers and observer for its duration, then drains and stops."""

    use_common_options = True  # -u, -r, -t are read (through the options qsim fixed at init)

    def __init__(self) -> None:
        super().__init__()
        self._plan: tuple[int, float, float, float] | None = None
        self._plan_run: object = None

    def reset_time(self) -> None:
        """Called by Locust at each start: the options may have changed (web UI)."""
        super().reset_time()
        self._plan = None

    def plan(self) -> tuple[int, float, float, float]:
        """``(users, spawn_rate, window, drain)`` from the options fixed at init."""
        if self._plan is None:
            options: Any = self.runner.environment.parsed_options if self.runner else None
            config = LoadTestConfig.from_options(options)
            producers = int(getattr(options, "qsim_producers", None) or config.producers or 1)
            users = producers + 1  # + the observer
            spawn_rate = getattr(options, "qsim_spawn_rate", None)
            spawn = float(spawn_rate) if spawn_rate else float(max(10, 10 * users))
            window = float(getattr(options, "qsim_window", None) or config.run_time or math.inf)
            self._plan = (users, spawn, window, config.drain)
        return self._plan

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None
        run = run_of(self.runner.environment)
        if run is not self._plan_run:  # test_start may have re-decided the options (a restart)
            self._plan, self._plan_run = None, run
        users, spawn, window, drain = self.plan()
        if run is None or run.t0 is None:
            # Before the first start (test_start opens the window) keep asking for the users;
            # a run that could not start has asked the runner to quit already.
            started: float = self.get_run_time()
            if started > 5.0 and self.runner.environment.process_exit_code:
                return None
            return users, spawn
        elapsed = run.elapsed()
        if elapsed < window:
            return users, spawn
        if elapsed < window + drain and not self.all_ended(run, elapsed - window):
            return users, spawn
        return None

    def all_ended(self, run: LoadTestRun, since_window: float) -> bool:
        """Every job added has been reported ended: by this process's own count, or on a
        master (whose workers add and observe) by the ``enqueue`` and ``job`` statistics
        the workers reported, once every worker has reported its last adds (a report
        interval and a margin after the window, which opened a little later on workers)."""
        if not isinstance(self.runner, MasterRunner):
            return run.all_finished()
        if since_window < WORKER_REPORT_INTERVAL + 1.0:
            return False
        entries = self.runner.stats.entries
        added = sum(e.num_requests - e.num_failures for (_, kind), e in entries.items() if kind == "enqueue")
        ended = sum(e.num_requests for (name, kind), e in entries.items() if kind == "job" and name in run.rates)
        return added > 0 and ended >= added
