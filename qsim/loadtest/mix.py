"""What the producers add: the scenario's arrival rates, the mix of job types, the payloads.

Nothing here imports Locust.

- :func:`arrival_rates`: jobs per second of each job type that arrives on
  its own (types with an ``arrival``), times the rate scale; :func:`peak_rates`
  the same at a rate profile's peak (what the producers must keep up with).
- :class:`JobMix`: which type a producer adds next, by smooth weighted
  round-robin over those rates (deterministic: after ``n`` picks each type
  has ``n * rate / total`` of them, within one).
- :class:`PayloadSource`: the payload and engine options of each job (and
  of a flow parent's children), taken from :func:`qsim.harness.plan.plan_jobs`
  (the very draws the model and ``qsim run`` use), cycled when the load test
  outlasts them, under job ids of this run (``<run_id>-<type>-<n>``; children
  ``<parent id>.<k>``) so a run never collides with another. A job type with
  a ``payload`` template (:mod:`qsim.spec.templates`) gets that template rendered
  for each job instead (``templates=True``: real handlers).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qsim.errors import NotSupportedError
from qsim.harness.plan import engine_options, job_options, plan_jobs
from qsim.spec.scenario import Scenario
from qsim.spec.templates import render

__all__ = ["arrival_rates", "peak_rates", "JobMix", "PayloadSource", "NextJob", "PLAN_CAP"]

#: At most this many planned jobs are drawn; a longer run cycles through them.
PLAN_CAP = 20_000


def _label(scenario: Scenario) -> str:
    return str(scenario.source) if scenario.source else scenario.name


def arrival_rates(scenario: Scenario, scale: float = 1.0) -> dict[str, float]:
    """Mean jobs per second of each job type with an ``arrival``, times ``scale``.

    A flow parent counts as one job (its children come with it). A ``trace``
    type's rate is its arrivals within ``duration`` over ``duration``; a
    profiled type's (``profile``, a ``burst`` with ``points``) its profile's mean.

    Raises:
        NotSupportedError: No type arrives at all.
    """
    rates: dict[str, float] = {}
    for job in scenario.jobs:
        if job.arrival is None:
            continue
        if job.arrival.kind == "trace":
            at = getattr(job.arrival, "at", ())
            rate = sum(1 for t in at if 0 <= t < scenario.duration) / scenario.duration * scale
        else:
            rate = float(job.arrival.rate) * scale
        if rate > 0:
            rates[job.name] = rate
    if not rates:
        raise NotSupportedError(f"{_label(scenario)}: no job type has an arrival rate > 0: nothing to load-test")
    return rates


def peak_rates(scenario: Scenario, scale: float = 1.0) -> dict[str, float]:
    """:func:`arrival_rates`, with a profiled type at its profile's peak (times ``scale``)."""
    rates = arrival_rates(scenario, scale)
    for job in scenario.jobs:
        profile = getattr(job.arrival, "profile", None)
        if job.name in rates and profile is not None:
            rates[job.name] = float(profile.peak) * scale
    return rates


class JobMix:
    """Smooth weighted round-robin over job types, weighted by their rates.

    Args:
        rates: Jobs per second by type (any positive weights).
    """

    def __init__(self, rates: Mapping[str, float]) -> None:
        if not rates or any(not r > 0 for r in rates.values()):
            raise ValueError(f"rates must be a non-empty mapping of positive numbers, got {dict(rates)!r}")
        self.names = list(rates)
        self.weights = [float(rates[n]) for n in self.names]
        self.total = sum(self.weights)
        self._current = [0.0] * len(self.names)

    def next(self) -> str:
        """The job type to add next."""
        best = 0
        for i, w in enumerate(self.weights):
            self._current[i] += w
            if self._current[i] > self._current[best]:
                best = i
        self._current[best] -= self.total
        return self.names[best]


@dataclass(frozen=True)
class NextJob:
    """One job to add: its id, payload and ``Queue.add`` options; for a flow parent, its
    children as ``(queue, type, id, payload, options)`` and the flow's child-failure policy."""

    job_id: str
    payload: dict[str, Any]
    options: dict[str, Any]
    children: tuple[tuple[str, str, str, dict[str, Any], dict[str, Any]], ...] = ()
    on_child_failure: str = "fail"


class PayloadSource:
    """Payloads, options and ids of the jobs one process adds.

    Args:
        scenario: The scenario.
        run_id: Prefix of every job id (the observer keys on it).
        node: Distinguishes processes of one distributed run (``""`` alone).
        cap: At most this many planned jobs are drawn (see :data:`PLAN_CAP`).
        templates: Render the job types' ``payload`` templates (False: always the planned payload,
            for the synthetic handlers of ``--start-workers``).
    """

    def __init__(self, scenario: Scenario, run_id: str, *, node: str = "", cap: int = PLAN_CAP,
                 templates: bool = True) -> None:
        self.scenario = scenario
        self.run_id = run_id
        self.base = f"{run_id}{node}"
        self.templates = templates
        types = [j.name for j in scenario.jobs if j.arrival is not None]
        planned = plan_jobs(scenario, max_jobs=cap)
        if any(not any(p.type == t for p in planned) for t in types):  # a rare type beyond the cap: plan it all
            planned = plan_jobs(scenario)
        self.payloads: dict[str, list[dict[str, Any]]] = {t: [] for t in types}
        self.children: dict[str, list[list[tuple[str, str, dict[str, Any]]]]] = {t: [] for t in types}
        for p in planned:
            pool = self.payloads.get(p.type)
            if pool is not None and len(pool) < cap:
                pool.append(p.payload)
                if scenario.job(p.type).flow is not None:
                    self.children[p.type].append([(c.queue, c.type, c.payload) for c in p.children])
        self.options = {t: job_options(scenario.job(t)) for t in types}
        self.queue_of = {t: scenario.job(t).queue for t in types}
        self._seq = dict.fromkeys(types, 0)

    def next(self, job_type: str, n: int | None = None) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """``(job_id, payload, Queue.add options)`` of the next job of ``job_type`` (see :meth:`next_job`)."""
        job = self.next_job(job_type, n)
        return job.job_id, job.payload, job.options

    def next_job(self, job_type: str, n: int | None = None) -> NextJob:
        """The next job of ``job_type``, or its ``n``-th (a scheduled arrival: the ``n``-th planned payload)."""
        if n is None:
            n = self._seq[job_type]
            self._seq[job_type] = n + 1
        pool = self.payloads[job_type]
        if not pool:
            raise NotSupportedError(f"{_label(self.scenario)}: job type {job_type!r} has no planned job "
                                    f"(its arrival process gives none within duration)")
        job_id = f"{self.base}-{job_type}-{n}"
        payload = pool[n % len(pool)]
        fan = payload.get("fan")
        if fan:  # children need ids of this job, not the plan's
            payload = copy.copy(payload)
            payload["fan"] = {**fan, "jobs": [[f"{job_id}.{k}", data] for k, (_, data) in enumerate(fan["jobs"])]}
        payload = self.rendered(job_type, job_id, n, payload)
        options = engine_options(self.options[job_type], job_id)
        flow = self.scenario.job(job_type).flow
        if flow is None:
            return NextJob(job_id, payload, options)
        kids = tuple((queue, kind, f"{job_id}.{k}", self.rendered(kind, f"{job_id}.{k}", n, data),
                      engine_options(self.options_of(kind), f"{job_id}.{k}"))
                     for k, (queue, kind, data) in enumerate(self.children[job_type][n % len(pool)]))
        return NextJob(job_id, payload, options, kids, flow.on_child_failure)

    def rendered(self, job_type: str, job_id: str, n: int, planned: dict[str, Any]) -> Any:
        """The type's ``payload`` template for this job (with :attr:`templates`), else ``planned``."""
        spec = self.scenario.job(job_type)
        if not self.templates or spec.payload is None:
            return planned
        return render(spec.payload, job_id=job_id, n=n, type=job_type, queue=spec.queue, run_id=self.run_id)

    def options_of(self, job_type: str) -> dict[str, Any]:
        """The add options of any job type (children included)."""
        if job_type not in self.options:
            self.options[job_type] = job_options(self.scenario.job(job_type))
        return self.options[job_type]
