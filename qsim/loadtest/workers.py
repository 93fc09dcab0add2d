"""The scenario's worker pools as local processes, for a self-contained load test.

Against staging the workers are already deployed; on a laptop
``--start-workers`` starts each pool of the scenario as
``python -m qsim.harness.pool_worker`` processes (the synthetic handler that
sleeps the planned service time) through the harness's process manager
(:class:`qsim.harness.processes.WorkerProcesses`, the one ``qsim run`` uses),
carries out the scenario's ``[[events]]`` on them (:meth:`WorkerPool.apply`:
``sigterm``, ``sigkill``, ``start``), gives the scenario's queues their limits
(``concurrency_limit``, ``rate_limit``, ``aging``: settings stored in Redis,
shared by every worker of the queue), and puts back the limits it found when
it stops. Nothing here imports Locust.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

from qsim.errors import QsimError
from qsim.harness.processes import WorkerProcesses, apply_limits, restore_limits
from qsim.spec.scenario import EventSpec, Scenario

__all__ = ["WorkerPool"]

logger = logging.getLogger(__name__)


class WorkerPool:
    """Starts, waits for, signals and stops the worker processes of every pool of a scenario.

    Args:
        scenario: Its ``pools`` say how many processes, which queues, concurrency, policy.
        redis_url: Redis the workers use.
        prefix: Key prefix of the queues.
        run_id: Names the ready list ``<prefix>:loadtest:<run_id>:ready`` (emptied by :meth:`wait_ready`).
        grace: Seconds a worker may drain its active jobs when stopped (a pool's
            ``sigterm`` events may set a longer one).
        logdir: Where each process writes its log (default: a temporary folder).
    """

    def __init__(self, scenario: Scenario, redis_url: str, *, prefix: str, run_id: str, grace: float = 5.0,
                 logdir: Path | None = None) -> None:
        self.scenario, self.redis_url, self.prefix = scenario, redis_url, prefix
        self.processes = WorkerProcesses(scenario, redis_url, prefix=prefix,
                                         ready_key=f"{prefix}:loadtest:{run_id}:ready", logdir=logdir,
                                         default_grace=grace)
        self.ready_key, self.logdir = self.processes.ready_key, self.processes.logdir
        self._found: dict[str, dict[str, Any]] = {}

    @property
    def procs(self) -> dict[str, subprocess.Popen[bytes]]:
        """The processes by worker id."""
        return self.processes.procs

    def apply_limits(self) -> None:
        """Give each queue the scenario's limits, remembering the ones it had."""
        self._found = apply_limits(self.scenario, self.redis_url, self.prefix)

    def restore_limits(self) -> None:
        """Put back the limits :meth:`apply_limits` found."""
        restore_limits(self.redis_url, self.prefix, self._found)
        self._found = {}

    def start(self) -> list[str]:
        """Apply the queue limits, then start every pool's processes; returns their worker
        ids (``<pool>-<n>``)."""
        self.apply_limits()
        return self.processes.start_all()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until every process reported it is running.

        Raises:
            HarnessError: A process exited (its log tail is in the message) or
                did not start within ``timeout`` seconds.
        """
        self.processes.wait_ready(timeout=timeout)

    def apply(self, event: EventSpec) -> list[str]:
        """Carry out one scenario event now (see :meth:`WorkerProcesses.apply`); the processes' ids."""
        return self.processes.apply(event)

    def stop(self, timeout: float | None = None) -> dict[str, int | None]:
        """SIGTERM every process, wait up to ``timeout`` (default the longest grace + 5 s), then
        SIGKILL; put back the queues' limits; returns the exit codes."""
        codes = self.processes.stop_all(timeout)
        try:
            self.restore_limits()
        except QsimError as e:
            logger.warning("could not put back the queues' limits: %s", e)
        self.processes.close()
        return codes
