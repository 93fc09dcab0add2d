"""The load test's BullMQ target (``--target bullmq``): BullMQ's own adds, BullMQ's events and job hashes.

Nothing here imports Locust.

Adding: through the maintained ``bullmq`` Python package
(:class:`qsim.bullmq.producer.BullMQProducer`: BullMQ's own Lua scripts, its
job format), with the options the scenario implies
(:mod:`qsim.bullmq.options`: ``jobId``, ``attempts``, ``backoff``, ``priority``,
flows with ``failParentOnFailure``/``ignoreDependencyOnFailure``). The package
is asyncio only; Locust runs on gevent: the adds run on one asyncio loop in a
native thread of its own (:class:`qsim.loadtest.aioloop.LoopThread`), and each
producer greenlet waits only for its own add.

Observing: the queues' events streams ``<prefix>:<queue>:events`` (BullMQ's
``completed`` and ``failed`` events; ``failed`` is written only once the
attempts are spent), then each ended job's hash, read with the BullMQ
calibrate reader's rules (:func:`qsim.calibrate.bullmq_source.job_times`):

- enqueue: ``timestamp`` (the producer's clock, ms) plus ``opts.delay``;
- start of the first attempt: ``processedOn`` when the job made one attempt
  (BullMQ keeps only the last attempt's start, so a retried job has no wait);
- end: ``finishedOn`` (the worker's clock, ms); error: ``failedReason``.

Times come from two clocks (the load test's and the workers'), in whole
milliseconds: clock skew between those machines shifts every wait.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from qsim.bullmq.gauges import bullmq_counts
from qsim.bullmq.options import DEFAULT_PREFIX, child_options, job_options, priorities
from qsim.bullmq.producer import BullMQProducer, require_package
from qsim.calibrate.bullmq_source import job_times
from qsim.engine.connection import connect
from qsim.engine.scripts import redis_errors
from qsim.loadtest.aioloop import LoopThread
from qsim.loadtest.targets import Child, Finished
from qsim.spec.scenario import Scenario

__all__ = ["BullMQTarget", "ENDED_EVENTS", "HASH_FIELDS"]

logger = logging.getLogger(__name__)

#: BullMQ stream events that end a job.
ENDED_EVENTS = {"completed": "completed", "failed": "dead"}
#: The job hash fields read for each ended job.
HASH_FIELDS = ("name", "timestamp", "opts", "processedOn", "finishedOn", "atm", "attemptsMade", "failedReason")


class BullMQTarget:
    """The scenario's queues as BullMQ queues under ``prefix`` (see the module docstring).

    Args:
        scenario: Its queue names are the BullMQ queue names.
        redis_url: The Redis of the BullMQ queues.
        prefix: BullMQ's key prefix (``--bullmq-prefix``, default ``bull``).
        loop: The asyncio loop thread the adds run on (None: one of its own, stopped by :meth:`close`).
    """

    label = "BullMQ"

    def __init__(self, scenario: Scenario, redis_url: str, *, prefix: str = DEFAULT_PREFIX,
                 loop: LoopThread | None = None) -> None:
        require_package()
        self.scenario, self.redis_url, self.prefix = scenario, redis_url, prefix
        self.priority = priorities(scenario)
        self._own_loop = loop is None
        self.loop = loop or LoopThread("qsim-bullmq")
        self.producer: BullMQProducer | None = None
        self.client: Any = None
        self._cursor: dict[str, str] = {}

    def key(self, queue: str, name: str) -> str:
        """``<prefix>:<queue>:<name>``: BullMQ's key of a queue's part (or of a job, by id)."""
        return f"{self.prefix}:{queue}:{name}"

    def connect(self) -> None:
        """Start the add loop, open the client, and mark the streams' position (Redis's clock).

        Raises:
            RedisUnavailable: Redis cannot be reached.
        """
        self.client = connect(self.redis_url)
        with redis_errors("connecting the load test"):
            sec, usec = self.client.time()
        start = f"{int(sec) * 1000 + int(usec) // 1000 - 1}-0"
        self._cursor = {q.name: start for q in self.scenario.queues}
        self.loop.start()
        url, prefix = self.redis_url, self.prefix

        async def make() -> BullMQProducer:
            return BullMQProducer(url, prefix=prefix)

        self.producer = self.loop.call(make)

    def options(self, job_type: str, job_id: str) -> dict[str, Any]:
        """BullMQ's ``Queue.add`` options for a job of ``job_type``."""
        return job_options(self.scenario.job(job_type), job_id, self.priority[job_type])

    def add(self, queue: str, job_type: str, job_id: str, payload: Any, options: dict[str, Any],
            children: Sequence[Child] = (), on_child_failure: str = "fail") -> bool:
        """Add one job (``options`` are the engine's; BullMQ's come from the scenario); always True:
        BullMQ keeps the first job of an id (the run id makes them new)."""
        producer = self.producer
        assert producer is not None
        opts = self.options(job_type, job_id)
        if children:
            kids = [(cq, kind, data, child_options(self.scenario.job(kind), cid, self.priority[kind],
                                                   on_child_failure))
                    for cq, kind, cid, data, _ in children]
            self.loop.call(lambda: producer.add_flow(queue, job_type, payload, opts, kids))
        else:
            self.loop.call(lambda: producer.add(queue, job_type, payload, opts))
        return True

    def exists(self, queue: str, job_id: str) -> bool:
        """Whether a job of this id is in the queue (a reused run id)."""
        with redis_errors("reading a job"):
            return bool(self.client.exists(self.key(queue, job_id)))

    def poll(self, run_prefix: str, block: float = 1.0, count: int = 500) -> list[Finished]:
        """This run's jobs that completed or failed for good since the last call."""
        ended: list[tuple[str, str, str]] = []
        per_queue = max(1, int(block * 1000 / max(1, len(self._cursor))))
        with redis_errors("reading BullMQ events"):
            for name in self._cursor:
                reply = self.client.xread({self.key(name, "events"): self._cursor[name]}, count=count,
                                          block=per_queue)
                for _stream, entries in reply or []:
                    for entry_id, fields in entries:
                        self._cursor[name] = entry_id
                        outcome = ENDED_EVENTS.get(fields.get("event", ""))
                        job_id = fields.get("jobId", "")
                        if outcome is not None and job_id.startswith(run_prefix):
                            ended.append((name, job_id, outcome))
            rows = self._read([(q, j) for q, j, _ in ended])
        out = []
        for (queue, job_id, outcome), row in zip(ended, rows):
            done = self._finished(queue, job_id, outcome, row[0])
            if done is not None:
                out.append(done)
        return out

    def _read(self, jobs: Sequence[tuple[str, str]]) -> list[tuple[list[Any], Any, Any]]:
        if not jobs:
            return []
        pipe = self.client.pipeline(transaction=False)
        for queue, job_id in jobs:
            pipe.hmget(self.key(queue, job_id), *HASH_FIELDS)
            pipe.zscore(self.key(queue, "completed"), job_id)
            pipe.zscore(self.key(queue, "failed"), job_id)
        flat = pipe.execute()
        return [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]

    @staticmethod
    def _finished(queue: str, job_id: str, outcome: str, row: list[Any]) -> Finished | None:
        h = dict(zip(HASH_FIELDS, row))
        if h["timestamp"] is None or h["finishedOn"] is None:
            logger.debug("BullMQ job %s ended but its hash is gone or incomplete: not measured", job_id)
            return None
        try:
            opts = json.loads(h["opts"] or "{}")
        except ValueError:
            opts = {}
        t = job_times(h, opts if isinstance(opts, dict) else {}, outcome)
        started = t.started
        return Finished(job_id=job_id, type=h["name"] or "?", queue=queue, outcome=outcome, enqueued_at=t.enqueued,
                        wait=started - t.enqueued if started == started else None, latency=t.finished - t.enqueued,
                        error=h["failedReason"] if outcome == "dead" else None, attempts=t.attempts,
                        failed_attempts=t.failed_attempts)

    def lookup(self, jobs: Sequence[tuple[str, str]]) -> dict[str, Finished | str]:
        with redis_errors("reading BullMQ jobs"):
            rows = self._read(jobs)
        out: dict[str, Finished | str] = {}
        for (queue, job_id), (row, done, failed) in zip(jobs, rows):
            if all(v is None for v in row):
                out[job_id] = "lost"
            elif done is not None or failed is not None:
                out[job_id] = self._finished(queue, job_id, "completed" if done is not None else "dead", row) \
                    or "unfinished"
            else:
                out[job_id] = "unfinished"
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Jobs per BullMQ state of each queue (all producers' jobs)."""
        out = {}
        with redis_errors("reading BullMQ counts"):
            for q in self._cursor:
                c = bullmq_counts(self.client, q, prefix=self.prefix)
                out[q] = {k: c[k] for k in ("waiting", "active", "delayed", "completed", "failed", "waiting_children")}
        return out

    def close(self) -> None:
        producer, self.producer = self.producer, None
        if producer is not None and self.loop.loop is not None:
            try:
                self.loop.call(producer.close, timeout=5.0)
            except Exception as e:  # closing is best effort
                logger.debug("closing the BullMQ producer: %s", e)
        if self._own_loop:
            self.loop.stop()
        if self.client is not None:
            self.client.close()
            self.client = None
