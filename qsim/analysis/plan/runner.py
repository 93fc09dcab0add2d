"""Where the runs of a sweep or plan execute: here, in a local process pool, or on a Dask cluster.

One unit of work is a :class:`Task`: a Scenario (with the point's values
already set), a seed and an optional job cap. That is all that travels to a
worker process; what comes back is the run's Summary and, when asked for, two
numbers about the first part of the run (see :func:`run_task`). Runs are
record-less (``simulate(..., records=False)``): streamed statistics, flat memory.

- :class:`LocalRunner` (the default): a process pool of ``processes`` workers
  (every core), kept for the runner's life so that a plan's several rounds
  (replications added near the SLO, bisection steps) reuse it; ``processes=1``
  runs the tasks here, one after the other.
- :class:`DaskRunner`: the tasks of a round go to an existing Dask cluster
  through a ``distributed.Client`` (``client.map``); its workers need qsim installed.

Both return results in the order of the tasks, whatever order they finish in.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from qsim.model import simulate
from qsim.spec.scenario import Scenario

__all__ = ["Task", "RunResult", "run_task", "Runner", "LocalRunner", "DaskRunner", "make_runner",
           "connect_dask"]

logger = logging.getLogger(__name__)

#: A run's result: ``{"summary": Summary, "first_part": {"jobs": n, "wait_mean": s} | None}``.
RunResult = dict[str, Any]

#: The run-length check compares the waits of this leading share of the measured jobs with the rest.
FIRST_PART = 1.0 / 3.0
_MIN_FIRST_PART_JOBS = 30
_ADDRESS = re.compile(r"^(?:(?:tcp|tls)://)?(?:\[[0-9a-fA-F:]+\]|[^\s:/\[\]]+):\d{1,5}/?$")


@dataclass(frozen=True)
class Task:
    """One run: the scenario (point values set), its seed, an optional job cap, whether to
    measure the first part of the run for the run-length check, and the recommendation
    functions of its ``qsim`` autoscalers (:func:`qsim.model.simulate`'s ``recommend``)."""

    scenario: Scenario
    seed: int
    max_jobs: int | None = None
    first_part: bool = False
    recommend: Mapping[str, Any] | None = None


def _started(summary: Mapping[str, Any]) -> int:
    jobs = summary["jobs"]
    return int(jobs["completed"]) + int(jobs["dead"])


def run_task(task: Task) -> RunResult:
    """Run one task with the model; runs in a worker process (local pool or Dask).

    With ``task.first_part`` a second, shorter run with the same seed stops
    arrivals after the jobs of about the first third of the measured window
    (``max_jobs``: the earliest jobs are the same in both runs, so with FIFO
    service they wait the same) and reports their count and mean wait:
    :mod:`qsim.analysis.plan.runlength` compares them with the rest of the run.
    """
    s = task.scenario
    summary = simulate(s, seed=task.seed, max_jobs=task.max_jobs, records=False, recommend=task.recommend).summary
    first: dict[str, Any] | None = None
    arrived = int(summary["jobs"]["arrived"])
    measured = s.duration - s.warmup
    if task.first_part and measured > 0 and arrived * FIRST_PART >= _MIN_FIRST_PART_JOBS:
        # jobs enqueued before the warm-up ends: from the arrival rate, or, when a job cap ended the
        # arrivals early, what the cap leaves (the wrong guess gives an empty or a whole first part)
        guesses = [round(arrived * s.warmup / measured)]
        if task.max_jobs is not None:
            guesses.insert(0, max(task.max_jobs - arrived, 0))
        for before in dict.fromkeys(guesses):
            cap = before + int(arrived * FIRST_PART)
            head = simulate(s, seed=task.seed, max_jobs=cap, records=False, recommend=task.recommend).summary
            n1, n = _started(head), _started(summary)
            if 0 < n1 < n and head["wait"]["mean"] is not None:
                first = {"jobs": n1, "wait_mean": float(head["wait"]["mean"])}
                break
    return {"summary": summary, "first_part": first}


Progress = Callable[[int], None]  # called with the number of tasks of the current call finished so far


class Runner(Protocol):
    """Runs tasks somewhere and returns their results in task order."""

    def map(self, tasks: Sequence[Task], done: Progress | None = None) -> list[RunResult]: ...

    def close(self) -> None: ...


class LocalRunner:
    """Tasks in a process pool on this machine (``processes=1``: here, in order)."""

    def __init__(self, processes: int | None = None) -> None:
        if processes is not None and processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.processes = processes or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None

    def map(self, tasks: Sequence[Task], done: Progress | None = None) -> list[RunResult]:
        """Run ``tasks``; ``done(k)`` after each of them."""
        results: list[RunResult] = []
        if self.processes == 1 or len(tasks) == 1:
            for task in tasks:
                results.append(run_task(task))
                if done:
                    done(len(results))
            return results
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.processes)
        for result in self._pool.map(run_task, tasks):
            results.append(result)
            if done:
                done(len(results))
        return results

    def close(self) -> None:
        """Shut the pool down (a later :meth:`map` starts a new one)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


class DaskRunner:
    """Tasks on a Dask cluster through an existing ``distributed.Client`` (not closed by the runner)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def map(self, tasks: Sequence[Task], done: Progress | None = None) -> list[RunResult]:
        """Submit ``tasks`` (each its own Dask task), gather the results in task order."""
        from distributed import as_completed

        if not tasks:
            return []
        futures = self.client.map(run_task, list(tasks), pure=False)
        for k, _ in enumerate(as_completed(futures), start=1):
            if done:
                done(k)
        results: list[RunResult] = self.client.gather(futures)
        return results

    def close(self) -> None:
        """Nothing to do: the caller owns the client."""

    def __enter__(self) -> DaskRunner:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def make_runner(*, processes: int | None = None, client: Any = None) -> LocalRunner | DaskRunner:
    """A :class:`DaskRunner` on ``client`` when given, else a :class:`LocalRunner`."""
    if client is not None:
        return DaskRunner(client)
    return LocalRunner(processes)


def connect_dask(address: str, *, timeout: float = 5.0) -> Any:
    """A ``distributed.Client`` connected to the scheduler at ``address`` (``tcp://HOST:PORT``).

    Raises:
        ImportError: dask.distributed is not installed (``pip install 'qsim[dask]'``).
        ValueError: ``address`` is not ``[tcp://|tls://]HOST:PORT``.
        OSError: no scheduler answered at ``address`` within ``timeout`` seconds.
    """
    if not _ADDRESS.match(address):
        raise ValueError(f"expected a scheduler address like tcp://HOST:8786, got {address!r}")
    try:
        from distributed import Client
    except ImportError as e:
        raise ImportError("--dask needs dask.distributed: pip install 'qsim[dask]'") from e
    logger.info("connecting to the Dask scheduler at %s", address)
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise OSError(f"no Dask scheduler answered at {address} within {timeout:g} s") from e
