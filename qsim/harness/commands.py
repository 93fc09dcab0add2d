"""A scenario's pools run as a user's own worker command: :class:`CommandProcesses`.

The same process manager as qsim's pool workers (:class:`~qsim.harness.processes.WorkerProcesses`:
ids ``<pool>-<n>``, a ready list, signals, SIGTERM then SIGKILL at the end), with each process
running ``command`` instead of ``python -m qsim.harness.pool_worker``. Each process is started
through :mod:`qsim.harness.command_start`, which holds it for its cold start, reports it on the
ready list and then ``exec``\\ s the command, so an autoscaler
(:class:`~qsim.harness.autoscaling.PoolAutoscaler`) drives these processes exactly as it drives
qsim's. The command learns what to serve from its environment (``env``, given per process).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from qsim.harness.processes import WorkerProcesses
from qsim.spec.scenario import Scenario

__all__ = ["CommandProcesses", "START_SCRIPT"]

#: The script each process starts with (run by path: see :mod:`qsim.harness.command_start`).
START_SCRIPT = Path(__file__).with_name("command_start.py")

Environment = Callable[[str, str], Mapping[str, str]]


class CommandProcesses(WorkerProcesses):
    """The processes of a scenario's pools, each running ``command`` (see the module docstring).

    Args:
        scenario: Its pools (and autoscalers' grace periods).
        redis_url: The Redis of the ready list (the queues' own, usually).
        command: The worker command, as an argument list (``["node", "worker.js"]``).
        environment: ``(pool, worker id) -> variables`` added to this process's environment for it.
        prefix, ready_key, logdir, default_grace: As for :class:`WorkerProcesses`.

    Raises:
        ValueError: An empty command.
    """

    dump_signal = None  # a foreign process may treat SIGUSR1 otherwise (Node starts its inspector on it)

    def __init__(self, scenario: Scenario, redis_url: str, command: Sequence[str], *, environment: Environment,
                 prefix: str, ready_key: str, logdir: Path | None = None, default_grace: float = 30.0) -> None:
        if not command or not command[0]:
            raise ValueError("the worker command is empty")
        super().__init__(scenario, redis_url, prefix=prefix, ready_key=ready_key, logdir=logdir,
                         default_grace=default_grace)
        self.command = list(command)
        self.environment = environment

    def argv(self, pool: str, wid: str, *, ready_key: str, take_work_at: float) -> list[str]:
        """``python command_start.py ... -- COMMAND``."""
        return [sys.executable, str(START_SCRIPT), f"--ready-key={ready_key}", f"--id={wid}",
                f"--at={take_work_at!r}", f"--redis={self.redis_url}", "--", *self.command]

    def env(self, pool: str, wid: str) -> dict[str, str]:
        """This process's environment with the pool's variables (:attr:`environment`) added."""
        return {**os.environ, **self.environment(pool, wid)}
