"""How long ``qsim run`` waits for its jobs to settle after the last arrival, and what it reports.

The default drain timeout comes from the model's run of the same scenario and
seed (the very jobs the engine runs, :mod:`qsim.spec.workload`): its *settle time*
is how long after the last arrival the last job settles (completes or goes to
the dead-letter queue), backlog, retries, backoff, stalled recovery and pool
events included. The engine gets::

    drain timeout = max(DRAIN_FLOOR, DRAIN_FACTOR x settle time + DRAIN_MARGIN)
                  = max(30 s, 1.5 x settle + 10 s)

The factor leaves room for the engine's per-job overhead (a few milliseconds
a job that an uncalibrated model does not count: a backlog of short jobs
drains up to a third slower) and for a loaded machine; the margin and the
floor for process start-up and clock steps. The wait ends as soon as every
queue is empty, so a long timeout costs nothing when the engine keeps up.

Jobs still waiting, delayed, active or waiting for children when the timeout
expires are reported per queue (:func:`unsettled_message`, a warning that names
``--drain-timeout``) and count as ``unfinished`` in the Summary.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from qsim.engine import AsyncQueue
from qsim.spec.scenario import Scenario

__all__ = ["DRAIN_FACTOR", "DRAIN_MARGIN", "DRAIN_FLOOR", "Drain", "settle_time", "drain_timeout",
           "predicted_drain", "wait_settled", "unsettled_message", "BUSY_STATES"]

logger = logging.getLogger(__name__)

DRAIN_FACTOR = 1.5
DRAIN_MARGIN = 10.0
DRAIN_FLOOR = 30.0
#: Queue states whose jobs have not settled yet.
BUSY_STATES = ("waiting", "delayed", "active", "waiting_children")


@dataclass(frozen=True)
class Drain:
    """The model's settle time after the last arrival, and the drain timeout it gives (seconds)."""

    settle: float
    timeout: float


def settle_time(jobs: pd.DataFrame) -> float:
    """Seconds from the last arrival to the last settled job in a run's job records (>= 0).

    Arrivals are the jobs without a parent; settled ones are ``completed`` or ``dead``.
    """
    if jobs.empty:
        return 0.0
    arrived = jobs.loc[jobs["parent"].fillna("") == "", "enqueued"]
    done = jobs.loc[jobs["outcome"].isin(("completed", "dead")), "finished"]
    if arrived.empty or done.dropna().empty:
        return 0.0
    return max(0.0, float(done.max()) - float(arrived.max()))


def drain_timeout(settle: float) -> float:
    """The drain timeout for a predicted settle time (see the module docstring)."""
    if not math.isfinite(settle) or settle < 0:
        raise ValueError(f"settle time must be a finite number >= 0, got {settle!r}")
    return max(DRAIN_FLOOR, DRAIN_FACTOR * settle + DRAIN_MARGIN)


def predicted_drain(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None,
                    jobs: pd.DataFrame | None = None, recommend: Mapping[str, Any] | None = None) -> Drain:
    """The model's settle time for this run and the default drain timeout.

    Args:
        jobs: The model's job records of this very run (scenario, seed,
            ``max_jobs``) when already simulated; else the model runs here
            (``recommend``: for its ``qsim`` autoscalers, as :func:`qsim.model.simulate`).
    """
    if jobs is None:
        from qsim.model import simulate

        jobs = simulate(scenario, seed=seed, max_jobs=max_jobs, recommend=recommend).jobs
    settle = settle_time(jobs)
    return Drain(settle=settle, timeout=drain_timeout(settle))


async def _busy(queues: Mapping[str, AsyncQueue]) -> dict[str, dict[str, int]]:
    out = {}
    for name, q in queues.items():
        c = await q.counts()
        busy = {s: int(c.get(s, 0)) for s in BUSY_STATES if c.get(s, 0)}
        if busy:
            out[name] = busy
    return out


async def wait_settled(queues: Mapping[str, AsyncQueue], timeout: float, *, expected: float = 0.0,
                       progress: Any = None) -> dict[str, dict[str, int]]:
    """Wait until no queue has a job waiting, delayed, active or waiting for children, or ``timeout`` s.

    Returns the jobs still unsettled per queue and state (empty: all settled).

    Args:
        expected: The predicted settle time, for ``progress`` (called with 0..1 of it).
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + timeout
    while True:
        busy = await _busy(queues)
        if not busy or loop.time() >= deadline:
            return busy
        if progress is not None:
            progress(min(0.99, (loop.time() - start) / max(expected, 1.0)))
        await asyncio.sleep(0.1)


def unsettled_message(unsettled: Mapping[str, Mapping[str, int]], timeout: float) -> str:
    """One warning: how many jobs of which queue did not settle within ``timeout``, and what to do."""
    total = sum(sum(c.values()) for c in unsettled.values())
    where = "; ".join(f"{q}: " + ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in c.items())
                      for q, c in sorted(unsettled.items()))
    return (f"{total} jobs still unsettled {timeout:.3g} s after the last arrival ({where}): they count as "
            f"unfinished; give them longer with --drain-timeout S (drain_timeout= in Python)")
