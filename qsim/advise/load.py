"""``qsim advise``'s recommendation for a measured load: what the ``qsim`` autoscaling policy scales on.

A running advisor (:func:`qsim.advise.advise`) calibrates its window of jobs
and plans the pool's workers. An autoscaling controller tried in the model or
on the engine harness sees the same window as a few numbers (an
:class:`~qsim.autoscale.observe.Observation`: the arrival rate and the
attempts' mean and coefficient of variation of run time). :class:`LoadAdvisor`
turns them into the advisor's answer the advisor's way: the calibrated
scenario's shape (Poisson arrivals at the measured rate; a service time that
is constant for cv < 0.05, exponential for cv within 0.15 of 1, else gamma with the measured
mean and cv), the pool at its concurrency, runs of :data:`WORKER_BUDGET`'s
``jobs_per_run`` jobs with its replications, the same search range
(:func:`~qsim.advise.capacity.search_range`) and the same plan
(:func:`qsim.analysis.plan.planner.plan`, bisection) as :func:`~qsim.advise.advise_from`.

The answers are remembered per measured load, rounded to a grid (the rate to
:data:`GRID` relative steps, the mean service to :data:`SERVICE_GRID`, the cv
to constant / exponential / gamma in steps of 0.25), and the answer's
monotonicity in the rate is used: when two rates already planned bracket a
new one and got the same count, that is its count too, without a plan (more
load never needs fewer workers). A day of polls then plans near the rates
where the count changes only. The memory is the process's (the plan is
deterministic for a seed, so every run of a process shares it: replications
and tuning points ask the same questions); an instance is picklable (the
model's runs may go to other processes).
"""

from __future__ import annotations

import math
from typing import Any

from qsim.advise.capacity import search_range
from qsim.advise.core import DEFAULT_MAX_WORKERS, parse_slos, sized_scenario
from qsim.advise.live import WORKER_BUDGET
from qsim.analysis.plan import plan
from qsim.analysis.slo.language import SLO
from qsim.autoscale.build import needs_advice
from qsim.autoscale.observe import Observation
from qsim.spec import dists
from qsim.spec.scenario import JobType, PoolSpec, QueueSpec, Scenario

__all__ = ["LoadAdvisor", "GRID", "advisors"]

#: Relative step of the grid the measured rate is rounded to.
GRID = 0.05
#: Relative step of the grid the measured mean service time is rounded to.
SERVICE_GRID = 0.10
#: Answers planned in this process: (SLOs, concurrency, max workers, seed, budget, service, cv) -> {rate: workers}.
_ANSWERS: dict[tuple[Any, ...], dict[float, int | None]] = {}


def _snap(x: float, step: float = GRID) -> float:
    return float(math.exp(round(math.log(x) / math.log1p(step)) * math.log1p(step)))


def _shape(cv: float) -> float:
    """The cv the plan uses: 0 (constant) below 0.05, 1 (exponential) within 0.25 of 1, else in steps of 0.25."""
    if cv < 0.05:
        return 0.0
    if abs(cv - 1.0) < 0.25:
        return 1.0
    return max(0.25, round(cv * 4) / 4)


def _bracketed(known: dict[float, int | None], rate: float) -> tuple[bool, int | None]:
    """The count at ``rate`` when planned rates below and above it got the same one (None: no count meets)."""
    below = [r for r in known if r <= rate]
    above = [r for r in known if r >= rate]
    if not below or not above:
        return False, None
    a, b = known[max(below)], known[min(above)]
    return (a == b), a


def _service(mean: float, cv: float) -> dists.Distribution:
    if cv == 0.0:
        return dists.Constant(mean=mean)
    if cv == 1.0:
        return dists.Exponential(mean=mean)
    return dists.Gamma(mean=mean, cv=cv)


class LoadAdvisor:
    """The advisor's worker count for a measured load (see the module docstring); call it with an observation.

    Args:
        slo: the advisor's SLOs (``qsim advise --slo``), e.g. ``"p95_wait<=2"``.
        concurrency: the pool's concurrency per worker.
        max_workers: the most workers the search considers.
        seed: replication ``r`` of each plan uses ``seed + r``.
        budget: the plan's budget (:data:`WORKER_BUDGET`: replications, jobs_per_run, search).
    """

    def __init__(self, slo: str | SLO | list[str | SLO], *, concurrency: int, max_workers: int = DEFAULT_MAX_WORKERS,
                 seed: int = 0, budget: dict[str, Any] | None = None) -> None:
        self.slos = parse_slos(slo)
        self.concurrency, self.max_workers, self.seed = concurrency, max_workers, seed
        self.budget = {**WORKER_BUDGET, **(budget or {})}
        self.memo: dict[tuple[float, float, float], int | None] = {}

    def __call__(self, obs: Observation) -> int | None:
        """The recommendation for the load in ``obs`` (None: not measured yet, or no count in range meets the SLOs)."""
        if obs.arrival_rate is None or obs.mean_service is None or obs.mean_service <= 0:
            return None
        if obs.arrival_rate <= 0:
            return 1  # nothing arrives: the advisor's smallest pool (KEDA's min applies)
        rate, mean, cv = _snap(obs.arrival_rate), _snap(obs.mean_service, SERVICE_GRID), _shape(obs.service_cv or 0.0)
        key = (rate, mean, cv)
        if key not in self.memo:
            known = _ANSWERS.setdefault((tuple(map(str, self.slos)), self.concurrency, self.max_workers, self.seed,
                                         tuple(sorted(self.budget.items())), mean, cv), {})
            found, count = _bracketed(known, rate)
            if not found:
                count = known[rate] = self.recommend(rate, mean, cv)
            self.memo[key] = count
        return self.memo[key]

    def recommend(self, rate: float, mean_service: float, cv: float) -> int | None:
        """The least workers meeting the SLOs at ``rate`` jobs/s of ``mean_service`` s (cv ``cv``)."""
        base = Scenario(name="advised", duration=1.0, seed=self.seed,
                        queues=(QueueSpec(name="q"),),
                        jobs=(JobType(name="job", queue="q", arrival=dists.PoissonArrivals(rate=rate),
                                      service=_service(mean_service, cv)),),
                        pools=(PoolSpec(name="workers", queues=("q",), concurrency=self.concurrency),))
        scenario, pool = sized_scenario(base, "workers", self.concurrency, int(self.budget["jobs_per_run"]),
                                        self.seed)
        lo, hi = search_range(rate * mean_service, self.concurrency, 1, max_workers=self.max_workers)
        if lo > self.max_workers:
            return None
        path = f"pools.{pool}.workers"
        result = plan(scenario, self.slos, {path: list(range(lo, hi + 1))}, seed=self.seed,
                      replications=self.budget["replications"], search=self.budget["search"],
                      processes=self.budget["processes"])
        best = result["recommended"]
        return int(best[path]) if best is not None else None


def advisors(scenario: Scenario) -> dict[str, LoadAdvisor]:
    """A :class:`LoadAdvisor` per autoscaler that scales on the recommendation (pool -> advisor).

    Its plans use seeds from 0, whatever the run's seed (a deployed advisor's own
    default): every run asks the same questions, and one process answers each once.
    """
    where = f"{scenario.source}: " if scenario.source else ""
    for i, a in enumerate(scenario.autoscalers):  # an SLO the scenario's check let by (its shape is right)
        if needs_advice(a):
            parse_slos(str(a.params()["slo"]), option=f"{where}autoscalers[{i}].slo")
    return {a.pool: LoadAdvisor(str(a.params()["slo"]), concurrency=scenario.pool(a.pool).concurrency,
                                max_workers=max(a.max, 1))
            for a in scenario.autoscalers if needs_advice(a)}
