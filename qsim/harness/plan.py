"""The job plan: every job a scenario run will add, drawn before the run starts.

The engine harness executes exactly what is drawn here: when each job is
added, and for each attempt how long the synthetic handler works and whether
it fails. Arrival times and first-attempt service times come from the model's
own streams (:func:`qsim.model.arrivals.draw_jobs`), so with the same seed the
engine runs the very jobs the model simulated.

The payload a job carries is small JSON::

    {"s": [0.41, 0.37], "x": [1, 0]}   # service time and failure flag per attempt

A poison job fails every attempt; otherwise each attempt fails with
``fail_prob``. The last entry repeats when the engine runs more attempts than
planned (a stalled or cut-off attempt does not use one up).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qsim.model.arrivals import draw_jobs, stream
from qsim.scenario import Scenario

__all__ = ["PlannedJob", "plan_jobs"]


@dataclass(frozen=True)
class PlannedJob:
    """One job to add at ``at`` seconds after the run starts."""

    job_id: str
    at: float
    type: str
    queue: str
    priority: int
    payload: dict[str, list[float] | list[int]]


def plan_jobs(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None) -> list[PlannedJob]:
    """Every job of one run, in arrival order."""
    seed = scenario.seed if seed is None else seed
    draws = draw_jobs(scenario, seed=seed, max_jobs=max_jobs)
    counts = np.bincount(draws.type, minlength=len(scenario.jobs))
    extra: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for k, job in enumerate(scenario.jobs):
        n, a = int(counts[k]), job.attempts
        if n == 0:
            continue
        failure = stream(seed, job.name, "failure")
        poison = failure.random(n) < job.poison_prob
        fails = failure.random((n, a)) < job.fail_prob
        retry_service = job.service.sample(stream(seed, job.name, "retry_service"), n * max(a - 1, 0))
        extra[k] = (poison, fails, retry_service.reshape(n, max(a - 1, 0)))

    seen = np.zeros(len(scenario.jobs), dtype=np.int64)
    jobs: list[PlannedJob] = []
    for i in range(len(draws)):
        k = int(draws.type[i])
        job = scenario.jobs[k]
        j = int(seen[k])
        seen[k] += 1
        poison, fails, retry = extra[k]
        service = [round(float(draws.service[i]), 6), *(round(float(s), 6) for s in retry[j])]
        flags = [1] * job.attempts if poison[j] else [int(f) for f in fails[j]]
        jobs.append(PlannedJob(job_id=f"{job.name}-{j}", at=float(draws.time[i]), type=job.name, queue=job.queue,
                               priority=job.priority, payload={"s": service, "x": flags}))
    return jobs
