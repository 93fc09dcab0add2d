"""Capacity planning: the cheapest setting that meets service-level objectives, with confidence.

An SLO is ``<metric><op><number>``, e.g. ``p95_wait<=2``. Metrics name Summary
fields: ``mean_wait``, ``p50_wait``, ``p95_wait``, ``p99_wait``, ``max_wait``,
the same for ``latency``, ``throughput``, ``utilization``, ``dead`` and
``lost``; per job type ``p95_wait[cut]``. Operators: ``<=``, ``<``, ``>=``, ``>``, ``==``
(``lost==0``). Over the run's windows: ``p95_wait<=2 in 95% of windows`` (a share of the
windows) or ``p95_wait<=2 in every window`` (the worst one), see
:mod:`qsim.analysis.slo.windowed`. The grammar and its one parser live in :mod:`qsim.analysis.slo.language`
(re-exported here).

How :func:`plan` decides, point by point:

- **Replications.** Each point runs ``replications`` times, replication ``r``
  with seed ``seed + r`` at *every* point (common random numbers: the points
  see the same arrivals and service draws, so their differences are the
  setting's, not luck's). Every per-run metric — quantiles included — is
  estimated by its mean over the runs with a Student-t confidence interval
  at ``confidence`` (:mod:`qsim.analysis.stats`), clipped to the metric's
  range (no wait below 0, no utilization above 1).
- **Meeting an SLO.** A point meets ``metric <= x`` (or ``<``) when the
  interval's *upper* bound does, and ``metric >= x`` (or ``>``) when its
  *lower* bound does; with one replication, when the value does. A metric
  that is undefined in a run (nothing completed) meets nothing.
- **``replications="auto"``.** Every point starts with :data:`AUTO_START`
  runs; a point whose interval still straddles an SLO's number gets
  :data:`AUTO_STEP` more, until every SLO is decided or the point has had
  :data:`AUTO_MAX` runs (the budget). A point still undecided then does not
  meet the SLO (its upper bound does not). Stopping when decided makes the
  interval's coverage somewhat lower than nominal near the boundary.
- **Run length.** :mod:`qsim.analysis.plan.runlength` flags a quantile that rests
  on too few jobs (``short``: reported, marked) and a point whose queue is
  still growing at the end (``unstable``: it meets no SLO).
- **Search.** ``search="grid"`` runs every point; ``search="auto"`` bisects
  along a monotone parameter (workers, concurrency, rates...) on every line of
  the grid (:mod:`qsim.analysis.plan.search`) and sweeps when there is none.
- **Recommendation.** Among the points that meet every SLO, the cheapest by
  ``minimize`` (a cost expression over the varied parameters,
  :mod:`qsim.analysis.plan.cost`), ties and the default in ascending grid order
  (the first path varies slowest: with one varied parameter, the smallest
  value). With ``minimize`` the next two cheapest are listed too.
- **Over a rate profile** (:mod:`qsim.analysis.plan.profile`): judge the windows
  (``p95_wait<=2 in 95% of windows``, ``... in every window``); every SLO is
  also judged on the peak hour's windows alone, and the result's ``profile``
  part gives the peak hour, the cheapest point meeting the SLOs there (the
  peak-hour answer) and what that setting costs held over the whole profile
  (worker-hours: the static baseline an autoscaler improves on). The
  run-length trend check is left out: a profile's waits change with the
  load by design, and the windows show an overload.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qsim.analysis.plan.cost import Cost, parse_cost
from qsim.analysis.plan.profile import PEAK_LENGTH, PeakHour, peak_hour, static_cost, time_varying
from qsim.analysis.plan.redis_load import attach, peak_rate, summary_load
from qsim.analysis.plan.report import PlanResult
from qsim.analysis.plan.runlength import diagnose
from qsim.analysis.plan.runner import RunResult, Runner, make_runner
from qsim.analysis.plan.search import Key, choose_axis, point_key, recommend
from qsim.analysis.plan.sweep import grid, replication_seeds, run_points, with_params
from qsim.analysis.slo.language import SLO, parse_slo
from qsim.analysis.slo.metrics import Metric
from qsim.analysis.stats import Estimate, estimate, mean_summary
from qsim.errors import ScenarioError
from qsim.spec.redis_cost import DEFAULT_CEILING, check_ceiling, redis_cost
from qsim.spec.scenario import Scenario

__all__ = ["SLO", "parse_slo", "plan", "PlanResult", "AUTO_START", "AUTO_STEP", "AUTO_MAX", "DEFAULT_METRICS"]

#: ``replications="auto"``: runs per point to start with, runs added per round, and the most per point.
AUTO_START, AUTO_STEP, AUTO_MAX = 5, 5, 40
#: Metrics every point reports (with their intervals) besides those of the SLOs.
DEFAULT_METRICS = ("mean_wait", "p95_wait", "p99_wait", "p95_latency", "throughput", "utilization")


@dataclass
class _Point:
    """What is known of one point: its runs, estimates, checks and verdict."""

    params: dict[str, Any]
    runs: list[RunResult] = field(default_factory=list)
    estimates: dict[str, Estimate] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)
    peak_checks: dict[str, str] = field(default_factory=dict)  # over a profile: the SLOs on the peak hour
    run_length: dict[str, Any] = field(default_factory=dict)

    @property
    def meets(self) -> bool:
        return not self.run_length.get("unstable") and all(c == "met" for c in self.checks.values())

    @property
    def meets_peak(self) -> bool:
        return not self.run_length.get("unstable") and all(c == "met" for c in self.peak_checks.values())

    @property
    def decided(self) -> bool:
        def settled(checks: Any) -> bool:
            return "failed" in checks or all(c == "met" for c in checks)

        return bool(self.run_length.get("unstable")) or (settled(self.checks.values())
                                                        and settled(self.peak_checks.values()))


class _Evaluator:
    """Runs points (with their replications) on a runner and remembers them."""

    def __init__(self, scenario: Scenario, slos: Sequence[SLO], paths: Sequence[str], runner: Runner, *, seed: int,
                 max_jobs: int | None, replications: int | str, confidence: float,
                 progress: Callable[[float], None] | None, peak_slos: Sequence[SLO] = ()) -> None:
        self.scenario, self.slos, self.paths, self.runner = scenario, list(slos), list(paths), runner
        self.seed, self.max_jobs, self.confidence, self.progress = seed, max_jobs, confidence, progress
        self.peak_slos = list(peak_slos)
        self.judge = "all"  # or "peak": which checks a call's verdicts are (the peak hour's)
        self.trend = not time_varying(scenario)  # the run-length trend check (not over a profile)
        self.auto = replications == "auto"
        self.start = AUTO_START if self.auto else int(replications)
        targets = [s.target for s in [*slos, *self.peak_slos]] + [Metric(m) for m in DEFAULT_METRICS]
        self.metrics = list(dict.fromkeys(targets))  # SLO metrics first, no repeats
        self.points: dict[Key, _Point] = {}
        self.runs_done = 0
        self.runs_expected = 0

    def expect(self, points: int) -> None:
        """Tell the progress estimate how many more points are coming."""
        self.runs_expected += points * self.start

    def __call__(self, batch: list[dict[str, Any]]) -> list[bool]:
        """Run the new points of ``batch`` (and, with auto replications, more runs where undecided)."""
        fresh = {point_key(p, self.paths): _Point(dict(p)) for p in batch if point_key(p, self.paths) not in self.points}
        self.points.update(fresh)
        new = list(fresh.values())
        self._add_runs(new, self.start)
        while self.auto:
            open_points = [p for p in new if not p.decided and len(p.runs) < AUTO_MAX]
            if not open_points:
                break
            self.runs_expected += len(open_points) * AUTO_STEP
            self._add_runs(open_points, min(AUTO_STEP, AUTO_MAX - max(len(p.runs) for p in open_points)))
        if self.judge == "peak":
            return [self.points[point_key(p, self.paths)].meets_peak for p in batch]
        return [self.points[point_key(p, self.paths)].meets for p in batch]

    def _add_runs(self, points: list[_Point], count: int) -> None:
        if not points or count < 1:
            return
        start = len(points[0].runs)  # points of one call always have the same number of runs
        seeds = replication_seeds(self.seed, count, start=start)
        base = self.runs_done

        def done(k: int) -> None:
            self.runs_done = base + k
            if self.progress:
                self.progress(min(self.runs_done / max(self.runs_expected, 1), 0.99))

        results = run_points(self.runner, self.scenario, [p.params for p in points], seeds,
                             max_jobs=self.max_jobs, first_part=self.trend, done=done)
        for p, runs in zip(points, results):
            p.runs.extend(runs)
            self._assess(p)

    def _assess(self, p: _Point) -> None:
        summaries = [r["summary"] for r in p.runs]
        p.estimates = {m.key: estimate([m.measure(s) for s in summaries], self.confidence, bounds=m.bounds)
                       for m in self.metrics}
        p.checks = {str(slo): slo.check(p.estimates[slo.target.key]) for slo in self.slos}
        p.peak_checks = {str(slo): slo.check(p.estimates[slo.target.key]) for slo in self.peak_slos}
        p.run_length = diagnose(p.runs, self.metrics, self.confidence)


def _replications(value: int | str) -> int | str:
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScenarioError(f"--replications must be a whole number >= 1 or auto, got {value!r}")
    return value


def _check_vary(scenario: Scenario, vary: Mapping[str, Sequence[Any]]) -> None:
    if not vary:
        raise ScenarioError("plan needs at least one --vary")
    first = {path: values[0] for path, values in vary.items() if values}
    for path, values in vary.items():
        if not values:
            raise ScenarioError(f"--vary {path}: no values")
        for value in dict.fromkeys(values):  # every value once, the other paths at their first
            with_params(scenario, {**first, path: value})


def plan(scenario: Scenario, slos: Sequence[SLO], vary: Mapping[str, Sequence[Any]], *, seed: int | None = None,
         max_jobs: int | None = None, processes: int | None = None, replications: int | str = 1,
         confidence: float = 0.95, search: str = "grid", minimize: str | Cost | None = None, client: Any = None,
         progress: Callable[[float], None] | None = None, peak: float = PEAK_LENGTH,
         redis_ceiling: float = DEFAULT_CEILING, redis_cpu_per_job_us: float | None = None) -> PlanResult:
    """Find the cheapest point of ``vary`` that meets every SLO (see the module docstring).

    Args:
        scenario: the system to size; ``vary`` maps dotted paths (``pools.p.concurrency``) to values.
        slos: the objectives (:func:`parse_slo`).
        seed: replication ``r`` uses ``seed + r`` (default: the scenario's seed).
        max_jobs: stop arrivals after this many jobs in each run.
        processes: local process pool size (default: every core; 1 runs here).
        replications: runs per point, or ``"auto"`` (sequential, see :data:`AUTO_MAX`).
        confidence: of the intervals (two-sided).
        search: ``"grid"`` (every point) or ``"auto"`` (bisection where a parameter is monotone).
        minimize: a cost expression over the varied parameters, e.g. ``"workers*concurrency"``.
        client: a ``distributed.Client``: the runs go to its Dask cluster instead of the local pool.
        progress: called with the fraction done (an estimate while replications or bisection adapt).
        peak: over a rate profile, the length of the peak period judged on its own (default an hour).
        redis_ceiling: the share of one Redis core above which the answer is flagged (``warnings``).
        redis_cpu_per_job_us: Redis CPU per job to price the answer at (default: the scenario's
            ``engine.redis_cpu_per_job_us``, else qsim's default; :mod:`qsim.spec.redis_cost`).

    Returns:
        A :class:`PlanResult` (a dict): ``{"slo", "points": [{"params", "summary", "meets_slo",
        "replications", "ci", "metrics", "checks", "run_length", "warnings"[, "cost"]}],
        "recommended": params | None, "next": [params], ...}``. ``summary`` is the mean run.
        Over a rate profile, each point also has ``peak_checks`` and ``meets_peak``, and the result
        a ``profile`` part: ``{"peak": {"start", "end", "rate", "mean_rate", "slo", "recommended"},
        "static_peak": static_cost of the peak's answer | None, "static_recommended": ... | None}``
        (:func:`qsim.analysis.plan.profile.static_cost`). ``redis``: ``{"cpu_per_job_us", "utilization",
        ...}`` of the recommended point (over a rate profile at the busiest window's rate; None without an
        answer), and ``warnings`` when that utilization is above ``redis_ceiling``.
    """
    _check_slos(scenario, slos)
    _check_options(confidence=confidence, search=search, redis_ceiling=redis_ceiling,
                   redis_cpu_per_job_us=redis_cpu_per_job_us)
    replications = _replications(replications)
    _check_vary(scenario, vary)
    paths = list(vary)
    axis = choose_axis(vary) if search == "auto" else None
    points = grid(vary)
    cost = _checked_cost(minimize, scenario, paths, points)
    hour = peak_hour(scenario, peak) if time_varying(scenario) else None
    peak_slos = [s.during(hour.start, hour.end, "peak") for s in slos] if hour is not None else []
    started = time.monotonic()
    with make_runner(processes=processes, client=client) as runner:
        evaluate = _Evaluator(scenario, slos, paths, runner, seed=scenario.seed if seed is None else seed,
                              max_jobs=max_jobs, replications=replications, confidence=confidence,
                              progress=progress, peak_slos=peak_slos)
        evaluate.expect(_expected_points(vary, axis, len(points)))
        best, _ = recommend(vary, evaluate, axis=axis, cost=cost, want=3 if cost is not None else 1)
        best_peak: list[dict[str, Any]] = []
        if hour is not None:
            evaluate.judge = "peak"
            best_peak, _ = recommend(vary, evaluate, axis=axis, cost=cost, want=1)
    if progress:
        progress(1.0)
    simulated = [evaluate.points[point_key(p, paths)] for p in points if point_key(p, paths) in evaluate.points]
    result = PlanResult({
        "slo": [str(s) for s in slos],
        "vary": {path: list(values) for path, values in vary.items()},
        "replications": replications,
        "confidence": confidence,
        "minimize": cost.text if cost is not None else None,
        "search": {"method": "grid" if axis is None else "bisection", "axis": axis, "grid_points": len(points),
                   "points_simulated": len(simulated), "runs": evaluate.runs_done,
                   "seconds": round(time.monotonic() - started, 3)},
        "points": [_row(p, cost, hour is not None) for p in simulated],
        "recommended": best[0] if best else None,
        "next": best[1:],
    })
    if hour is not None:
        result["profile"] = _profile_part(scenario, hour, peak_slos, best_peak, best)
    answer = evaluate.points.get(point_key(best[0], paths)) if best else None
    load = None if answer is None else _redis_load(scenario, best[0], answer, ceiling=redis_ceiling,
                                                   cpu_per_job_us=redis_cpu_per_job_us)
    attach(result, load, "the recommended point")
    return result


def _checked_cost(minimize: str | Cost | None, scenario: Scenario, paths: Sequence[str],
                  points: Sequence[Mapping[str, Any]]) -> Cost | None:
    """The cost to minimize (an expression parsed), evaluated at every point so that one undefined somewhere
    fails now, not after the runs."""
    cost = parse_cost(minimize, list(paths), scenario) if isinstance(minimize, str) else minimize
    if cost is not None:
        for params in points:
            cost(params)
    return cost


def _expected_points(vary: Mapping[str, Sequence[Any]], axis: str | None, grid_points: int) -> int:
    """The points the search is expected to simulate: every one of the grid, or a bisection along ``axis`` of
    each line of the others."""
    if not axis:
        return grid_points
    lines = grid_points // len(vary[axis])
    return lines * (2 + math.ceil(math.log2(len(set(vary[axis])))))


def _check_options(*, confidence: float, search: str, redis_ceiling: float,
                   redis_cpu_per_job_us: float | None) -> None:
    """:func:`plan`'s options in range, or a ScenarioError naming the flag."""
    check_ceiling(redis_ceiling)
    if redis_cpu_per_job_us is not None and not (redis_cpu_per_job_us > 0 and math.isfinite(redis_cpu_per_job_us)):
        raise ScenarioError(f"--redis-cpu-per-job must be > 0 µs, got {redis_cpu_per_job_us!r}")
    if not 0.0 < confidence < 1.0:
        raise ScenarioError(f"--confidence must be between 0 and 1, got {confidence!r}")
    if search not in ("grid", "auto"):
        raise ScenarioError(f"--search must be grid or auto, got {search!r}")


def _redis_load(scenario: Scenario, params: Mapping[str, Any], answer: Any, *, ceiling: float,
                cpu_per_job_us: float | None) -> Any:
    """The Redis load of the recommended point ``params`` (its runs ``answer``): at its mean throughput, or
    over a rate profile at the busiest window's rate."""
    summary = mean_summary([r["summary"] for r in answer.runs])
    busiest = peak_rate(scenario)
    return summary_load(with_params(scenario, params), summary,
                        cost=redis_cost(scenario.engine, cpu_per_job_us=cpu_per_job_us), ceiling=ceiling,
                        throughput=None if busiest is None else max(float(summary.get("throughput") or 0.0), busiest))


def _check_slos(scenario: Scenario, slos: Sequence[SLO]) -> None:
    """At least one SLO, each naming a job type the scenario has (when it names one)."""
    if not slos:
        raise ScenarioError("plan needs at least one --slo")
    names = {j.name for j in scenario.jobs}
    for slo in slos:
        if slo.job_type and slo.job_type not in names:
            raise ScenarioError(f"--slo {slo}: no job type {slo.job_type!r} (defined: {', '.join(sorted(names))})")


def _profile_part(scenario: Scenario, hour: PeakHour, peak_slos: Sequence[SLO], best_peak: list[dict[str, Any]],
                  best: list[dict[str, Any]]) -> dict[str, Any]:
    """A plan's ``profile`` part: the peak period and its answer, and what each answer costs held all along."""
    def static(params: list[dict[str, Any]]) -> dict[str, Any] | None:
        return static_cost(with_params(scenario, params[0])) if params else None

    return {
        "peak": {**hour.as_dict(), "slo": [str(s) for s in peak_slos],
                 "recommended": best_peak[0] if best_peak else None},
        "static_peak": static(best_peak),
        "static_recommended": static(best),
    }


def _row(p: _Point, cost: Cost | None, profiled: bool = False) -> dict[str, Any]:
    row: dict[str, Any] = {
        "params": p.params,
        "summary": mean_summary([r["summary"] for r in p.runs]),
        "meets_slo": p.meets,
        "replications": len(p.runs),
        "ci": {key: est.ci for key, est in p.estimates.items()},
        "metrics": {key: est.to_dict() for key, est in p.estimates.items()},
        "checks": dict(p.checks),
        "run_length": {k: v for k, v in p.run_length.items() if k != "warnings"},
        "warnings": list(p.run_length.get("warnings", [])),
    }
    if profiled:
        row["peak_checks"] = dict(p.peak_checks)
        row["meets_peak"] = p.meets_peak
    if cost is not None:
        row["cost"] = cost(p.params)
    return row
