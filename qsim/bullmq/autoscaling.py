"""Autoscaled BullMQ workers: the model's controllers on a BullMQ queue's keys, driving your worker command.

``qsim compare SCENARIO --target bullmq --worker-command CMD`` starts each pool's
``workers`` processes running ``CMD`` (:class:`~qsim.harness.commands.CommandProcesses`)
and, for a pool with an ``[[autoscalers]]`` table, a :class:`BullMQAutoscaler`:
the engine harness's loop (:class:`~qsim.harness.autoscaling.PoolAutoscaler`,
the same controller code as the model) reading what the emitted BullMQ triggers
read, every ``poll`` seconds, summed over the pool's BullMQ queues
(:func:`qsim.bullmq.gauges.bullmq_counts`, :func:`qsim.bullmq.gauges.read_state`):

- ``list_length``: jobs waiting (``wait`` and ``paused`` lists + ``prioritized`` set);
- ``in_flight``: those plus the ``active`` list;
- ``oldest_age``: the oldest waiting job's age (the largest of the queues').

A scale-up starts processes whose cold start is the pool's ``start_delay``
draw: the command is started once it has passed, and counts as taking work
from then (your worker's own start-up, e.g. Node loading BullMQ, comes on
top); a scale-down sends SIGTERM to the newest process, and SIGKILL if it still
runs ``grace`` seconds later (BullMQ's stalled-job check then hands its jobs
back). A process that dies unasked is replaced. Policies that read the p95
wait, the arrival rate or the service time (or qsim advise's recommendation)
are refused (:func:`check_autoscalers`): BullMQ keeps no such gauge.

Each process finds its work in its environment (:func:`worker_environment`):

==================  ==========================================================
``REDIS_URL``       the Redis of the BullMQ queues (``--redis``)
``QSIM_QUEUE``      the pool's BullMQ queue (the first, when it has several)
``QSIM_QUEUES``     all of the pool's BullMQ queues, comma-separated
``QSIM_PREFIX``     BullMQ's key prefix (``--prefix``, default ``bull``)
``QSIM_CONCURRENCY``  the pool's ``concurrency`` (a BullMQ Worker's ``concurrency``)
``QSIM_POOL``       the scenario's pool
``QSIM_WORKER_ID``  this process's id, ``<pool>-<n>`` (a BullMQ Worker ``name``)
``QSIM_GRACE``      seconds it may drain after SIGTERM before SIGKILL
==================  ==========================================================
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import redis

from qsim.autoscale.build import controller, needs_advice
from qsim.bullmq.gauges import bullmq_counts, read_state
from qsim.engine.eventloop import cancel_and_wait
from qsim.errors import HarnessError, NotSupportedError
from qsim.harness.autoscaling import WINDOW_METRICS, PoolAutoscaler
from qsim.harness.commands import CommandProcesses
from qsim.spec.scenario import AutoscalerSpec, Scenario

__all__ = ["BullMQAutoscaler", "BullMQWorkers", "check_autoscalers", "worker_environment", "ENVIRONMENT"]

logger = logging.getLogger(__name__)

#: The variables each worker process is given (see the module docstring).
ENVIRONMENT = ("REDIS_URL", "QSIM_QUEUE", "QSIM_QUEUES", "QSIM_PREFIX", "QSIM_CONCURRENCY", "QSIM_POOL",
               "QSIM_WORKER_ID", "QSIM_GRACE")
#: Seconds the first processes must stay up after reporting, before the arrivals start (a command that
#: fails at once is reported then, with its log).
SETTLE = 1.5


def check_autoscalers(scenario: Scenario) -> None:
    """Refuse, naming the pool and the metric, an autoscaler that reads what BullMQ keeps no gauge of.

    Raises:
        NotSupportedError: A policy on the p95 wait, the arrival rate, the service time or qsim advise's
            recommendation.
    """
    for spec in scenario.autoscalers:
        if needs_advice(spec):
            raise NotSupportedError(f"autoscaler of pool {spec.pool!r}: the {spec.policy} policy scales on qsim "
                                    f"advise's recommendation, which --target bullmq --worker-command does not run; "
                                    f"use list_length, in_flight or oldest_age")
        missing = sorted(controller(spec, scenario.pool(spec.pool), scenario=scenario).needs & WINDOW_METRICS)
        if missing:
            raise NotSupportedError(f"autoscaler of pool {spec.pool!r}: it reads {', '.join(missing)}, which "
                                    f"--target bullmq --worker-command does not measure; use list_length, "
                                    f"in_flight or oldest_age")


def worker_environment(scenario: Scenario, pool: str, wid: str, *, url: str, prefix: str,
                       queues: Mapping[str, str], grace: float) -> dict[str, str]:
    """The variables of :data:`ENVIRONMENT` for process ``wid`` of ``pool`` (``queues``: scenario queue ->
    BullMQ queue)."""
    spec = scenario.pool(pool)
    mine = list(dict.fromkeys(queues[q] for q in spec.queues))
    return {"REDIS_URL": url, "QSIM_QUEUE": mine[0], "QSIM_QUEUES": ",".join(mine), "QSIM_PREFIX": prefix,
            "QSIM_CONCURRENCY": str(spec.concurrency), "QSIM_POOL": pool, "QSIM_WORKER_ID": wid,
            "QSIM_GRACE": f"{grace:g}"}


class BullMQAutoscaler(PoolAutoscaler):
    """One autoscaled pool of BullMQ workers (see the module docstring).

    Args:
        scenario, spec, pools, seed, loop_t0: As for :class:`~qsim.harness.autoscaling.PoolAutoscaler`.
        url, prefix: The Redis of the BullMQ queues and BullMQ's key prefix.
        queues: The pool's BullMQ queues.
        ready_key: The Redis list its new processes report to.
    """

    def __init__(self, scenario: Scenario, spec: AutoscalerSpec, pools: CommandProcesses, *, url: str, prefix: str,
                 queues: Sequence[str], ready_key: str, seed: int, loop_t0: float) -> None:
        super().__init__(scenario, spec, pools, url=url, ready_key=ready_key, seed=seed, loop_t0=loop_t0,
                         kill_after_grace=True)
        self.prefix = prefix
        self.bullmq_queues = list(dict.fromkeys(queues))
        self.client = redis.Redis.from_url(url, socket_timeout=5.0)

    def read_gauges(self) -> tuple[int, int, float]:
        """Jobs waiting, jobs active and the oldest waiting age of the pool's BullMQ queues (blocking)."""
        waiting, active, oldest = 0, 0, 0.0
        for q in self.bullmq_queues:
            if "oldest_age" in self.needs:  # its read holds the counts too: one pair of round trips per queue
                state = read_state(self.client, q, self.prefix)
                waiting, active, oldest = waiting + state.waiting, active + state.active, max(oldest, state.oldest_age)
            else:
                counts = bullmq_counts(self.client, q, prefix=self.prefix)
                waiting, active = waiting + counts["waiting"], active + counts["active"]
        return waiting, active, oldest

    async def gauges(self) -> tuple[int, int, float]:
        """:meth:`read_gauges` in a thread."""
        return await asyncio.to_thread(self.read_gauges)

    async def close(self) -> None:
        """Close its Redis client."""
        self.client.close()


class BullMQWorkers:
    """Every pool of a scenario run as ``command`` on BullMQ queues, the autoscaled ones under a
    :class:`BullMQAutoscaler`: :meth:`start` before the arrivals, :meth:`begin` at time 0,
    :meth:`stop` after the drain, then :meth:`sections`.

    Args:
        scenario: Its pools and autoscalers.
        url, prefix: The Redis of the BullMQ queues and BullMQ's key prefix.
        command: The worker command (an argument list).
        queues: Scenario queue -> BullMQ queue.
        run_id: Names the ready lists (``qsim-bullmq:<run id>:ready[:<pool>]``).
        seed: The cold starts' stream (the run's seed, as the model's).
        logdir: Where each process writes its output (made if missing; default: a temporary folder).
    """

    def __init__(self, scenario: Scenario, url: str, command: Sequence[str], *, queues: Mapping[str, str],
                 prefix: str, run_id: str, seed: int, logdir: Path | None = None) -> None:
        check_autoscalers(scenario)
        self.scenario, self.url, self.prefix, self.queues, self.seed = scenario, url, prefix, dict(queues), seed
        self.ready_key = f"qsim-bullmq:{run_id}:ready"
        if logdir is not None:
            logdir.mkdir(parents=True, exist_ok=True)

        def environment(pool: str, wid: str) -> dict[str, str]:
            return worker_environment(scenario, pool, wid, url=url, prefix=prefix, queues=self.queues,
                                      grace=self.pools.grace(pool))

        self.pools = CommandProcesses(scenario, url, command, environment=environment, prefix=prefix,
                                      ready_key=self.ready_key, logdir=logdir)
        self.scalers: list[BullMQAutoscaler] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, timeout: float = 60.0) -> None:
        """Start every pool's ``workers`` processes and wait until they run.

        Raises:
            HarnessError: A process exited at start (its output is in the message) or did not start in time.
        """
        ids = self.pools.start_all()
        try:
            await asyncio.to_thread(self.pools.wait_ready, ids, timeout)
            await asyncio.sleep(SETTLE)
            for wid in ids:
                code = self.pools.procs[wid].poll()
                if code is not None:
                    raise HarnessError(f"the worker command exited with {code} at start ({wid}):\n"
                                       f"{self.pools.log_tail(wid)}")
        except BaseException:
            await asyncio.to_thread(self.pools.stop_all, 5.0)
            self.pools.close()
            raise

    def begin(self, loop_t0: float) -> None:
        """Start the autoscalers' loops; ``loop_t0``: the event loop's time at the run's start."""
        for spec in self.scenario.autoscalers:
            pool = self.scenario.pool(spec.pool)
            scaler = BullMQAutoscaler(self.scenario, spec, self.pools, url=self.url, prefix=self.prefix,
                                      queues=[self.queues[q] for q in pool.queues],
                                      ready_key=f"{self.ready_key}:{spec.pool}", seed=self.seed, loop_t0=loop_t0)
            self.scalers.append(scaler)
            self._tasks.append(asyncio.create_task(scaler.run()))

    async def stop(self) -> None:
        """Stop the autoscalers, wait for the processes they stopped, then stop every process (SIGTERM, the
        longest grace, SIGKILL) and remove the ready lists."""
        try:
            await cancel_and_wait(self._tasks, raise_errors=True)
            for scaler in self.scalers:
                await scaler.finish()
        finally:
            grace = max(self.pools.grace(p.name) for p in self.scenario.pools)
            codes = await asyncio.to_thread(self.pools.stop_all, grace + 5.0)
            killed = [w for w, c in codes.items() if c == -signal.SIGKILL]
            if killed:
                logger.warning("worker processes %s were killed at the end", ", ".join(killed))
            client: Any = redis.Redis.from_url(self.url)
            try:
                client.delete(self.ready_key, *(f"{self.ready_key}:{s.pool}" for s in self.scenario.autoscalers))
            finally:
                client.close()
            self.pools.close()

    def sections(self, end: float) -> dict[str, Any]:
        """The Summary's ``autoscaling`` entry per autoscaled pool (``end``: seconds since time 0 when the
        run ended). ``cut_jobs`` is not measured (BullMQ does not record a cut attempt): 0; ``killed``
        names the processes sent SIGKILL at the end of their grace."""
        out = {}
        for scaler in self.scalers:
            section = scaler.section(end)
            section["killed"] = list(scaler.killed)
            out[scaler.spec.pool] = section
        return out
