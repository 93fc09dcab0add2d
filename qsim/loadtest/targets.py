"""Where a load test adds its jobs and watches them end: the qsim engine, or BullMQ (``--target``).

Nothing here imports Locust. A :class:`Target` is the small part of a load
test that knows one queue system's keys:

- :meth:`~Target.connect` opens the queues and marks the event streams' position;
- :meth:`~Target.add` adds one job (or a flow parent with its children);
- :meth:`~Target.poll` reads the events of jobs that ended and returns them
  as :class:`Finished` rows (times from the job hashes);
- :meth:`~Target.lookup` reads, at the end, what became of jobs never seen to end;
- :meth:`~Target.counts` and :meth:`~Target.close`.

:class:`EngineTarget` is qsim's engine (``--target qsim``, the default);
:class:`qsim.loadtest.bullmq.BullMQTarget` is BullMQ's Redis layout.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from qsim.engine import Queue, SyncFlowProducer
from qsim.engine.scripts import redis_errors
from qsim.spec.scenario import Scenario

__all__ = ["Finished", "Target", "EngineTarget", "OBSERVED_EVENTS", "TARGETS", "Child"]

logger = logging.getLogger(__name__)

#: The ``--target`` choices.
TARGETS = ("qsim", "bullmq")
#: Engine stream events that end a job: reported as job latencies.
OBSERVED_EVENTS = ("completed", "dead")
#: ``(queue, job type, job id, payload, options)`` of a flow child, as :class:`~qsim.loadtest.mix.NextJob` has it.
Child = tuple[str, str, str, Any, dict[str, Any]]


@dataclass(frozen=True)
class Finished:
    """One job of this run that ended, as read from Redis (seconds since the epoch)."""

    job_id: str
    type: str
    queue: str
    outcome: str  # "completed" | "dead"
    enqueued_at: float
    wait: float | None  # enqueue -> start of the first attempt (None: never started, or not recorded)
    latency: float  # enqueue -> completion (or death)
    error: str | None
    attempts: int = 1  # attempts made (-1: not recorded)
    failed_attempts: int = 0  # attempts that failed (-1: not recorded)


class Target(Protocol):
    """A queue system a load test adds to (see the module docstring)."""

    #: What the target is, for logs (``qsim engine`` / ``BullMQ``).
    label: str

    def connect(self) -> None: ...

    def add(self, queue: str, job_type: str, job_id: str, payload: Any, options: dict[str, Any],
            children: Sequence[Child] = (), on_child_failure: str = "fail") -> bool:
        """Add one job (with ``children``: a flow parent); False when its id already existed."""
        ...

    def poll(self, run_prefix: str, block: float = 1.0, count: int = 500) -> list[Finished]: ...

    def lookup(self, jobs: Sequence[tuple[str, str]]) -> dict[str, Finished | str]:
        """For ``(queue, job id)`` pairs: the :class:`Finished` row of a job that ended,
        ``"unfinished"`` for one still queued or running, ``"lost"`` for one Redis no longer holds."""
        ...

    def counts(self) -> dict[str, dict[str, int]]: ...

    def close(self) -> None: ...


class EngineTarget:
    """qsim's engine: its queues under ``prefix``, its events streams, its job hashes (Redis's clock).

    Args:
        scenario: Its queue names are the queues.
        redis_url: The Redis.
        prefix: The engine's key prefix (``--qsim-prefix``).
    """

    label = "qsim engine"

    def __init__(self, scenario: Scenario, redis_url: str, *, prefix: str) -> None:
        self.scenario, self.redis_url, self.prefix = scenario, redis_url, prefix
        self.queues: dict[str, Queue] = {}
        self.flows: SyncFlowProducer | None = None
        self._cursor: dict[str, str] = {}

    def connect(self) -> None:
        """Open the queues (one client for all) and mark the stream position to observe from.

        Raises:
            RedisUnavailable: Redis cannot be reached.
        """
        first: Queue | None = None
        for q in self.scenario.queues:
            queue = Queue(q.name, redis=first.client if first else self.redis_url, prefix=self.prefix)
            first = first or queue
            self.queues[q.name] = queue
        assert first is not None
        if any(j.flow is not None for j in self.scenario.jobs):
            self.flows = SyncFlowProducer(redis=first.client, prefix=self.prefix)
        with redis_errors("connecting the load test"):
            sec, usec = first.client.time()
        start = f"{int(sec) * 1000 + int(usec) // 1000 - 1}-0"  # events from now on (Redis clock)
        self._cursor = {name: start for name in self.queues}

    def add(self, queue: str, job_type: str, job_id: str, payload: Any, options: dict[str, Any],
            children: Sequence[Child] = (), on_child_failure: str = "fail") -> bool:
        q = self.queues[queue]
        if children:
            assert self.flows is not None
            kids = [(cq, kind, data, opts) for cq, kind, _cid, data, opts in children]
            return bool(self.flows.add(parent=(q.name, job_type, payload, options), children=kids,
                                       on_child_failure=on_child_failure).created)
        return bool(q.add(job_type, payload, **options).created)

    def poll(self, run_prefix: str, block: float = 1.0, count: int = 500) -> list[Finished]:
        """The jobs whose id starts with ``run_prefix`` that completed or died since the last call."""
        ended: list[tuple[str, str, str]] = []  # (queue, job id, event)
        per_queue = max(1, int(block * 1000 / max(1, len(self.queues))))
        with redis_errors("reading job events"):
            for name, queue in self.queues.items():
                reply = queue.client.xread({queue.keys.events: self._cursor[name]}, count=count, block=per_queue)
                for _stream, entries in reply or []:
                    for entry_id, fields in entries:
                        self._cursor[name] = entry_id
                        event, job_id = fields.get("event"), fields.get("job", "")
                        if event in OBSERVED_EVENTS and job_id.startswith(run_prefix):
                            ended.append((name, job_id, event))
            rows = self._read([(q, j) for q, j, _ in ended])
        out = []
        for (name, job_id, event), row in zip(ended, rows):
            done = self._finished(name, job_id, event, row)
            if done is not None:
                out.append(done)
        return out

    _FIELDS = ("name", "enqueued_at", "started_at", "finished_at", "error", "state", "attempts_made")

    def _read(self, jobs: Sequence[tuple[str, str]]) -> list[list[Any]]:
        if not jobs:
            return []
        first = next(iter(self.queues.values()))
        pipe = first.client.pipeline(transaction=False)
        for name, job_id in jobs:
            pipe.hmget(self.queues[name].keys.job(job_id), *self._FIELDS)
        return list(pipe.execute())

    @staticmethod
    def _finished(queue: str, job_id: str, event: str, row: list[Any]) -> Finished | None:
        job_type, enq, started, finished, error, _state, made = row
        if not enq or not finished:
            logger.debug("job %s ended but its hash is gone (retention): not measured", job_id)
            return None
        e, f = float(enq), float(finished)
        attempts = int(made) if made not in (None, "") else 1
        failed = attempts - 1 if event == "completed" else attempts
        return Finished(job_id=job_id, type=job_type or "?", queue=queue, outcome=event, enqueued_at=e,
                        wait=float(started) - e if started else None, latency=f - e, error=error,
                        attempts=attempts, failed_attempts=max(failed, 0))

    def lookup(self, jobs: Sequence[tuple[str, str]]) -> dict[str, Finished | str]:
        with redis_errors("reading jobs"):
            rows = self._read(jobs)
        out: dict[str, Finished | str] = {}
        for (queue, job_id), row in zip(jobs, rows):
            state = row[5]
            if state is None and row[1] is None:
                out[job_id] = "lost"
            elif state in ("completed", "dead"):
                out[job_id] = self._finished(queue, job_id, state, row) or "unfinished"
            else:
                out[job_id] = "unfinished"
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Jobs per state of each queue (all producers' jobs, not only this run's)."""
        return {name: q.counts() for name, q in self.queues.items()}

    def close(self) -> None:
        first = True
        for q in self.queues.values():
            if first:
                q.close()  # the others share its client
                first = False
        self.queues.clear()
