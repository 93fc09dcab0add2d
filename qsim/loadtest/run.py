"""One load test as one Locust process sees it: the scenario, the queues, the pace, the observations.

Nothing here imports Locust; the users in :mod:`qsim.loadtest.users` call it.

Keys: jobs go to the scenario's queue names under the key prefix
``--qsim-prefix`` (default ``qsim``, the engine's default), so the workers
deployed on staging take them. Every job id starts with the run id
(``lt-<hex>-<type>-<n>``, fan-out and flow children ``<parent id>.<k>``): the observer
reports only this run's jobs, and a run never collides with another. Nothing
is flushed or deleted; the engine's retention trims completed jobs.

Timing: job wait and latency come from the timestamps the engine's Lua
scripts take from Redis's clock (``enqueued_at``, ``started_at``,
``finished_at``), exactly what ``qsim run`` and the Summary measure.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from qsim.engine import Queue, SyncFlowProducer
from qsim.engine.scripts import redis_errors
from qsim.errors import EngineError
from qsim.loadtest.config import LoadTestConfig
from qsim.loadtest.mix import PayloadSource, arrival_rates
from qsim.loadtest.schedule import Schedule, scheduled_types
from qsim.safety import require_local_or_confirmed
from qsim.scenario import Scenario
from qsim.scenarios import load

__all__ = ["LoadTestRun", "Finished", "OBSERVED_EVENTS"]

logger = logging.getLogger(__name__)

#: Stream events that end a job: reported as job latencies.
OBSERVED_EVENTS = ("completed", "dead")
_CHILD = re.compile(r"-\d+\.\d+$")  # <parent id>.<k>: a fan-out child


@dataclass(frozen=True)
class Finished:
    """One job of this run that ended, as read from Redis (seconds, Redis clock)."""

    job_id: str
    type: str
    queue: str
    outcome: str  # "completed" | "dead"
    enqueued_at: float
    wait: float | None  # enqueue -> start of the first attempt (None: never started)
    latency: float  # enqueue -> completion (or death)
    error: str | None


class LoadTestRun:
    """The shared state of the users of one Locust process.

    Args:
        config: The resolved settings (the safety check runs here).
        node: Distinguishes processes of one distributed run in job ids (``""`` alone).
        scenario: The scenario, when already loaded (default: ``load(config.scenario)``).
        share: ``(index, count)``: this process's share of the scheduled arrivals
            (:mod:`qsim.loadtest.schedule`) among ``count`` adding processes.

    Raises:
        UsageError: A non-local Redis without the confirmation flag, or a malformed Redis URL.
        ScenarioError: A bad or unsupported scenario.
    """

    def __init__(self, config: LoadTestConfig, *, node: str = "", scenario: Scenario | None = None,
                 share: tuple[int, int] = (0, 1)) -> None:
        require_local_or_confirmed(config.redis_url, config.confirmed)
        self.config = config
        self.scenario = scenario if scenario is not None else load(config.scenario)
        #: Mean jobs per second of every arriving type (flow parents count once).
        self.rates = arrival_rates(self.scenario, config.rate_scale)
        self.total_rate = sum(self.rates.values())
        self.producers = config.producer_count(self.total_rate)
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
        self.payloads = PayloadSource(self.scenario, self.run_id, node=node)
        self.queues: dict[str, Queue] = {}
        self.flows: SyncFlowProducer | None = None
        self.t0: float | None = None  # time.monotonic() when the arrival window opened
        self.added = 0
        self.completed = 0
        self.dead = 0
        self._cursor: dict[str, str] = {}
        #: Enqueue times (Redis clock, s) of the ended jobs the producers added, by type.
        self.arrivals: dict[str, list[float]] = {}

    # -- lifecycle ---------------------------------------------------------
    def connect(self) -> None:
        """Open the queues (one client for all) and mark the stream position to observe from.

        Raises:
            RedisUnavailable: Redis cannot be reached.
        """
        first: Queue | None = None
        for q in self.scenario.queues:
            queue = Queue(q.name, redis=first.client if first else self.config.redis_url, prefix=self.config.prefix)
            first = first or queue
            self.queues[q.name] = queue
        assert first is not None
        if any(self.scenario.job(t).flow is not None for t in self.rates):
            self.flows = SyncFlowProducer(redis=first.client, prefix=self.config.prefix)
        with redis_errors("connecting the load test"):
            sec, usec = first.client.time()
        start = f"{int(sec) * 1000 + int(usec) // 1000 - 1}-0"  # events from now on (Redis clock)
        self._cursor = {name: start for name in self.queues}

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
        first = True
        for q in self.queues.values():
            if first:
                q.close()  # the others share its client
                first = False
        self.queues.clear()

    # -- producing -----------------------------------------------------------
    def add(self, job_type: str, make_payload: Callable[[str, str, dict[str, Any]], Any] | None = None,
            n: int | None = None) -> tuple[str, int]:
        """Add the next job of ``job_type`` (a flow parent: with its children, in one script through
        :class:`~qsim.engine.SyncFlowProducer`); returns ``(job_id, approximate payload size)``.

        Args:
            job_type: The job type (its queue, priority, attempts... come from the scenario).
            make_payload: ``(job_type, job_id, planned payload) -> data`` to add instead of the
                planned payload (real handlers; a flow's children too); None adds the planned one.
            n: The job's number within its type (a scheduled arrival); None: the next one.

        Raises:
            EngineError: The add failed or the id already existed (``created`` false).
        """
        job = self.payloads.next_job(job_type, n)
        job_id, payload = job.job_id, job.payload
        if make_payload is not None:
            payload = make_payload(job_type, job_id, payload)
        queue = self.queues[self.payloads.queue_of[job_type]]
        size = len(str(payload))
        if job.children:
            assert self.flows is not None
            kids = [(q, kind, make_payload(kind, cid, data) if make_payload is not None else data, opts)
                    for q, kind, cid, data, opts in job.children]
            created = self.flows.add(parent=(queue.name, job_type, payload, job.options), children=kids,
                                     on_child_failure=job.on_child_failure).created
            size += sum(len(str(k[2])) for k in kids)
        else:
            created = queue.add(job_type, payload, **job.options).created
        if not created:
            raise EngineError(f"job {job_id} already existed in queue {queue.name!r}: not added (reused --run-id?)")
        self.added += 1
        return job_id, size

    # -- observing -----------------------------------------------------------
    def poll(self, block: float = 1.0, count: int = 500) -> list[Finished]:
        """Read the queues' event streams from where the last call stopped; the jobs of this
        run that completed or died, with their Redis timestamps. Blocks up to ``block``
        seconds in all when nothing happens.

        Other producers' jobs in the same queues are skipped (their ids lack the run id).
        """
        ended: list[tuple[str, str, str]] = []  # (queue, job id, event)
        per_queue = max(1, int(block * 1000 / max(1, len(self.queues))))
        prefix = self.run_id + "-"  # ids are <run id>[-w<n>]-<type>-<n>: not another run whose id extends this one
        with redis_errors("reading job events"):
            for name, queue in self.queues.items():
                reply = queue.client.xread({queue.keys.events: self._cursor[name]}, count=count, block=per_queue)
                for _stream, entries in reply or []:
                    for entry_id, fields in entries:
                        self._cursor[name] = entry_id
                        event, job_id = fields.get("event"), fields.get("job", "")
                        if event in OBSERVED_EVENTS and job_id.startswith(prefix):
                            ended.append((name, job_id, event))
            if not ended:
                return []
            first = next(iter(self.queues.values()))
            pipe = first.client.pipeline(transaction=False)
            for name, job_id, _ in ended:
                pipe.hmget(self.queues[name].keys.job(job_id), "name", "enqueued_at", "started_at", "finished_at",
                           "error")
            rows = pipe.execute()
        out = []
        for (name, job_id, event), row in zip(ended, rows):
            out.extend(self._finished(name, job_id, event, row))
        return out

    def _finished(self, queue: str, job_id: str, event: str, row: list[Any]) -> list[Finished]:
        job_type, enq, started, finished, error = row
        if not enq or not finished:
            logger.debug("job %s ended but its hash is gone (retention): not measured", job_id)
            return []
        e, f = float(enq), float(finished)
        if not _CHILD.search(job_id):  # a job a producer added, not a fan-out child
            if event == "completed":
                self.completed += 1
            else:
                self.dead += 1
            self.arrivals.setdefault(job_type or "?", []).append(e)
        return [Finished(job_id=job_id, type=job_type or "?", queue=queue, outcome=event, enqueued_at=e,
                         wait=float(started) - e if started else None, latency=f - e, error=error)]

    def counts(self) -> dict[str, dict[str, int]]:
        """Jobs per state of each queue (all producers' jobs, not only this run's)."""
        return {name: q.counts() for name, q in self.queues.items()}
