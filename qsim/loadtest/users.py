"""Locust users: :class:`ProducerUser` adds the scenario's jobs, :class:`QueueObserverUser` reports their latency.

Both talk to Redis with the sync engine client (:class:`qsim.engine.Queue`);
Locust's gevent monkey-patching makes its sockets cooperative. They need the
listeners of :func:`qsim.loadtest.hooks.register`.

What the statistics mean (request type / name):

- ``enqueue`` / ``<job type>``: one ``Queue.add`` round trip, as the producer
  sees it (client clock). Its count is the number of jobs added.
- ``job`` / ``<job type>``: a job of this run that ended, its response time
  being the job's latency, enqueue -> completion, from the Redis timestamps
  the engine stores (the Summary's ``latency``). A job that went to the
  dead-letter queue counts as a failure (:class:`JobDead`, grouped by its
  error), so Locust exits 1 (``--exit-code-on-error 0`` when dead jobs are
  part of the scenario).
- ``wait`` / ``<job type>``: enqueue -> start of the first attempt (the
  Summary's ``wait``).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import gevent
from locust import User, constant, task
from locust.exception import StopUser

from qsim.errors import QsimError
from qsim.loadtest.hooks import run_of
from qsim.loadtest.mix import JobMix
from qsim.loadtest.run import Finished, LoadTestRun

__all__ = ["ProducerUser", "QueueObserverUser", "JobDead", "fire_finished"]

logger = logging.getLogger(__name__)

#: A producer more than this many seconds behind its schedule skips the missed adds.
MAX_LAG = 1.0


class JobDead(Exception):
    """Reported for a job of this run that went to the dead-letter queue."""


def _run(user: User) -> LoadTestRun:
    run = run_of(user.environment)
    if run is None:
        logger.error("no qsim load test is running (did the locustfile call qsim.loadtest.register(events)?)")
        raise StopUser()
    return run


class ProducerUser(User):
    """Adds jobs of the scenario's types at the scenario's rates (constant pacing by default).

    Each of the ``n`` producer users adds one job every ``n / total rate``
    seconds on a fixed schedule (no drift: an add that took long shortens the
    next wait), starting at a random phase so the adds of all users spread
    evenly. With ``--pacing poisson`` the gaps are exponential with that mean
    instead, so all producers together add a Poisson stream of the total
    rate, like a ``poisson`` arrival in the model. The type of each job is
    picked by smooth weighted round-robin over the types' rates. Adds happen
    only inside the arrival window (``-t`` or the scenario's duration);
    afterwards the user idles until the test stops.

    ``-u`` is the number of producer users (the observer comes on top); it sets
    how many adds may be in flight at once, not the rate: the rate is the
    scenario's, times ``--rate-scale``.

    The payload is the planned one (``{"s": [...], "x": [...]}``) that the
    synthetic handler of ``qsim.harness.pool_worker`` executes. For workers
    with real handlers, subclass and override :meth:`make_payload` (import the
    module, not the class, into the locustfile: Locust runs every User class it
    finds there)::

        from qsim.loadtest import users

        class CheckoutProducer(users.ProducerUser):
            def make_payload(self, job_type, job_id, planned):
                return {"order_id": job_id, "items": 3}
    """

    def make_payload(self, job_type: str, job_id: str, planned: dict[str, Any]) -> Any:
        """The data of the job ``job_id`` of ``job_type``: the planned payload by default."""
        return planned

    def on_start(self) -> None:
        self.run = _run(self)
        self.mix = JobMix(self.run.rates)
        self._poisson = self.run.config.pacing == "poisson"
        self._skipped, self._warned = 0, False
        assert self.run.t0 is not None
        first = self._gap() if self._poisson else random.uniform(0.0, self.run.interval)
        self._due = self.run.t0 + first
        self._catch_up(time.monotonic())
        gevent.sleep(max(0.0, self._due - time.monotonic()))

    def _gap(self) -> float:
        return random.expovariate(1.0 / self.run.interval) if self._poisson else self.run.interval

    def _catch_up(self, now: float) -> None:
        if self._due < now - MAX_LAG:
            missed = int((now - self._due) / self.run.interval)
            self._due += missed * self.run.interval  # the mean gap, for either pacing
            self._skipped += missed
            log = logger.debug if self._warned else logger.warning
            self._warned = True
            log("a producer fell %d adds behind its schedule and skipped them (%d so far): the adds take "
                "too long for this rate; add producer users with -u", missed, self._skipped)

    def wait_time(self) -> float:
        now = time.monotonic()
        if not self.run.window_open(self._due):
            return 1.0
        self._due += self._gap()
        self._catch_up(now)
        return max(0.0, self._due - now)

    @task
    def add(self) -> None:
        """Add the next job (request type ``enqueue``, name = job type)."""
        if not self.run.window_open(self._due):
            return
        job_type = self.mix.next()
        with self.environment.events.request.measure("enqueue", job_type) as meta:
            _, size = self.run.add(job_type, self.make_payload)
            meta["response_length"] = size


def fire_finished(events: Any, job: Finished) -> None:
    """Report one ended job to Locust: a ``job`` request (latency) and a ``wait`` request."""
    exc = None if job.outcome == "completed" else JobDead(f"dead: {job.error or 'no error stored'}")
    events.request.fire(request_type="job", name=job.type, response_time=job.latency * 1000.0, response_length=0,
                        exception=exc, context={"job_id": job.job_id, "queue": job.queue},
                        start_time=job.enqueued_at)
    if job.wait is not None:
        events.request.fire(request_type="wait", name=job.type, response_time=job.wait * 1000.0, response_length=0,
                            exception=None, context={"job_id": job.job_id, "queue": job.queue},
                            start_time=job.enqueued_at)


class QueueObserverUser(User):
    """Follows the queues' event streams and reports this run's ended jobs (one per test).

    Reads ``<prefix>:{<queue>}:events`` (blocking, no polling sleep) from the
    moment the test started, keeps the completed and dead events of jobs whose
    id carries the run id, reads their Redis timestamps in one pipeline, and
    fires ``job`` and ``wait`` requests (see the module docstring). The
    streams are capped (about 10,000 entries per queue): an observer that falls
    further behind loses events (jobs are then missing from the stats, never
    counted wrong).
    """

    fixed_count = 1
    wait_time = constant(0)

    def on_start(self) -> None:
        self.run = _run(self)

    @task
    def observe(self) -> None:
        """Read the next batch of events (blocks up to one second)."""
        try:
            ended = self.run.poll(block=1.0)
        except QsimError as e:
            logger.warning("observer: %s", e)
            gevent.sleep(1.0)
            return
        for job in ended:
            fire_finished(self.environment.events, job)
