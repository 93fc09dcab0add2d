"""A scenario's job types as BullMQ jobs: the options each add carries, and what BullMQ cannot mirror.

Nothing here talks to Redis. For a job type of the scenario (:class:`~qsim.spec.scenario.JobType`):

==========================  ============================================================
scenario                    BullMQ job option
==========================  ============================================================
the job's id                ``jobId`` (``<run id>-<type>-<n>``): the same id again adds
                            nothing (BullMQ keeps the first job: deduplication)
``attempts`` > 1            ``attempts``
``backoff``                 ``backoff = {type: fixed|exponential, delay: ms[, jitter]}``
                            (BullMQ's rule is qsim's: ``delay * 2**(n-1)``, jitter takes
                            off up to that fraction; BullMQ has no cap, see :func:`notes`)
``priority``                ``priority``: per queue, the lowest priority of the queue's types
                            is BullMQ's default (no priority: the wait list, served first),
                            each other one ``priority - lowest`` (BullMQ: lower runs first,
                            equal priorities in order); at most :data:`MAX_PRIORITY`
``flow.children``           a BullMQ flow: the parent waits in ``waiting-children``; each child
                            gets ``failParentOnFailure`` (``on_child_failure = "fail"``) or
                            ``ignoreDependencyOnFailure`` (``"ignore"``)
==========================  ============================================================

No scenario field asks for an initial ``delay``: jobs are added at their
arrival times, and BullMQ's delayed set holds only the retries' backoff.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from qsim.errors import NotSupportedError
from qsim.spec.scenario import JobType, Scenario

__all__ = ["DEFAULT_PREFIX", "MAX_PRIORITY", "priorities", "job_options", "child_options", "check_supported",
           "notes"]

#: BullMQ's default key prefix.
DEFAULT_PREFIX = "bull"
#: The largest priority BullMQ accepts (2**21).
MAX_PRIORITY = 2**21


def _label(scenario: Scenario) -> str:
    return str(scenario.source) if scenario.source else scenario.name


def priorities(scenario: Scenario) -> dict[str, int]:
    """BullMQ's priority of each job type (see the module docstring).

    Raises:
        NotSupportedError: A queue's priorities span more than :data:`MAX_PRIORITY`.
    """
    lowest: dict[str, int] = {}
    for job in scenario.jobs:
        lowest[job.queue] = min(lowest.get(job.queue, job.priority), job.priority)
    out = {job.name: job.priority - lowest[job.queue] for job in scenario.jobs}
    for name, p in out.items():
        if p > MAX_PRIORITY:
            raise NotSupportedError(f"{_label(scenario)}: job type {name!r} would need BullMQ priority {p}, more "
                                    f"than BullMQ's largest ({MAX_PRIORITY})")
    return out


def job_options(job: JobType, job_id: str, priority: int = 0) -> dict[str, Any]:
    """The options of one BullMQ ``Queue.add`` for a job of type ``job`` (``priority``: from :func:`priorities`)."""
    opts: dict[str, Any] = {"jobId": job_id}
    if job.attempts > 1:
        b = job.backoff
        backoff: dict[str, Any] = {"type": b.kind, "delay": int(round(b.delay * 1000))}
        if b.jitter:
            backoff["jitter"] = b.jitter
        opts["attempts"] = job.attempts
        opts["backoff"] = backoff
    if priority:
        opts["priority"] = priority
    return opts


def child_options(job: JobType, job_id: str, priority: int, on_child_failure: str) -> dict[str, Any]:
    """:func:`job_options` of a flow child, with what its failure does to the parent."""
    key = "failParentOnFailure" if on_child_failure == "fail" else "ignoreDependencyOnFailure"
    return {**job_options(job, job_id, priority), key: True}


def check_supported(scenario: Scenario, *, compare: bool = False) -> None:
    """Refuse what cannot be driven into BullMQ; ``compare``: also what cannot be compared with the model.

    Raises:
        NotSupportedError: ``[[events]]`` (qsim cannot signal your BullMQ workers) or, when
            comparing, ``fan_out`` types (your handlers add their own children).
    """
    label = _label(scenario)
    priorities(scenario)
    if compare and scenario.events:
        raise NotSupportedError(f"{label}: [[events]] cannot be played on BullMQ workers qsim did not start; "
                                f"remove them to compare against BullMQ")
    if compare:
        for i, job in enumerate(scenario.jobs):
            if job.fan_out is not None:
                raise NotSupportedError(f"{label}: jobs[{i}] ({job.name!r}) has fan_out: BullMQ handlers add their "
                                        f"own children, so the model's children cannot be matched; not supported "
                                        f"by --target bullmq")


def _capped(job: JobType) -> bool:
    b = job.backoff
    return job.attempts > 2 and b.kind == "exponential" and b.delay * 2.0 ** (job.attempts - 2) > b.max


def notes(scenario: Scenario, types: Iterable[str] | None = None) -> list[str]:
    """What BullMQ does differently from the scenario's model, one sentence each (empty: nothing)."""
    wanted = set(types) if types is not None else {j.name for j in scenario.jobs}
    out = []
    for job in scenario.jobs:
        if job.name not in wanted:
            continue
        if job.timeout > 0:
            out.append(f"job type {job.name!r}: BullMQ has no per-attempt timeout; the model's timeout of "
                       f"{job.timeout:g} s does not apply to BullMQ workers")
        if _capped(job):
            out.append(f"job type {job.name!r}: BullMQ's exponential backoff has no cap; the model caps it at "
                       f"{job.backoff.max:g} s")
        if job.fan_out is not None:
            out.append(f"job type {job.name!r}: only the parents are added; its fan-out children are your "
                       f"handler's to add")
    for q in scenario.queues:
        if q.aging:
            out.append(f"queue {q.name!r}: BullMQ has no priority aging")
        if q.rate_limit is not None and q.rate_limit.key:
            out.append(f"queue {q.name!r}: a keyed rate limit is not BullMQ's (its limits are the workers' own "
                       f"and the queue's global ones)")
    return out
