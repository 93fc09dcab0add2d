"""What each attempt of each job does: service time and failure, drawn before the run.

The model and the engine harness (:mod:`qsim.harness.plan`) call the same
functions here, so with the same seed both run the very same sample path:
the same jobs, the same service time for attempt ``n`` of each job, the same
failures.

Per job type, over its ``n`` jobs in arrival order (vectorised, in this order)::

    first   = draw_jobs' "service" sample (the first attempt)
    failure = stream(seed, name, "failure")
    poison  = failure.random(n) < poison_prob            # every attempt fails
    fails   = failure.random((n, attempts)) < fail_prob  # attempt k fails
    retry   = service.sample(stream(seed, name, "retry_service"), n * (attempts - 1))

so ``service[i, k]`` is the service time of attempt ``k + 1`` of job ``i``
(``k = 0``: the first). An attempt that stalls or is cut off at shutdown does
not use up an attempt (as in the engine): the re-run uses the same column.

Children (fan-out and flow) draw from the streams of the name
``f"{type}/child"``, the same way (their first attempts from that name's
``"service"`` stream), in creation order: the children planned for the
arriving jobs in arrival order; for a flow parent one child of each child
type (in the listed order), for a fan-out parent ``count`` children. A
fan-out child is planned when its parent arrives, although the parent adds it
only when it completes, so its draws never depend on the order of events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qsim.model.arrivals import JobDraws, stream
from qsim.scenario import JobType, Scenario

__all__ = ["Attempts", "draw_attempts", "JobPlan", "plan_attempts", "child_types"]


@dataclass(frozen=True)
class Attempts:
    """Per-attempt draws of ``n`` jobs of one type (row ``i``: the type's ``i``-th job)."""

    poison: np.ndarray  # bool (n,)
    fails: np.ndarray  # bool (n, attempts): attempt k + 1 fails (transient)
    service: np.ndarray  # float (n, attempts): attempt k + 1's service time

    def __len__(self) -> int:
        return int(self.poison.size)

    def failed(self, row: int, k: int) -> bool:
        """Whether attempt ``k + 1`` of job ``row`` fails."""
        return bool(self.poison[row] or self.fails[row, k])


def draw_attempts(job: JobType, name: str, seed: int, n: int, first: np.ndarray | None = None) -> Attempts:
    """The draws of ``n`` jobs of type ``job`` from the streams of ``name`` (see the module docstring).

    ``first``: the first attempts' service times when already drawn (arrivals:
    :func:`~qsim.model.arrivals.draw_jobs`); else drawn from ``name``'s
    ``"service"`` stream.
    """
    a = job.attempts
    s0 = np.asarray(first, dtype=float) if first is not None else np.asarray(
        job.service.sample(stream(seed, name, "service"), n), dtype=float)
    failure = stream(seed, name, "failure")
    poison = failure.random(n) < job.poison_prob
    fails = failure.random((n, a)) < job.fail_prob
    retry = np.asarray(job.service.sample(stream(seed, name, "retry_service"), n * (a - 1)),
                       dtype=float).reshape(n, a - 1)
    return Attempts(poison=poison, fails=fails, service=np.concatenate([s0.reshape(n, 1), retry], axis=1))


def child_types(scenario: Scenario, k: int) -> list[int]:
    """The types of the children a job of type ``k`` plans (flow first: a flow type does no fan-out)."""
    job = scenario.jobs[k]
    index = {j.name: i for i, j in enumerate(scenario.jobs)}
    if job.flow is not None:
        return [index[c] for c in job.flow.children]
    if job.fan_out is not None:
        return [index[job.fan_out.job]] * job.fan_out.count
    return []


@dataclass(frozen=True)
class JobPlan:
    """Every attempt draw of one run's arriving jobs and their planned children.

    ``own[k]``: the draws of type ``k``'s arriving jobs (None: none arrive);
    job ``i`` is row ``rank[i]`` of ``own[type[i]]``. ``child[k]``: the draws of
    type ``k``'s children (None: none planned). ``kids[i]``: the children job
    ``i`` plans, as (type, row of ``child[type]``), in creation order.
    """

    own: list[Attempts | None]
    rank: np.ndarray
    child: list[Attempts | None]
    kids: dict[int, list[tuple[int, int]]]


def plan_attempts(scenario: Scenario, draws: JobDraws, seed: int) -> JobPlan:
    """The attempt draws of the jobs ``draws`` (see :class:`JobPlan`)."""
    types = np.asarray(draws.type, dtype=np.int64)
    nt = len(scenario.jobs)
    own: list[Attempts | None] = [None] * nt
    rank = np.zeros(types.size, dtype=np.int64)
    for k, job in enumerate(scenario.jobs):
        mine = np.flatnonzero(types == k)
        if mine.size:
            rank[mine] = np.arange(mine.size)
            own[k] = draw_attempts(job, job.name, seed, int(mine.size), np.asarray(draws.service)[mine])
    plans = [child_types(scenario, k) for k in range(nt)]
    kids: dict[int, list[tuple[int, int]]] = {}
    seq = [0] * nt
    if any(plans):
        for i in np.flatnonzero(np.isin(types, [k for k in range(nt) if plans[k]])).tolist():
            mine_kids = []
            for c in plans[int(types[i])]:
                mine_kids.append((c, seq[c]))
                seq[c] += 1
            kids[i] = mine_kids
    child: list[Attempts | None] = [
        draw_attempts(job, f"{job.name}/child", seed, seq[c]) if seq[c] else None
        for c, job in enumerate(scenario.jobs)]
    return JobPlan(own=own, rank=rank, child=child, kids=kids)
