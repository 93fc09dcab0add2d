"""The job plan: every job a scenario run will add, drawn before the run starts.

The engine harness executes exactly what is drawn here: when each job is
added, and for each attempt how long the synthetic handler works and whether
it fails: the scenario's :class:`~qsim.spec.workload.Workload` (arrival times,
every attempt's service time and failure flag, the children), the very
draws the model plays, so with the same seed the engine runs the very jobs,
attempts and failures the model simulated.

A job's payload is small JSON::

    {"s": [0.41, 0.37], "x": [1, 0]}   # service time and failure flag per attempt

plus the job type's ``data`` fields (``jobs[].data``, e.g. ``"tenant": "acme"``).

A poison job fails every attempt; otherwise each attempt fails with
``fail_prob``. The last entry repeats when the engine runs more attempts than
planned (a stalled or cut-off attempt does not use one up).

Children: a flow parent carries the jobs of its child types in
:attr:`PlannedJob.children` (added with it, atomically); a fan-out parent's
payload carries its children under ``"fan"``, and the synthetic handler adds
them when the parent succeeds. Children draw from streams of their own (the
type's name + ``"/child"``, see :mod:`qsim.spec.workload`), so they never reuse
an arriving job's samples.
One level of children is supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qsim.engine import Backoff
from qsim.errors import NotSupportedError
from qsim.spec.scenario import JobType, Scenario
from qsim.spec.workload import Attempts, Workload, draw_workload

__all__ = ["PlannedJob", "plan_jobs", "plan_workload", "job_options", "engine_options"]


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
    backoff = [b.kind, b.delay, b.cap, b.jitter] if job.attempts > 1 else None
    return {"priority": job.priority, "attempts": job.attempts, "backoff": backoff, "timeout": job.timeout}


def engine_options(options: dict[str, Any], job_id: str) -> dict[str, Any]:
    """:func:`job_options` as ``Queue.add`` takes them, with the job's id."""
    b = options["backoff"]
    backoff = None
    if b is not None:
        kind, delay, cap, jitter = b  # the scenario's rule (BackoffSpec.cap): the same delays as the model's
        backoff = Backoff(str(kind), float(delay), None if cap is None else float(cap), float(jitter))
    return {**options, "backoff": backoff, "job_id": job_id}


def _payload(att: Attempts, row: int, data: Any = None) -> dict[str, Any]:
    a = att.service.shape[1]
    return {**(data or {}), "s": [round(float(x), 6) for x in att.service[row]],
            "x": [1] * a if att.poison[row] else [int(f) for f in att.fails[row]]}


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
    return plan_workload(draw_workload(scenario, seed=seed, max_jobs=max_jobs))


def plan_workload(workload: Workload) -> list[PlannedJob]:
    """The jobs of a drawn workload as the harness adds them (see the module docstring)."""
    scenario, draws = workload.scenario, workload.arrivals
    _check_depth(scenario)
    drawn = workload.attempts

    def child(c: int, row: int, at: float, parent: str) -> PlannedJob:
        spec = scenario.jobs[c]
        att = drawn.child[c]
        assert att is not None
        return PlannedJob(job_id=f"{spec.name}-c{row}", at=at, type=spec.name, queue=spec.queue,
                          priority=spec.priority, payload=_payload(att, row, spec.data), parent=parent)

    seen = np.zeros(len(scenario.jobs), dtype=np.int64)
    plan: list[PlannedJob] = []
    for i in range(len(draws)):
        k = int(draws.type[i])
        job, at = scenario.jobs[k], float(draws.time[i])
        job_id = f"{job.name}-{int(seen[k])}"
        own = drawn.own[k]
        assert own is not None
        payload = _payload(own, int(drawn.rank[i]), job.data)
        seen[k] += 1
        kids: tuple[PlannedJob, ...] = ()
        if job.flow:
            kids = tuple(child(c, row, at, job_id) for c, row in drawn.kids.get(i, []))
        elif job.fan_out:
            fan = [child(c, row, at, job_id) for c, row in drawn.kids.get(i, [])]
            spec = scenario.job(job.fan_out.job)
            payload = {**payload, "fan": {"queue": spec.queue, "type": spec.name, "options": job_options(spec),
                                          "jobs": [[c.job_id, c.payload] for c in fan]}}
            kids = tuple(fan)
        plan.append(PlannedJob(job_id=job_id, at=at, type=job.name, queue=job.queue, priority=job.priority,
                               payload=payload, children=kids))
    return plan
