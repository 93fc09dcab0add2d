"""Advice that keeps itself up to date: :func:`watch` (``qsim advise --watch``) and :class:`Advisor`
(``qsim worker --advise-slo``), which exports it as Prometheus metrics.

Each recomputation runs in a helper process (:class:`AdviceProcess`: spawned
once and kept, ``SIGINT`` ignored, optionally at a lower CPU priority), so a
worker's event loop never waits for the planner and Ctrl-C ends a watch
without tracebacks from the planner's processes. The cost per recomputation
is the calibration (pandas on the window's jobs) plus the plan's simulations:
``Advice.cpu_seconds`` measures it, :class:`AdviceCollector` exports it.

Metrics of :class:`AdviceCollector` (gauges; ``queue`` = the advised queues, comma-joined)::

    qsim_recommended_workers{queue}               the least workers meeting the SLOs (absent: none can,
                                                  or no advice yet; see qsim_advice_slo_reachable)
    qsim_predicted_wait_seconds{queue,quantile}   the model's wait at that count, quantile 0.5 | 0.95 | 0.99
    qsim_advice_slo_reachable{queue}              1 when some worker count meets the SLOs, 0 when none can
    qsim_advice_observed_workers{queue}           workers seen running at once in the window
    qsim_advice_arrival_rate{queue}               jobs per second enqueued in the window
    qsim_advice_cpu_seconds{queue}                CPU the last recomputation took (helper process)
    qsim_advice_timestamp_seconds{queue}          when the last advice was made (Unix time)
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from qsim.advise.core import DEFAULT_WINDOW, advise, parse_slos, parse_window
from qsim.advise.result import Advice, NoJobsInWindow, Unavailable
from qsim.analysis.slo.language import SLO
from qsim.errors import QsimError

__all__ = ["AdviceProcess", "watch", "Advisor", "LatestAdvice", "AdviceCollector", "WORKER_BUDGET", "DEFAULT_EVERY",
           "QUANTILES", "ADVICE_METRICS"]

logger = logging.getLogger(__name__)

#: ``--advise-every``: seconds between recomputations in a worker.
DEFAULT_EVERY = 60.0
#: The plan's budget in a worker: fixed replications, short runs, one process (a bounded, known cost).
WORKER_BUDGET: dict[str, Any] = {"replications": 5, "jobs_per_run": 5_000, "processes": 1, "search": "auto"}
#: The gauges :class:`AdviceCollector` exports.
ADVICE_METRICS = ("qsim_recommended_workers", "qsim_predicted_wait_seconds", "qsim_advice_slo_reachable",
                  "qsim_advice_observed_workers", "qsim_advice_arrival_rate", "qsim_advice_cpu_seconds",
                  "qsim_advice_timestamp_seconds")
#: ``qsim_predicted_wait_seconds`` quantiles and the Summary fields they come from.
QUANTILES = (("0.5", "p50"), ("0.95", "p95"), ("0.99", "p99"))


def _orphaned(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:  # the parent died (even by SIGKILL): so do the helper and its planners
            os.killpg(os.getpgrp(), signal.SIGKILL)


def _quiet(nice: int, parent: int) -> None:
    """The helper process leads a process group of its own (the plan's processes join it, so one signal
    ends them all), ignores Ctrl-C (its parent decides when it ends), yields CPU when asked, and ends
    within a second of its parent's death."""
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if nice:
        try:
            os.nice(nice)
        except OSError:  # pragma: no cover - not allowed here: run at the parent's priority
            pass
    threading.Thread(target=_orphaned, args=(parent,), name="qsim-advice-parent", daemon=True).start()


def _advise_light(url: str, queues: Sequence[str], slos: Sequence[SLO], options: dict[str, Any]) -> Advice:
    return advise(url, queues, slos, **options).light()


class AdviceProcess:
    """Computes advice in one helper process, spawned on first use and kept (imports are paid once).

    Args:
        nice: Added to the helper's CPU niceness (a worker's advisor uses 10: jobs come first).
    """

    def __init__(self, *, nice: int = 0) -> None:
        self.nice = nice
        self._pool: ProcessPoolExecutor | None = None

    def advise(self, url: str, queues: Sequence[str], slo: Any, **options: Any) -> Advice:
        """:func:`qsim.advise.advise` in the helper process (its exceptions are raised here)."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_quiet, initargs=(self.nice, os.getpid()))
        try:
            return self._pool.submit(_advise_light, url, list(queues), parse_slos(slo), options).result()
        except BrokenProcessPool as e:
            self._pool = None
            raise QsimError(f"the advice helper process died: {e}") from e

    def close(self) -> None:
        """Stop the helper process (a computation in progress is abandoned)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)  # the helper and the plan's processes it started
            except (ProcessLookupError, PermissionError, TypeError):
                p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(1)


def watch(url: str, queues: str | Sequence[str], slo: Any, *, every: float = DEFAULT_EVERY,
          stop: threading.Event | None = None, helper: AdviceProcess | None = None, strict: bool = True,
          **options: Any) -> Iterator[Advice | Unavailable]:
    """Advice every ``every`` seconds (from the start of one computation to the next) until ``stop`` is set.

    Yields an :class:`~qsim.advise.result.Advice`, or an
    :class:`~qsim.advise.result.Unavailable` when this round could not advise
    (no jobs in the window, Redis away...). With ``strict`` the first round's
    other errors (a queue that is not there, an unreachable Redis) are raised,
    as are bad arguments; later rounds never raise. ``options`` go to :func:`qsim.advise.advise`; the computation
    runs in ``helper`` (default: an :class:`AdviceProcess` of its own, closed at the end), the plan in
    one process unless ``processes`` says otherwise.
    """
    if not (every > 0 and math.isfinite(every)):
        raise ValueError(f"every must be > 0 seconds, got {every!r}")
    names = [queues] if isinstance(queues, str) else list(queues)
    slos = parse_slos(slo)
    parse_window(options.get("window", DEFAULT_WINDOW))
    if options.get("processes") is None:
        options["processes"] = 1  # the plan in the helper itself: no processes started per round
    own = helper is None
    proc = helper or AdviceProcess()
    stop = stop or threading.Event()
    first = True
    try:
        while not stop.is_set():
            started = time.monotonic()
            result: Advice | Unavailable
            try:
                result = proc.advise(url, names, slos, **options)
            except NoJobsInWindow as e:
                result = Unavailable(tuple(names), str(e), time.time())
            except Exception as e:  # noqa: BLE001 - a watch outlives a bad round (Redis away, a pandas error)
                if first and strict:
                    raise
                logger.warning("advice for %s failed: %s", ",".join(names), e)
                result = Unavailable(tuple(names), str(e), time.time())
            first = False
            yield result
            if stop.wait(max(0.0, every - (time.monotonic() - started))):
                break
    finally:
        if own:
            proc.close()


class LatestAdvice:
    """The latest advice (or why there is none) for a set of queues, and when it was made."""

    def __init__(self, queues: Sequence[str]) -> None:
        self.queue = ",".join(queues)
        self.latest: Advice | Unavailable | None = None
        self.computed_at = math.nan

    def update(self, item: Advice | Unavailable) -> None:
        """Keep ``item`` as the latest (computed now)."""
        self.latest, self.computed_at = item, time.time()


class AdviceCollector(Collector):
    """The latest advice of an :class:`Advisor` (or any :class:`LatestAdvice`) as Prometheus gauges
    (see the module docstring)."""

    def __init__(self, source: LatestAdvice) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        latest, q = self.source.latest, self.source.queue
        rec = GaugeMetricFamily("qsim_recommended_workers", "Least workers meeting the SLOs (qsim advise)",
                                labels=["queue"])
        wait = GaugeMetricFamily("qsim_predicted_wait_seconds", "Predicted wait at the recommended workers",
                                 labels=["queue", "quantile"])
        ok = GaugeMetricFamily("qsim_advice_slo_reachable", "1: some worker count meets the SLOs; 0: none can",
                               labels=["queue"])
        seen = GaugeMetricFamily("qsim_advice_observed_workers", "Workers seen running at once in the window",
                                 labels=["queue"])
        rate = GaugeMetricFamily("qsim_advice_arrival_rate", "Jobs per second enqueued in the window",
                                 labels=["queue"])
        cpu = GaugeMetricFamily("qsim_advice_cpu_seconds", "CPU seconds of the last advice recomputation",
                                labels=["queue"])
        when = GaugeMetricFamily("qsim_advice_timestamp_seconds", "When the last advice was made (Unix time)",
                                 labels=["queue"])
        if isinstance(latest, Advice):
            if latest.recommended_workers is not None:
                rec.add_metric([q], float(latest.recommended_workers))
                for label, key in QUANTILES:
                    value = latest.predicted_wait(key)
                    if value is not None:
                        wait.add_metric([q, label], value)
            ok.add_metric([q], 1.0 if latest.recommended_workers is not None else 0.0)
            seen.add_metric([q], float(latest.current_workers))
            rate.add_metric([q], latest.arrival_rate)
            cpu.add_metric([q], latest.cpu_seconds)
        if latest is not None:
            when.add_metric([q], self.source.computed_at)
        yield from (rec, wait, ok, seen, rate, cpu, when)


class Advisor(LatestAdvice):
    """Recomputes advice in the background every ``every`` seconds and keeps the latest.

    Args:
        url, queues, slo: What to advise (as :func:`qsim.advise.advise`).
        every: Seconds between recomputations (:data:`DEFAULT_EVERY`).
        nice: CPU niceness added to the helper process (default 10: jobs come first).
        options: For :func:`qsim.advise.advise`; :data:`WORKER_BUDGET` unless overridden.

    Example (next to a worker's metrics)::

        advisor = Advisor(url, ["orders"], "p95_wait<=2", concurrency=10)
        metrics.registry.register(advisor.collector)
        advisor.start()
        ...
        advisor.close()

    or, started and closed with the worker's run (a lifecycle hook, :mod:`qsim.engine.hooks`)::

        worker.add_hook(advisor)
    """

    def __init__(self, url: str, queues: str | Sequence[str], slo: Any, *, every: float = DEFAULT_EVERY,
                 nice: int = 10, **options: Any) -> None:
        self.url, self.every = url, every
        self.queues = [queues] if isinstance(queues, str) else list(queues)
        super().__init__(self.queues)
        self.slos = parse_slos(slo)
        self.options = {**WORKER_BUDGET, **options}
        parse_window(self.options.get("window", DEFAULT_WINDOW))
        self.collector = AdviceCollector(self)
        self._helper = AdviceProcess(nice=nice)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the background thread (a daemon: it never keeps the process alive)."""
        self._thread = threading.Thread(target=self._loop, name="qsim-advisor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        for item in watch(self.url, self.queues, self.slos, every=self.every, stop=self._stop, helper=self._helper,
                          strict=False, **self.options):
            self.update(item)
            if isinstance(item, Advice):
                logger.info("advice: %s (%.2f s CPU)", item.line(), item.cpu_seconds)

    async def on_start(self, worker: Any) -> None:
        """As a worker's lifecycle hook (:mod:`qsim.engine.hooks`): :meth:`start`."""
        self.start()

    async def on_stop(self, worker: Any) -> None:
        """As a worker's lifecycle hook: :meth:`close`."""
        self.close()

    def close(self) -> None:
        """Stop the thread and the helper process."""
        self._stop.set()
        self._helper.close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
