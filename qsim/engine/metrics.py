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
passed in (no global state). Per job it only bumps plain counts (about 2 us);
the metric families are built when scraped; ``qsim worker --metrics-port P`` serves it on
``http://0.0.0.0:P/metrics``. ``benchmarks/grafana-dashboard.json`` charts them.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from qsim.engine.connection import connect
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call, ScriptSet, run_calls

if TYPE_CHECKING:
    from qsim.engine.job import Job
    from qsim.engine.worker import Worker

__all__ = ["WorkerMetrics", "MetricsServer", "PortUnavailable", "QueueCollector", "DURATION_BUCKETS", "WAIT_BUCKETS",
           "QUEUE_STATES"]

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

    def collect(self) -> Iterator[Metric]:
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


class _Series:
    """Plain counts of one (queue, job type), updated on the event loop, read at scrape time."""

    __slots__ = ("duration", "duration_sum", "wait", "wait_sum", "completed", "failed", "retried", "dead")

    def __init__(self) -> None:
        self.duration = [0] * (len(DURATION_BUCKETS) + 1)  # per bucket (not cumulative); last: +Inf
        self.duration_sum = 0.0
        self.wait = [0] * (len(WAIT_BUCKETS) + 1)
        self.wait_sum = 0.0
        self.completed = self.failed = self.retried = self.dead = 0


def _histogram(name: str, doc: str, bounds: Sequence[float], rows: list[tuple[list[str], list[int], float]]
               ) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(name, doc, labels=["queue", "job"])
    for labels, counts, total in rows:
        acc, buckets = 0, []
        for bound, n in zip([*map(floatToGoString, bounds), "+Inf"], counts):
            acc += n
            buckets.append((bound, float(acc)))
        fam.add_metric(labels, buckets, total)
    return fam


class WorkerMetrics(Collector):
    """Prometheus metrics of one worker (a collector in its own registry).

    The per-job cost is a few list increments in the worker's event loop (no
    lock, no Redis round trip); the metric families are built when scraped.

    Args:
        worker: The worker to observe (attempts are timed by its attempt
            hooks, ``add_hook``; outcomes come from its ``on(...)`` callbacks).
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
        self.series: dict[tuple[str, str], _Series] = {}
        self.stalled = 0
        self._queues = ",".join(worker.queues)
        self.registry.register(self)
        self.collector: QueueCollector | None = None
        if queue_stats:
            self.collector = QueueCollector(worker.url, worker.all_keys)
            self.registry.register(self.collector)
        self._server: Any = None
        self._attach()

    def _get(self, job: Job) -> _Series:
        key = (job.queue, job.name)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = _Series()
        return s

    # -- attempt hooks (see qsim.engine.hooks) ------------------------------------
    def before_attempt(self, job: Job) -> None:
        """Count the wait of a first attempt (enqueue -> start)."""
        waited = job.wait
        if waited is not None:
            s = self._get(job)
            s.wait[bisect_left(WAIT_BUCKETS, waited)] += 1
            s.wait_sum += waited

    def after_attempt(self, job: Job, seconds: float, error: BaseException | None) -> None:
        """Count the handler time of an attempt, however it ended."""
        s = self._get(job)
        s.duration[bisect_left(DURATION_BUCKETS, seconds)] += 1
        s.duration_sum += seconds

    def _attach(self) -> None:
        w = self.worker
        w.add_hook(self)
        get = self._get

        def completed(job: Job, result: Any) -> None:
            get(job).completed += 1

        def failed(job: Job, exc: BaseException) -> None:
            get(job).failed += 1

        def retried(job: Job, exc: BaseException) -> None:
            get(job).retried += 1

        def dead(job: Job, exc: BaseException) -> None:
            get(job).dead += 1

        def stalled(job_id: str) -> None:
            self.stalled += 1

        for event, cb in (("completed", completed), ("failed", failed), ("retrying", retried), ("dead", dead),
                          ("stalled", stalled)):
            w.on(event, cb)

    def collect(self) -> Iterator[Metric]:
        items = list(self.series.items())
        yield _histogram("qsim_job_duration_seconds", "Handler time of each attempt", DURATION_BUCKETS,
                         [([q, j], list(s.duration), s.duration_sum) for (q, j), s in items])
        yield _histogram("qsim_job_wait_seconds", "Enqueue to start of the first attempt (Redis clock)",
                         WAIT_BUCKETS, [([q, j], list(s.wait), s.wait_sum) for (q, j), s in items])
        for name, doc, attr in (("qsim_jobs_completed", "Jobs completed", "completed"),
                                ("qsim_jobs_failed", "Failed attempts (retried or not)", "failed"),
                                ("qsim_jobs_retried", "Failed attempts that will be retried", "retried"),
                                ("qsim_jobs_dead", "Jobs moved to the dead-letter queue", "dead")):
            fam = CounterMetricFamily(name, doc, labels=["queue", "job"])
            for (q, j), s in items:
                fam.add_metric([q, j], getattr(s, attr))
            yield fam
        fam = CounterMetricFamily("qsim_jobs_stalled", "Stalled jobs found by this worker", labels=["queue"])
        fam.add_metric([self._queues], self.stalled)
        yield fam
        w = self.worker
        active = GaugeMetricFamily("qsim_worker_active_jobs", "Jobs running in the worker now", labels=["worker"])
        active.add_metric([w.id], float(w.active))
        yield active
        conc = GaugeMetricFamily("qsim_worker_concurrency", "Jobs the worker runs at once at most", labels=["worker"])
        conc.add_metric([w.id], float(w.concurrency))
        yield conc

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


class PortUnavailable(OSError):
    """The metrics server cannot listen on its port (in use, or not allowed)."""


class MetricsServer:
    """A lifecycle hook (:mod:`qsim.engine.hooks`) serving ``metrics`` on ``port`` while the worker runs:
    ``worker.add_hook(MetricsServer(metrics, 9100))``.

    Args:
        metrics: what to serve (its registry, e.g. with an advisor's collector registered too).
        port, addr: where (``port`` 0 picks a free one).
        said: called with the port once it serves.

    Raises (from ``on_start``, so from ``Worker.run()``):
        PortUnavailable: the port cannot be listened on.
    """

    def __init__(self, metrics: WorkerMetrics, port: int, *, addr: str = "0.0.0.0",
                 said: Callable[[int], None] | None = None) -> None:
        self.metrics, self.port, self.addr, self.said = metrics, port, addr, said

    async def on_start(self, worker: Any) -> None:
        """Serve ``/metrics``."""
        try:
            port = self.metrics.serve(self.port, self.addr)
        except OSError as e:
            raise PortUnavailable(f"cannot serve metrics on port {self.port}: {e}") from e
        if self.said is not None:
            self.said(port)

    async def on_stop(self, worker: Any) -> None:
        """Stop serving; close the metrics' Redis client."""
        self.metrics.close()
