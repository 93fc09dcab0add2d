"""Autoscalers on the real engine: the model's controllers driving real worker processes.

:class:`EngineAutoscaler` runs one ``[[autoscalers]]`` table during an engine
run (:mod:`qsim.harness.run`) with the very controller code the model uses
(:mod:`qsim.autoscale`). At the controller's decision times from the run's start
(:func:`~qsim.autoscale.build.decision_times`, as in the model) it reads
the real queue's metrics from Redis — what a KEDA/Prometheus setup sees:

- ``list_length``, ``in_flight`` and ``oldest_age``: the engine's own queue gauges
  (:class:`qsim.engine.metrics.QueueCollector`: ``qsim_queue_jobs{state="waiting"}``,
  that plus ``qsim_queue_jobs{state="active"}`` (the jobs fetched and not yet
  acknowledged, by any process), and ``qsim_queue_oldest_waiting_age_seconds``,
  summed / maxed over the pool's queues);
- only when the policy reads them, the p95 wait of the jobs that started in
  the last ``window`` seconds, their arrival rate and the run times of the
  attempts that ended in it, from the jobs' records in Redis
  (:meth:`qsim.engine.AsyncQueue.job_records`: fine for a harness run's few
  thousand jobs, not for a production queue);

(the controller is told the decision's nominal time, ``k x period``, as the model's
is, so delays and windows compare the same numbers on both sides) and acts on
:class:`~qsim.harness.processes.WorkerProcesses` as a deployment
controller would: a scale-up spawns processes at once, each taking work only
after its cold start (the pool's ``"start_delay"`` stream,
:class:`~qsim.spec.workload.StartDelays`, as in the model: the process waits for
that moment before its first fetch); a scale-down stops processes still
starting first (SIGTERM before their first fetch: they just exit), then the
newest running ones with SIGTERM and the autoscaler's ``grace`` (the
worker drains, then hands back what still runs). A process that ends without
the autoscaler stopping it (a crash, a scenario's ``sigkill`` or ``sigterm``
event; its exit code says so, looked at every ``EXIT_CHECK`` seconds and before
each poll) leaves the count at once and is replaced by a new process, with its
own cold start, as a Deployment's ReplicaSet replaces a dead pod (the
Summary's ``replacements``): the controller counts live processes only, and a
scale-down signals live ones only. Times are seconds since the run's start on
the event loop's clock.

:meth:`EngineAutoscaler.section` is the Summary's ``autoscaling`` entry, built
by the same :class:`~qsim.autoscale.tally.Tally` as the model's.

The loop, the process bookkeeping and the tally are :class:`PoolAutoscaler`'s;
a subclass says where the metrics come from (:meth:`PoolAutoscaler.gauges`,
:meth:`PoolAutoscaler.read_window`): :class:`EngineAutoscaler` reads qsim's
queues, :class:`qsim.bullmq.autoscaling.BullMQAutoscaler` a BullMQ queue's keys
and drives a user's worker command (:class:`~qsim.harness.commands.CommandProcesses`).
With ``kill_after_grace`` (a foreign worker that may not honour the grace) a
process stopped by a scale-down and still alive ``grace`` seconds after its
SIGTERM is sent SIGKILL, as Kubernetes does at ``terminationGracePeriodSeconds``
(a qsim worker hands its jobs back at the grace itself).
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import subprocess
import time
from dataclasses import replace
from typing import Any

from qsim.autoscale.build import controller, lagged_times, metric_stats
from qsim.autoscale.hpa import Recommend
from qsim.autoscale.observe import Observation, WindowStats
from qsim.autoscale.tally import Tally
from qsim.engine import AsyncQueue
from qsim.engine.eventloop import cancel_and_wait
from qsim.engine.keys import QueueKeys
from qsim.engine.metrics import QueueCollector
from qsim.harness.processes import WorkerProcesses
from qsim.spec.scenario import AutoscalerSpec, Scenario
from qsim.spec.workload import StartDelays

__all__ = ["PoolAutoscaler", "EngineAutoscaler", "queue_gauges"]

logger = logging.getLogger(__name__)

#: The metrics an Observation takes from the jobs of a sliding window (:meth:`PoolAutoscaler.read_window`).
WINDOW_METRICS = frozenset({"p95_wait", "service", "arrival_rate"})
#: Seconds between looks at the exit codes of the pool's processes (a dead one is replaced then).
EXIT_CHECK = 0.5


def queue_gauges(collector: QueueCollector) -> tuple[int, int, float]:
    """Waiting jobs and active jobs (each summed) and the oldest waiting job's age (the largest) of the
    collector's queues."""
    waiting, active, oldest = 0, 0, 0.0
    for family in collector.collect():
        for sample in family.samples:
            if sample.name == "qsim_queue_jobs" and sample.labels.get("state") == "waiting":
                waiting += int(sample.value)
            elif sample.name == "qsim_queue_jobs" and sample.labels.get("state") == "active":
                active += int(sample.value)
            elif sample.name == "qsim_queue_oldest_waiting_age_seconds":
                oldest = max(oldest, float(sample.value))
    return waiting, active, oldest


class PoolAutoscaler:
    """One autoscaled pool of a real run: the shared loop (see the module docstring). Subclasses give
    :meth:`gauges` and, for the policies that read them, :meth:`read_window`.

    Args:
        scenario, spec: the run's scenario and the pool's autoscaler.
        pools: the run's worker processes.
        url: the Redis of the ready list (``ready_key``) the new processes report to.
        ready_key: that list.
        seed: the run's seed (the cold starts' stream).
        loop_t0: the event loop's time at the run's start (arrivals count from it).
        recommend: ``qsim advise``'s recommendation, for policies that scale on it.
        kill_after_grace: SIGKILL a stopped process still alive ``grace`` seconds after its SIGTERM.
    """

    def __init__(self, scenario: Scenario, spec: AutoscalerSpec, pools: WorkerProcesses, *, url: str,
                 ready_key: str, seed: int, loop_t0: float, recommend: Recommend | None = None,
                 kill_after_grace: bool = False) -> None:
        self.scenario, self.spec, self.pools = scenario, spec, pools
        pool = scenario.pool(spec.pool)
        self.control = controller(spec, pool, recommend=recommend, scenario=scenario)
        self.needs = self.control.needs
        self.delays = StartDelays(spec, seed)
        self.window = metric_stats(spec)
        self.taken: dict[float, Observation] = {}  # with a lag: decision time -> its metrics
        self.tally = Tally(workers=pool.workers, end=scenario.duration, flap_window=spec.flap_window)
        self.loop_t0 = loop_t0
        self.ready_key = ready_key
        self.url = url
        self.kill_after_grace = kill_after_grace
        self.killed: list[str] = []  # processes sent SIGKILL at the end of their grace
        now = 0.0
        self.created: dict[str, float] = {w: now for w in pools.alive(spec.pool)}
        self.ended: dict[str, float] = {}
        self.ready: set[str] = set(self.created)
        self.starting: dict[str, float] = {}  # id -> when it takes work
        self.steps: list[tuple[float, int]] = [(0.0, len(self.ready))]  # processes taking work (Records.workers)
        self._waiters: list[asyncio.Task[None]] = []
        self._client: Any = None

    def now(self) -> float:
        """Seconds since the run's start."""
        return asyncio.get_running_loop().time() - self.loop_t0

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Decide at each decision time until cancelled."""
        import redis.asyncio

        self._client = redis.asyncio.Redis.from_url(self.url)
        watchers = [asyncio.create_task(self._watch_ready()), asyncio.create_task(self._watch_exits())]
        try:
            for at, take in lagged_times(self.control, self.spec):
                delay = self.loop_t0 + at - asyncio.get_running_loop().time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if take is None:
                    await self.poll(at)
                else:  # the metrics of the decision at `take`, metric_lag seconds before it
                    self.taken[take] = await self.observe(at, 0, 0)
        finally:
            await cancel_and_wait(watchers, raise_errors=True)  # a BLPOP loop: its cancel may be lost once
            await self._client.aclose()
            await self.close()

    async def close(self) -> None:
        """Release what :meth:`gauges` and :meth:`read_window` hold (at the end of :meth:`run`)."""

    async def _watch_ready(self) -> None:
        """Note each new process as it reports that it takes work (a blocking pop on its ready list)."""
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(self.url)
        try:
            while True:
                got = await client.blpop([self.ready_key], timeout=1)
                if got:
                    self._readied(got[1])
        finally:
            await client.aclose()

    async def _watch_exits(self) -> None:
        """Replace the processes that die, every :data:`EXIT_CHECK` seconds."""
        while True:
            await asyncio.sleep(EXIT_CHECK)
            self.replace_dead(self.now())

    def replace_dead(self, now: float) -> list[str]:
        """The pool's processes that ended without this autoscaler stopping them leave the count and are
        replaced at once, each new one after its cold start (a Deployment's ReplicaSet); their ids."""
        dead = [w for w in (*self.ready, *self.starting)
                if w not in self.ended and self.pools.procs[w].poll() is not None]
        if not dead:
            return dead
        running = 0
        for wid in dead:
            self.ended[wid] = now
            if self.starting.pop(wid, None) is None:
                self.ready.discard(wid)
                running += 1
        if running:
            self._step(now, -running)
            self.tally.readied(now, -running)
        self.tally.replaced(len(dead))
        logger.warning("t=%.2f autoscaler %s: %s ended (exit %s) without being stopped: replacing them", now,
                       self.spec.pool, ", ".join(dead), ", ".join(str(self.pools.procs[w].poll()) for w in dead))
        self._spawn(len(dead), now)
        return dead

    def _readied(self, raw: bytes | str) -> None:
        wid = raw.decode() if isinstance(raw, bytes) else str(raw)
        if wid in self.starting:
            del self.starting[wid]
            self.ready.add(wid)
            t = self.now()
            self._step(t, +1)
            self.tally.readied(t, 1)

    def _step(self, t: float, delta: int) -> None:
        self.steps.append((t, self.steps[-1][1] + delta))

    async def poll(self, now: float) -> None:
        """One decision at the poll's time ``now`` (its nominal time, ``k x period``: the controller's clock
        is the schedule's, as in the model, not the loop's jitter): read the metrics, decide, act."""
        self.replace_dead(self.now())
        live = [w for w in self.ready if w not in self.ended]
        before = len(live) + len(self.starting)
        taken = self.taken.pop(now, None)
        obs = (replace(taken, now=now, workers=before, ready=len(live)) if taken is not None
               else await self.observe(now, before, len(live)))
        after = await asyncio.to_thread(self.control.decide, obs)  # a qsim policy's advice may plan for a while
        self.tally.polled(now, before, after)
        if after > before:
            self.scale_up(after - before, now)
        elif after < before:
            self.scale_down(before - after, now)

    async def gauges(self) -> tuple[int, int, float]:
        """The pool's queues now: jobs waiting, jobs active (each summed) and the oldest waiting job's age."""
        raise NotImplementedError

    async def read_window(self, now: float) -> None:
        """Refill :attr:`window` with the pool's jobs (for the policies that read the p95 wait, the
        arrival rate or the service time)."""
        raise NotImplementedError

    async def observe(self, now: float, workers: int, ready: int) -> Observation:
        """What the controller sees now (only the metrics it reads beyond the queue gauges are fetched)."""
        waiting, active, oldest = await self.gauges()
        rate = mean = cv = p95 = None
        if self.needs & WINDOW_METRICS:
            await self.read_window(now)
            if "p95_wait" in self.needs:
                p95 = self.window.p95_wait(now)
            if "arrival_rate" in self.needs:
                rate = self.window.arrival_rate(now, since=0.0)
            measured = self.window.service(now) if "service" in self.needs else None
            if measured is not None:
                mean, cv = measured
        return Observation(now=now, workers=workers, ready=ready, list_length=waiting, in_flight=waiting + active,
                           oldest_age=oldest,
                           p95_wait=p95, arrival_rate=rate, mean_service=mean, service_cv=cv)

    # ------------------------------------------------------------------ acting

    def scale_up(self, count: int, now: float) -> None:
        """Spawn ``count`` processes now, each taking work after its cold start."""
        delays = self._spawn(count, now)
        logger.info("t=%.2f autoscaler %s: +%d (cold starts %s)", now, self.spec.pool, count,
                    ", ".join(f"{d:.2f}" for d in delays))

    def _spawn(self, count: int, now: float) -> list[float]:
        """Start ``count`` processes now; their cold starts."""
        delays = self.delays.take(count)
        wall = time.time()
        for delay in delays:
            (wid,) = self.pools.start(self.spec.pool, 1, ready_key=self.ready_key, take_work_at=wall + delay)
            self.created[wid] = now
            self.starting[wid] = now + delay
        return delays

    def scale_down(self, count: int, now: float) -> None:
        """Stop ``count`` processes: those still starting first (newest first), then the newest running."""
        starting = sorted(self.starting, key=lambda w: (self.created[w], w), reverse=True)[:count]
        running = sorted((w for w in self.ready if w not in self.ended), key=lambda w: (self.created[w], w),
                         reverse=True)[:count - len(starting)]
        for wid in starting:
            del self.starting[wid]
        for wid in starting + running:
            self.pools.send(wid, signal.SIGTERM)
            self._waiters.append(asyncio.create_task(self._exit(wid)))
        for wid in running:
            self.ready.discard(wid)
            self.ended.setdefault(wid, math.inf)
        if running:
            self._step(now, -len(running))
            self.tally.readied(now, -len(running))
        logger.info("t=%.2f autoscaler %s: -%d (%d starting, %d running: SIGTERM, grace %g s)", now,
                    self.spec.pool, count, len(starting), len(running), self.spec.grace)

    async def _exit(self, wid: str) -> None:
        proc = self.pools.procs[wid]
        if self.kill_after_grace:
            try:
                await asyncio.to_thread(proc.wait, self.spec.grace)
            except subprocess.TimeoutExpired:
                logger.warning("autoscaler %s: %s still runs %g s after its SIGTERM: SIGKILL", self.spec.pool, wid,
                               self.spec.grace)
                self.killed.append(wid)
                proc.kill()
        await asyncio.to_thread(proc.wait)
        self.ended[wid] = self.now()

    # ------------------------------------------------------------------ results

    async def finish(self) -> None:
        """Wait for the processes it stopped to exit (their grace at most)."""
        if self._waiters:
            await asyncio.wait(self._waiters, timeout=self.spec.grace + 10.0)

    def section(self, end: float, attempts: Any = None) -> dict[str, Any]:
        """The Summary's ``autoscaling`` entry (``attempts``: the run's attempts frame, for the cut jobs)."""
        lifetimes = [(self.created[w], self.ended.get(w, math.inf)) for w in self.created]
        out = self.tally.section(end, lifetimes)
        cut = 0
        if attempts is not None and len(attempts):
            mine = attempts["worker"].astype(str).str.startswith(f"{self.spec.pool}-")
            cut = int(((attempts["result"] == "cutoff") & mine).sum())
        out["cut_jobs"] = cut
        out["policy"] = self.spec.policy
        used = self.delays.drawn[:self.delays.used]
        out["start_delays"] = {"drawn": self.delays.used, "mean": sum(used) / len(used) if used else None}
        return out


class EngineAutoscaler(PoolAutoscaler):
    """One autoscaled pool of an engine run: its metrics from qsim's queues (see the module docstring).

    Args:
        scenario, spec: the run's scenario and the pool's autoscaler.
        pools: the run's worker processes.
        url, prefix: the run's Redis and key prefix.
        seed: the run's seed (the cold starts' stream).
        loop_t0: the event loop's time at the run's start (arrivals count from it).
        recommend: ``qsim advise``'s recommendation, for policies that scale on it.
    """

    def __init__(self, scenario: Scenario, spec: AutoscalerSpec, pools: WorkerProcesses, *, url: str, prefix: str,
                 seed: int, loop_t0: float, recommend: Recommend | None = None) -> None:
        super().__init__(scenario, spec, pools, url=url, ready_key=f"{prefix}:harness:ready:{spec.pool}", seed=seed,
                         loop_t0=loop_t0, recommend=recommend)
        queues = scenario.pool(spec.pool).queues
        self.collector = QueueCollector(url, [QueueKeys(q, prefix=prefix) for q in queues])
        self.queues = [AsyncQueue(q, redis=url, prefix=prefix) for q in queues]

    async def gauges(self) -> tuple[int, int, float]:
        """qsim's queue gauges (:func:`queue_gauges`)."""
        return await asyncio.to_thread(queue_gauges, self.collector)

    async def read_window(self, now: float) -> None:
        """Refill the window from the jobs' records (Redis's clock, relative to the run's start)."""
        sec, usec = await self._client.time()
        offset = (float(sec) + float(usec) / 1e6) - now  # Redis time at the run's start, as this loop sees it
        window = WindowStats(self.window.window, self.window.buckets)
        for q in self.queues:
            for info in await q.job_records():
                if info.enqueued_at is not None:
                    window.arrived(info.enqueued_at - offset)
                if info.started_at is not None and info.enqueued_at is not None:
                    window.started(info.started_at - offset, info.started_at - info.enqueued_at)
                for a in info.attempts:
                    window.ended(a.end - offset, a.end - a.start)
        self.window = window

    async def close(self) -> None:
        """Close the queues' clients."""
        for q in self.queues:
            await q.close()
