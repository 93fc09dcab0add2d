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
import math
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


def _loadtest(user: User) -> LoadTestRun:
    run = run_of(user.environment)
    if run is None:
        logger.error("no qsim load test is running (did the locustfile call qsim.loadtest.register(events)?)")
        raise StopUser()
    return run


class ProducerUser(User):
    """Adds jobs of the scenario's types: paced ones at their rates, scheduled ones on their schedule.

    Paced types (``poisson`` and ``constant`` arrivals, unless ``--pacing
    scenario``): each of the ``n`` producer users adds one job every
    ``n / total rate`` seconds on a fixed schedule (no drift: an add that took
    long shortens the next wait), starting at a random phase so the adds of
    all users spread evenly. With ``--pacing poisson`` the gaps are
    exponential with that mean instead, so all producers together add a
    Poisson stream of the total rate, like a ``poisson`` arrival in the
    model. The type of each job is picked by smooth weighted round-robin over
    the types' rates.

    Scheduled types (``burst``, ``trace`` and ``profile`` arrivals; every type
    with ``--pacing scenario``): the jobs are added at the workload's drawn
    arrival times (:mod:`qsim.loadtest.schedule`), each claimed by the next
    free producer, so a burst of 20 arrives at once (as fast as the producers'
    round trips allow) and a rate profile is followed moment by moment (on the
    clock ``--time-scale`` sets, :mod:`qsim.loadtest.timescale`). A flow parent is added with its children in one
    script (:class:`~qsim.engine.SyncFlowProducer`).

    Adds happen only inside the arrival window (``-t`` or the scenario's
    duration); afterwards the user idles until the test stops.

    ``-u`` is the number of producer users (the observer comes on top); it sets
    how many adds may be in flight at once, not the rate: the rate is the
    scenario's, times ``--rate-scale``. Without ``-u`` there are enough for
    the peak of the rate profiles.

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
        self.loadtest = _loadtest(self)
        self.mix = JobMix(self.loadtest.paced_rates) if self.loadtest.paced_rates else None
        self._poisson = self.loadtest.config.pacing == "poisson"
        self._skipped, self._warned, self._late_warned = 0, False, False
        assert self.loadtest.t0 is not None
        self._due = math.inf  # the next paced add (monotonic)
        if self.mix is not None:
            self._due = self.loadtest.t0 + (self._gap() if self._poisson else random.uniform(0.0, self.loadtest.interval))
            self._catch_up(time.monotonic())
        self._next: tuple[float, str | None, int | None] | None = None  # (when, scheduled type, its n)
        self._choose()
        if self._next is not None:
            gevent.sleep(max(0.0, self._next[0] - time.monotonic()))

    def _gap(self) -> float:
        return random.expovariate(1.0 / self.loadtest.interval) if self._poisson else self.loadtest.interval

    def _catch_up(self, now: float) -> None:
        if self._due < now - MAX_LAG:
            missed = int((now - self._due) / self.loadtest.interval)
            self._due += missed * self.loadtest.interval  # the mean gap, for either pacing
            self._skipped += missed
            log = logger.debug if self._warned else logger.warning
            self._warned = True
            log("a producer fell %d adds behind its schedule and skipped them (%d so far): the adds take "
                "too long for this rate; add producer users with -u", missed, self._skipped)

    def _choose(self) -> None:
        """What to add next: this user's next paced add, or the next scheduled arrival if it is due
        first (claimed, so no other producer adds it)."""
        schedule, t0 = self.loadtest.schedule, self.loadtest.t0
        assert t0 is not None
        at = schedule.peek() if schedule is not None else None
        if at is not None and t0 + at <= self._due:
            assert schedule is not None
            claimed = schedule.claim()
            assert claimed is not None
            self._next = (t0 + claimed[0], claimed[1], claimed[2])
            late = time.monotonic() - self._next[0]
            if late > MAX_LAG and not self._late_warned:
                self._late_warned = True
                logger.warning("scheduled adds run %.1f s late: the adds take too long for this schedule; add "
                               "producer users with -u", late)
        elif self._due < math.inf:
            self._next = (self._due, None, None)
        else:
            self._next = None

    def wait_time(self) -> float:
        now = time.monotonic()
        done = self._next
        if done is not None and done[1] is None:  # a paced add was made: the next one
            self._due += self._gap()
            self._catch_up(now)
        self._choose()
        if self._next is None or not self.loadtest.window_open(self._next[0]):
            return 1.0
        return max(0.0, self._next[0] - now)

    @task
    def add(self) -> None:
        """Add the next job (request type ``enqueue``, name = job type)."""
        nxt = self._next
        if nxt is None or not self.loadtest.window_open(nxt[0]):
            return
        job_type = nxt[1]
        if job_type is None:
            assert self.mix is not None
            job_type = self.mix.next()
        with self.environment.events.request.measure("enqueue", job_type) as meta:
            _, size = self.loadtest.add(job_type, self.make_payload, n=nxt[2])
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
        self.loadtest = _loadtest(self)

    @task
    def observe(self) -> None:
        """Read the next batch of events (blocks up to one second)."""
        try:
            ended = self.loadtest.poll(block=1.0)
        except QsimError as e:
            logger.warning("observer: %s", e)
            gevent.sleep(1.0)
            return
        for job in ended:
            fire_finished(self.environment.events, job)
