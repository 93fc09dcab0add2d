"""One load test as one Locust process sees it: the scenario, the queues, the pace, the observations.

Nothing here imports Locust; the users in :mod:`qsim.loadtest.users` call it.

Target (``--target``): the qsim engine (the default,
:class:`~qsim.loadtest.targets.EngineTarget`) or BullMQ
(:class:`~qsim.loadtest.bullmq.BullMQTarget`). Keys: jobs go to the
scenario's queue names under the key prefix ``--qsim-prefix`` (default
``qsim``, the engine's default) or ``--bullmq-prefix`` (default ``bull``), so
the workers deployed on staging take them. Every job id starts with the run
id (``lt-<hex>-<type>-<n>``, fan-out and flow children ``<parent id>.<k>``):
the observer reports only this run's jobs, and a run never collides with
another. Nothing is flushed or deleted; the engine's retention trims
completed jobs.

Timing: job wait and latency come from the timestamps the engine's Lua
scripts take from Redis's clock (``enqueued_at``, ``started_at``,
``finished_at``), exactly what ``qsim run`` and the Summary measure; on
BullMQ, from its job hashes (:mod:`qsim.loadtest.bullmq`).

Every job added and every job seen to end is kept (:attr:`LoadTestRun.added_jobs`,
:attr:`LoadTestRun.ended`), so the end of the test can judge ``--slo``
thresholds on a Summary of this run (:mod:`qsim.loadtest.thresholds`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from qsim.engine.safety import require_local_or_confirmed
from qsim.errors import EngineError
from qsim.loadtest.config import LoadTestConfig
from qsim.loadtest.mix import PayloadSource, arrival_rates, peak_rates
from qsim.loadtest.schedule import Schedule, scheduled_types
from qsim.loadtest.targets import OBSERVED_EVENTS, EngineTarget, Finished, Target
from qsim.loadtest.timescale import time_scaled
from qsim.scenarios import load
from qsim.spec.scenario import Scenario

__all__ = ["LoadTestRun", "Finished", "OBSERVED_EVENTS", "make_target"]

logger = logging.getLogger(__name__)

_CHILD = re.compile(r"-\d+\.\d+$")  # <parent id>.<k>: a fan-out or flow child


def make_target(config: LoadTestConfig, scenario: Scenario, loop: Any = None) -> Target:
    """The target of ``config.target``: the qsim engine, or BullMQ (``loop``: the asyncio loop thread
    its adds run on, see :mod:`qsim.loadtest.aioloop`; None: one of its own)."""
    if config.target == "bullmq":
        from qsim.loadtest.bullmq import BullMQTarget

        return BullMQTarget(scenario, config.redis_url, prefix=config.bullmq_prefix, loop=loop)
    return EngineTarget(scenario, config.redis_url, prefix=config.prefix)


class LoadTestRun:
    """The shared state of the users of one Locust process.

    Args:
        config: The resolved settings (the safety check runs here).
        node: Distinguishes processes of one distributed run in job ids (``""`` alone).
        scenario: The scenario, when already loaded (default: ``load(config.scenario)``); the run
            plays it at ``config.time_scale`` (:attr:`scenario` is the time-scaled one).
        share: ``(index, count)``: this process's share of the scheduled arrivals
            (:mod:`qsim.loadtest.schedule`) among ``count`` adding processes.
        target: Where the jobs go (default: :func:`make_target` of ``config``).

    Raises:
        UsageError: A non-local Redis without the confirmation flag, or a malformed Redis URL.
        ScenarioError: A bad or unsupported scenario.
    """

    def __init__(self, config: LoadTestConfig, *, node: str = "", scenario: Scenario | None = None,
                 share: tuple[int, int] = (0, 1), target: Target | None = None) -> None:
        require_local_or_confirmed(config.redis_url, config.confirmed)
        self.config = config
        #: The scenario as this run plays it (:func:`~qsim.loadtest.timescale.time_scaled`).
        self.scenario = time_scaled(scenario if scenario is not None else load(config.scenario), config.time_scale)
        #: Mean jobs per second of every arriving type (flow parents count once).
        self.rates = arrival_rates(self.scenario, config.rate_scale)
        self.total_rate = sum(self.rates.values())
        #: Producer users: enough for the peak of the rate profiles (``-u`` decides when given).
        self.producers = config.producer_count(sum(peak_rates(self.scenario, config.rate_scale).values()))
        #: Arrival window in seconds (``-t``, else the scenario's duration).
        self.window = config.run_time if config.run_time is not None else self.scenario.duration
        scheduled = [t for t in scheduled_types(self.scenario, config.pacing) if t in self.rates]
        #: The types the producers pace at their mean rate (the others follow :attr:`schedule`).
        self.paced_rates = {t: r for t, r in self.rates.items() if t not in scheduled}
        #: Seconds between two paced adds of one producer user (inf: nothing is paced).
        self.interval = self.producers / sum(self.paced_rates.values()) if self.paced_rates else float("inf")
        #: The scheduled arrivals this process adds (None: every type is paced).
        self.schedule = Schedule(self.scenario, scheduled, scale=config.rate_scale, window=self.window,
                                 node=share[0], nodes=share[1]) if scheduled else None
        self.run_id = config.run_id or LoadTestConfig.new_run_id()
        self.node = node
        # payload templates go to real handlers; the local synthetic pool (--start-workers) needs the plan
        self.payloads = PayloadSource(self.scenario, self.run_id, node=node, templates=not config.start_workers)
        self.target: Target = target if target is not None else make_target(config, self.scenario)
        self.t0: float | None = None  # time.monotonic() when the arrival window opened
        self.added = 0
        self.completed = 0
        self.dead = 0
        #: Enqueue times (s since the epoch) of the ended jobs the producers added, by type.
        self.arrivals: dict[str, list[float]] = {}
        #: Every job this process added (flow children too): id -> (queue, type, when added: s since the epoch).
        self.added_jobs: dict[str, tuple[str, str, float]] = {}
        #: Every job of this run seen to end (fan-out children too): id -> row.
        self.ended: dict[str, Finished] = {}

    # -- lifecycle ---------------------------------------------------------
    def connect(self) -> None:
        """Connect the target and mark the stream position to observe from.

        Raises:
            RedisUnavailable: Redis cannot be reached.
            EngineError: A job id of this run already exists (a reused ``--run-id``).
        """
        self.target.connect()
        exists = getattr(self.target, "exists", None)
        if exists is not None:  # BullMQ keeps the first job of an id: a reused run id would add nothing
            for job_type in self.rates:
                job_id = f"{self.payloads.base}-{job_type}-0"
                if exists(self.payloads.queue_of[job_type], job_id):
                    raise EngineError(f"job {job_id} already exists in {self.target.label} queue "
                                      f"{self.payloads.queue_of[job_type]!r}: choose another --run-id")

    def open_window(self) -> None:
        """The arrival window starts now."""
        self.t0 = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since the arrival window opened (0 before)."""
        return 0.0 if self.t0 is None else time.monotonic() - self.t0

    def window_open(self, at: float | None = None) -> bool:
        """Whether ``at`` (monotonic; default now) is inside the arrival window."""
        if self.t0 is None:
            return False
        return ((time.monotonic() if at is None else at) - self.t0) < self.window

    def all_finished(self) -> bool:
        """Every job this process added has been observed completed or dead (and it added some)."""
        return self.added > 0 and self.completed + self.dead >= self.added

    def close(self) -> None:
        self.target.close()

    # -- producing -----------------------------------------------------------
    def add(self, job_type: str, make_payload: Callable[[str, str, dict[str, Any]], Any] | None = None,
            n: int | None = None) -> tuple[str, int]:
        """Add the next job of ``job_type`` (a flow parent: with its children, atomically); returns
        ``(job_id, approximate payload size)``.

        Args:
            job_type: The job type (its queue, priority, attempts... come from the scenario).
            make_payload: ``(job_type, job_id, payload) -> data`` to add instead of the payload (the
                planned one, or the type's rendered ``payload`` template); a flow's children too.
            n: The job's number within its type (a scheduled arrival); None: the next one.

        Raises:
            EngineError: The add failed or the id already existed (``created`` false).
        """
        job = self.payloads.next_job(job_type, n)
        job_id, payload = job.job_id, job.payload
        if make_payload is not None:
            payload = make_payload(job_type, job_id, payload)
        queue = self.payloads.queue_of[job_type]
        size = len(str(payload))
        kids = [(q, kind, cid, make_payload(kind, cid, data) if make_payload is not None else data, opts)
                for q, kind, cid, data, opts in job.children]
        created = self.target.add(queue, job_type, job_id, payload, job.options, kids, job.on_child_failure)
        size += sum(len(str(k[3])) for k in kids)
        if not created:
            raise EngineError(f"job {job_id} already existed in queue {queue!r}: not added (reused --run-id?)")
        self.added += 1
        now = time.time()
        self.added_jobs[job_id] = (queue, job_type, now)
        for q, kind, cid, _data, _opts in kids:
            self.added_jobs[cid] = (q, kind, now)
        return job_id, size

    # -- observing -----------------------------------------------------------
    def poll(self, block: float = 1.0, count: int = 500) -> list[Finished]:
        """Read the queues' event streams from where the last call stopped; the jobs of this
        run that completed or died, with their timestamps. Blocks up to ``block`` seconds in
        all when nothing happens.

        Other producers' jobs in the same queues are skipped (their ids lack the run id).
        """
        # ids are <run id>[-w<n>]-<type>-<n>: not another run whose id extends this one
        out = self.target.poll(self.run_id + "-", block=block, count=count)
        for job in out:
            self.ended[job.job_id] = job
            if not _CHILD.search(job.job_id):  # a job a producer added, not a child
                if job.outcome == "completed":
                    self.completed += 1
                else:
                    self.dead += 1
                self.arrivals.setdefault(job.type, []).append(job.enqueued_at)
        return out

    def sweep(self) -> dict[str, str]:
        """What became of the jobs added but never seen to end: each ``unfinished`` or ``lost``
        (the ones that ended unobserved join :attr:`ended`)."""
        missing = [(q, job_id) for job_id, (q, _, _) in self.added_jobs.items() if job_id not in self.ended]
        fates: dict[str, str] = {}
        for i in range(0, len(missing), 1000):
            for job_id, fate in self.target.lookup(missing[i:i + 1000]).items():
                if isinstance(fate, Finished):
                    self.ended[job_id] = fate
                else:
                    fates[job_id] = fate
        return fates

    def counts(self) -> dict[str, dict[str, int]]:
        """Jobs per state of each queue (all producers' jobs, not only this run's)."""
        return self.target.counts()
