"""A BullMQ queue's state as Prometheus gauges: what an autoscaler of BullMQ workers scales on.

BullMQ's workers export no metrics of their own, and KEDA's ``redis`` list
trigger (``LLEN bull:Q:wait``) misses the jobs that wait with a priority (a
sorted set, ``bull:Q:prioritized``). ``qsim advise --from bullmq --watch S
--metrics-port P`` serves, beside its advice, these gauges read from the
queue's keys (read-only; :mod:`qsim.calibrate.bullmq_source` lists the keys)::

    qsim_bullmq_jobs{queue,state}                 state waiting: wait + paused lists and the prioritized set;
                                                  active: the active list; delayed: the delayed set
    qsim_bullmq_oldest_waiting_age_seconds{queue} now (Redis' clock) minus the oldest waiting job's timestamp
                                                  (0: none waiting)

They are what the model's ``list_length`` (jobs waiting), ``in_flight``
(waiting + active) and ``oldest_age`` read; the engine harness and the
Locust BullMQ target count the same keys with :func:`bullmq_counts`. The oldest age looks at both ends
of the waiting lists and at up to :data:`PRIORITIZED_SCAN` prioritized jobs
(the set is ordered by priority, not age), so with more prioritized jobs
than that waiting it is a lower bound.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from prometheus_client.core import GaugeMetricFamily, Metric

from qsim.bullmq.options import DEFAULT_PREFIX

__all__ = ["QueueState", "read_state", "bullmq_counts", "BullMQCollector", "BULLMQ_METRICS", "BULLMQ_KEYS",
           "PRIORITIZED_SCAN"]

logger = logging.getLogger(__name__)

#: The gauges :class:`BullMQCollector` exports.
BULLMQ_METRICS = ("qsim_bullmq_jobs", "qsim_bullmq_oldest_waiting_age_seconds")
#: The keys :func:`bullmq_counts` reads and their Redis types.
BULLMQ_KEYS = {"wait": "list", "paused": "list", "active": "list", "prioritized": "zset", "delayed": "zset",
               "waiting-children": "zset", "completed": "zset", "failed": "zset"}
#: Prioritized jobs whose timestamps are read for the oldest age.
PRIORITIZED_SCAN = 1000


@dataclass(frozen=True)
class QueueState:
    """One BullMQ queue's jobs by state, and the oldest waiting job's age (s)."""

    waiting: int
    active: int
    delayed: int
    oldest_age: float


def _ms(value: bytes | str | None) -> float | None:
    try:
        return float(value) if value not in (None, b"", "") else None
    except (TypeError, ValueError):
        return None


def read_state(client: redis.Redis, queue: str, prefix: str = DEFAULT_PREFIX) -> QueueState:
    """``queue``'s :class:`QueueState`, read from its keys under ``prefix`` (two round trips, read-only)."""
    def key(name: str) -> str:
        return f"{prefix}:{queue}:{name}"

    pipe = client.pipeline(transaction=False)
    pipe.llen(key("wait"))
    pipe.llen(key("paused"))
    pipe.zcard(key("prioritized"))
    pipe.llen(key("active"))
    pipe.zcard(key("delayed"))
    pipe.time()
    for name in ("wait", "paused"):
        pipe.lindex(key(name), -1)
        pipe.lindex(key(name), 0)
    pipe.zrange(key("prioritized"), 0, PRIORITIZED_SCAN - 1)
    wait, paused, prio, active, delayed, (sec, usec), *rest = pipe.execute()
    ids = {i for i in rest[:4] if i is not None} | set(rest[4])
    oldest = None
    if ids:
        pipe = client.pipeline(transaction=False)
        for job_id in ids:
            pipe.hget(key(job_id.decode() if isinstance(job_id, bytes) else str(job_id)), "timestamp")
        stamps = [t for t in (_ms(v) for v in pipe.execute()) if t is not None]
        oldest = min(stamps, default=None)
    now_ms = sec * 1000.0 + usec / 1000.0
    age = max(0.0, (now_ms - oldest) / 1000.0) if oldest is not None else 0.0
    return QueueState(waiting=wait + paused + prio, active=active, delayed=delayed, oldest_age=age)


def bullmq_counts(client: Any, queue: str, *, prefix: str = DEFAULT_PREFIX) -> dict[str, int]:
    """The job counts of ``queue`` under ``prefix`` on ``client`` (a sync redis-py client), one pipeline (a
    snapshot per key: a job moving between keys during the read may be counted twice or not at all):
    ``waiting`` (wait + paused + prioritized), ``active``, ``in_flight`` (the two), ``delayed``, ``waiting_children``,
    ``completed``, ``failed``."""
    pipe = client.pipeline(transaction=False)
    for key, kind in BULLMQ_KEYS.items():
        (pipe.llen if kind == "list" else pipe.zcard)(f"{prefix}:{queue}:{key}")
    got = dict(zip(BULLMQ_KEYS, (int(x) for x in pipe.execute())))
    waiting = got["wait"] + got["paused"] + got["prioritized"]  # as read_state and the exported gauge count them
    return {"waiting": waiting, "active": got["active"], "in_flight": waiting + got["active"],
            "delayed": got["delayed"], "waiting_children": got["waiting-children"], "completed": got["completed"],
            "failed": got["failed"]}


class BullMQCollector:
    """The gauges of the module docstring for ``queues``, read from Redis at each scrape."""

    def __init__(self, url: str, queues: Sequence[str], prefix: str = DEFAULT_PREFIX) -> None:
        self.client = redis.Redis.from_url(url, socket_timeout=5.0)
        self.queues = tuple(queues)
        self.prefix = prefix

    def collect(self) -> Iterator[Metric]:
        """One sample per queue and state; none for a queue Redis could not be read for (logged)."""
        jobs = GaugeMetricFamily("qsim_bullmq_jobs", "Jobs of a BullMQ queue by state (read from its keys)",
                                 labels=["queue", "state"])
        age = GaugeMetricFamily("qsim_bullmq_oldest_waiting_age_seconds",
                                "Age of the oldest job waiting in a BullMQ queue (0: none)", labels=["queue"])
        for q in self.queues:
            try:
                s = read_state(self.client, q, self.prefix)
            except redis.RedisError as e:
                logger.warning("reading BullMQ queue %s: %s", q, e)
                continue
            for state, n in (("waiting", s.waiting), ("active", s.active), ("delayed", s.delayed)):
                jobs.add_metric([q, state], n)
            age.add_metric([q], s.oldest_age)
        yield jobs
        yield age
