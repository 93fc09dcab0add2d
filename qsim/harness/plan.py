"""The job plan: every job a scenario run will add, drawn before the run starts.

The engine harness executes exactly what is drawn here: when each job is
added, and for each attempt how long the synthetic handler works and whether
it fails. Arrival times and first-attempt service times come from the model's
own streams (:func:`qsim.model.arrivals.draw_jobs`), so with the same seed the
engine runs the very jobs the model simulated.

A job's payload is small JSON::

    {"s": [0.41, 0.37], "x": [1, 0]}   # service time and failure flag per attempt

A poison job fails every attempt; otherwise each attempt fails with
``fail_prob``. The last entry repeats when the engine runs more attempts than
planned (a stalled or cut-off attempt does not use one up).

Children: a flow parent carries the jobs of its child types in
:attr:`PlannedJob.children` (added with it, atomically); a fan-out parent's
payload carries its children under ``"fan"``, and the synthetic handler adds
them when the parent succeeds. Children draw from streams of their own (the
type's name + ``"/child"``), so they never reuse an arriving job's samples.
One level of children is supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qsim.engine import Backoff
from qsim.errors import NotSupportedError
from qsim.model.arrivals import draw_jobs, stream
from qsim.scenario import JobType, Scenario

__all__ = ["PlannedJob", "plan_jobs", "job_options", "engine_options"]


@dataclass(frozen=True)
class PlannedJob:
    """One job to add at ``at`` seconds after the run starts (children: with their parent)."""

    job_id: str
    at: float
    type: str
    queue: str
    priority: int
    payload: dict[str, Any]
    children: tuple["PlannedJob", ...] = ()
    parent: str = ""


def job_options(job: JobType) -> dict[str, Any]:
    """The engine's add options for a job of this type (JSON-able; backoff as a list)."""
    b = job.backoff
    backoff = [b.kind, b.delay, b.max, b.jitter] if job.attempts > 1 else None
    return {"priority": job.priority, "attempts": job.attempts, "backoff": backoff, "timeout": job.timeout}


def engine_options(options: dict[str, Any], job_id: str) -> dict[str, Any]:
    """:func:`job_options` as ``Queue.add`` takes them, with the job's id."""
    b = options["backoff"]
    backoff = None
    if b is not None:
        kind, delay, cap, jitter = b
        backoff = Backoff.fixed(delay, jitter=jitter) if kind == "fixed" else Backoff.exponential(
            delay, max=cap, jitter=jitter)
    return {**options, "backoff": backoff, "job_id": job_id}


class _Attempts:
    """Draws what each attempt of a type's jobs does: service times and failures."""

    def __init__(self, seed: int, job: JobType, name: str) -> None:
        self.job = job
        self.service = stream(seed, name, "service")
        self.retry = stream(seed, name, "retry_service")
        self.failure = stream(seed, name, "failure")

    def payloads(self, n: int, first: np.ndarray | None = None) -> list[dict[str, Any]]:
        job, a = self.job, self.job.attempts
        s0 = first if first is not None else job.service.sample(self.service, n)
        poison = self.failure.random(n) < job.poison_prob
        fails = self.failure.random((n, a)) < job.fail_prob
        retry = job.service.sample(self.retry, n * (a - 1)).reshape(n, a - 1)
        return [{"s": [round(float(s0[i]), 6), *(round(float(x), 6) for x in retry[i])],
                 "x": [1] * a if poison[i] else [int(f) for f in fails[i]]} for i in range(n)]


def _check_depth(scenario: Scenario) -> None:
    label = str(scenario.source) if scenario.source else scenario.name
    for i, job in enumerate(scenario.jobs):
        kids = [job.fan_out.job] if job.fan_out else list(job.flow.children) if job.flow else []
        for kid in kids:
            child = scenario.job(kid)
            if child.fan_out or child.flow:
                raise NotSupportedError(f"{label}: not supported yet by the engine harness: jobs[{i}] has child "
                                        f"type {kid!r} with children of its own (one level only)")


def plan_jobs(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None) -> list[PlannedJob]:
    """Every arriving job of one run, in arrival order, with its planned children."""
    _check_depth(scenario)
    seed = scenario.seed if seed is None else seed
    draws = draw_jobs(scenario, seed=seed, max_jobs=max_jobs)
    counts = np.bincount(draws.type, minlength=len(scenario.jobs))
    own: dict[int, list[dict[str, Any]]] = {}
    for k, job in enumerate(scenario.jobs):
        if counts[k]:
            own[k] = _Attempts(seed, job, job.name).payloads(int(counts[k]), draws.service[draws.type == k])
    children = {j.name: _Attempts(seed, j, f"{j.name}/child") for j in scenario.jobs}
    child_seq = dict.fromkeys(children, 0)

    def child(type_: str, at: float, parent: str) -> PlannedJob:
        spec = scenario.job(type_)
        n = child_seq[type_]
        child_seq[type_] += 1
        return PlannedJob(job_id=f"{type_}-c{n}", at=at, type=type_, queue=spec.queue, priority=spec.priority,
                          payload=children[type_].payloads(1)[0], parent=parent)

    seen = np.zeros(len(scenario.jobs), dtype=np.int64)
    plan: list[PlannedJob] = []
    for i in range(len(draws)):
        k = int(draws.type[i])
        job, at = scenario.jobs[k], float(draws.time[i])
        job_id = f"{job.name}-{int(seen[k])}"
        payload = own[k][int(seen[k])]
        seen[k] += 1
        kids: tuple[PlannedJob, ...] = ()
        if job.flow:
            kids = tuple(child(c, at, job_id) for c in job.flow.children)
        elif job.fan_out:
            fan = [child(job.fan_out.job, at, job_id) for _ in range(job.fan_out.count)]
            spec = scenario.job(job.fan_out.job)
            payload = {**payload, "fan": {"queue": spec.queue, "type": spec.name, "options": job_options(spec),
                                          "jobs": [[c.job_id, c.payload] for c in fan]}}
            kids = tuple(fan)
        plan.append(PlannedJob(job_id=job_id, at=at, type=job.name, queue=job.queue, priority=job.priority,
                               payload=payload, children=kids))
    return plan
