"""Prometheus metrics of a :class:`~qsim.engine.worker.Worker` (prometheus-client).

Per job (recorded in the worker's process, no Redis round trip)::

    qsim_job_duration_seconds{queue, job}      histogram  handler time of each attempt
    qsim_job_wait_seconds{queue, job}          histogram  enqueue -> start of the first attempt
                                                          (Redis clock; needs a fetch that reports it)
    qsim_jobs_completed_total{queue, job}      counter    completed jobs
    qsim_jobs_failed_total{queue, job}         counter    failed attempts (retried or not)
    qsim_jobs_retried_total{queue, job}        counter    failed attempts that will be retried
    qsim_jobs_dead_total{queue, job}           counter    jobs moved to the dead-letter queue
    qsim_jobs_stalled_total{queue}             counter    stalled jobs this worker found
                                                          (queue = the worker's queues, comma-joined)
    qsim_worker_active_jobs{worker}            gauge      jobs running now
    qsim_worker_concurrency{worker}            gauge      the worker's concurrency

Per queue, read from Redis when scraped (one ``queue_stats`` script call per
queue, on a sync client of the collector's own)::

    qsim_queue_jobs{queue, state}              gauge      state = waiting | delayed | active |
                                                          waiting_children | dead
    qsim_queue_oldest_waiting_age_seconds{queue}  gauge   age of the oldest waiting job (0: none);
                                                          the oldest head of the 32 best priority levels

p50/p95/p99 come from the histograms, e.g.
``histogram_quantile(0.95, sum by (le, queue) (rate(qsim_job_wait_seconds_bucket[5m])))``.

Each :class:`WorkerMetrics` has its own ``CollectorRegistry`` unless one is
passed in (no global state); ``qsim worker --metrics-port P`` serves it on
``http://0.0.0.0:P/metrics``. ``benchmarks/grafana-dashboard.json`` charts them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from qsim.engine.connection import connect
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call, ScriptSet, run_calls

if TYPE_CHECKING:
    from qsim.engine.job import Job
    from qsim.engine.worker import Worker

__all__ = ["WorkerMetrics", "QueueCollector", "DURATION_BUCKETS", "WAIT_BUCKETS", "QUEUE_STATES"]

logger = logging.getLogger(__name__)

#: Histogram buckets (seconds): jobs from sub-millisecond no-ops to minutes.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    120.0, 300.0)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                600.0, 1800.0)
QUEUE_STATES = ("waiting", "delayed", "active", "waiting_children", "dead")
_LEVELS = 32


def queue_stats_call(k: QueueKeys, levels: int = _LEVELS) -> Call:
    return Call("queue_stats", (k.wait, k.delayed, k.active, k.waiting_children, k.dead), (k.job_prefix, levels))


class QueueCollector(Collector):
    """Queue depth and oldest-waiting age, read from Redis at scrape time.

    Args:
        url: Redis URL (``redis+cluster://`` for Cluster); a sync client is
            made on first scrape (scrapes run in the HTTP server's thread).
        keys: The queues to report.
    """

    def __init__(self, url: str, keys: Sequence[QueueKeys]) -> None:
        self.url = url
        self.keys = list(keys)
        self._client: Any = None
        self._scripts: ScriptSet | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily("qsim_queue_jobs", "Jobs in a queue per state (read from Redis at scrape time)",
                                  labels=["queue", "state"])
        age = GaugeMetricFamily("qsim_queue_oldest_waiting_age_seconds",
                                "Seconds since the oldest waiting job of the queue was enqueued (0: none waits)",
                                labels=["queue"])
        try:
            if self._client is None:
                self._client = connect(self.url, socket_connect_timeout=2.0, socket_timeout=2.0)
                self._scripts = ScriptSet(self._client)
            assert self._scripts is not None
            replies = run_calls(self._client, self._scripts, [queue_stats_call(k) for k in self.keys])
        except Exception as e:  # noqa: BLE001 - a scrape must not fail because Redis is away
            logger.warning("metrics: cannot read queue depths from Redis: %s", e)
            return
        for k, r in zip(self.keys, replies):
            for state, n in zip(QUEUE_STATES, r[:5]):
                depth.add_metric([k.queue, state], float(n))
            age.add_metric([k.queue], float(r[5]) if r[5] else 0.0)
        yield depth
        yield age

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class WorkerMetrics:
    """Prometheus metrics of one worker; :meth:`attach` before ``worker.run()``.

    Args:
        worker: The worker to observe (its handler is wrapped to time
            attempts; outcomes come from its ``on(...)`` callbacks).
        registry: Where the metrics go (default: a new ``CollectorRegistry``).
        queue_stats: Also report queue depths read from Redis at scrape time.

    Example::

        worker = Worker("orders", handle, redis=url)
        metrics = WorkerMetrics(worker)
        metrics.serve(9100)          # http://host:9100/metrics
        await worker.run()
    """

    def __init__(self, worker: Worker, *, registry: CollectorRegistry | None = None, queue_stats: bool = True) -> None:
        self.worker = worker
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        qj = ["queue", "job"]
        self.duration = Histogram("qsim_job_duration_seconds", "Handler time of each attempt", qj,
                                  buckets=DURATION_BUCKETS, registry=r)
        self.wait = Histogram("qsim_job_wait_seconds", "Enqueue to start of the first attempt (Redis clock)", qj,
                              buckets=WAIT_BUCKETS, registry=r)
        self.completed = Counter("qsim_jobs_completed", "Jobs completed", qj, registry=r)
        self.failed = Counter("qsim_jobs_failed", "Failed attempts (retried or not)", qj, registry=r)
        self.retried = Counter("qsim_jobs_retried", "Failed attempts that will be retried", qj, registry=r)
        self.dead = Counter("qsim_jobs_dead", "Jobs moved to the dead-letter queue", qj, registry=r)
        self.stalled = Counter("qsim_jobs_stalled", "Stalled jobs found by this worker", ["queue"], registry=r)
        wid = worker.id
        Gauge("qsim_worker_active_jobs", "Jobs running in the worker now", ["worker"],
              registry=r).labels(wid).set_function(lambda: float(worker.active))
        Gauge("qsim_worker_concurrency", "Jobs the worker runs at once at most", ["worker"],
              registry=r).labels(wid).set(worker.concurrency)
        self.collector: QueueCollector | None = None
        if queue_stats:
            keys = getattr(worker, "all_keys", None) or [worker.keys]
            self.collector = QueueCollector(worker.url, keys)
            r.register(self.collector)
        self._server: Any = None
        self.attach()

    def attach(self) -> None:
        """Wrap the worker's handler and register the outcome callbacks (done by the constructor)."""
        w = self.worker
        if getattr(w.handler, "_qsim_metrics", None) is self:
            return
        inner = w.handler
        duration = self.duration
        wait = self.wait
        children: dict[tuple[str, str], Any] = {}

        async def timed(job: Job) -> Any:
            key = (job.queue, job.name)
            h = children.get(key)
            if h is None:
                h = children[key] = (duration.labels(*key), wait.labels(*key))
            waited = getattr(job, "wait", None)
            if waited is not None:
                h[1].observe(waited)
            t0 = time.perf_counter()
            try:
                return await inner(job)
            finally:
                h[0].observe(time.perf_counter() - t0)

        timed._qsim_metrics = self  # type: ignore[attr-defined]
        w.handler = timed
        w.on("completed", lambda job, result: self.completed.labels(job.queue, job.name).inc())
        w.on("failed", lambda job, exc: self.failed.labels(job.queue, job.name).inc())
        w.on("retrying", lambda job, exc: self.retried.labels(job.queue, job.name).inc())
        w.on("dead", lambda job, exc: self.dead.labels(job.queue, job.name).inc())
        queues = ",".join(getattr(w, "queues", None) or [w.queue])
        w.on("stalled", lambda job_id: self.stalled.labels(queues).inc())

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` over HTTP in a daemon thread; returns the port (0 picks a free one)."""
        self._server, _ = start_http_server(port, addr, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop the HTTP server (if any) and close the collector's Redis client."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.collector is not None:
            self.collector.close()
