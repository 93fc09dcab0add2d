"""Live capacity advice: calibrate a running queue from its last window of jobs, then plan its workers.

:func:`advise` reads a queue's measured jobs from Redis (read-only, the
:mod:`qsim.calibrate` sources), and :func:`advise_from` turns a calibration
into an :class:`~qsim.advise.result.Advice`:

0. **A rate that changed within the window** (a job type fitted with a
   rate profile, :mod:`qsim.calibrate.drift`): the advice is for now, so it
   plans on the rate at the window's end, the profile's *latest* rate (the
   mean of the last segment of a step profile, the rate at the window's end
   of a linear one, the last hour's of a daily one), as a ``poisson`` arrival
   (a profiled ``burst``: a ``burst`` at that rate); a warning gives the peak
   and the mean of the window beside it (:func:`steady_calibration`). A type
   whose rate fell to 0 adds no load.
1. **The pool.** The observed pool that serves the queue(s) (the one with the
   most runs when several do); its ``concurrency`` is the observed one unless
   given (a pool that was never busy may be configured higher than it looked).
2. **Before simulating** (:mod:`qsim.advise.capacity`): a queue whose arrivals
   need more job starts than its rate limit allows, or more busy slots than its
   concurrency limit, can be met by no worker count: the advice says so in
   words (``recommended_workers`` None and a ``reason``), it does not plan.
3. **The plan.** The calibrated scenario, its pool at ``concurrency``, is run
   long enough for about ``jobs_per_run`` jobs per replication (a tenth of it
   warm-up), and :func:`qsim.analysis.plan.planner.plan` finds the least
   ``pools.<pool>.workers`` in the search range whose confidence interval
   meets every SLO (``replications``, ``confidence``, ``search="auto"``:
   bisection). Replication ``r`` uses seed ``seed + r``: the same data gives
   the same advice, and an offline ``qsim plan`` of :meth:`Advice.write`'s
   TOML with :meth:`Advice.plan_command`'s arguments gives the same answer.
   No count in the range meeting the SLOs is said in words too.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any

from qsim.advise.capacity import (
    blocked,
    busy_share,
    limit_workers,
    pool_load,
    search_range,
    shutdown_for,
)
from qsim.advise.result import Advice, NoJobsInWindow
from qsim.analysis.plan import plan
from qsim.analysis.plan.report import PlanResult
from qsim.analysis.slo.language import SLO, parse_slo
from qsim.calibrate import MIN_JOBS, from_bullmq, from_redis
from qsim.calibrate.measured import parse_when
from qsim.calibrate.pools import PoolFit
from qsim.calibrate.report import Calibration
from qsim.errors import CalibrationError, ScenarioError
from qsim.spec.dists import BurstArrivals, PoissonArrivals
from qsim.spec.redis_cost import DEFAULT_CEILING, check_ceiling
from qsim.spec.scenario import Scenario

__all__ = ["advise", "advise_from", "parse_slos", "parse_window", "planned_scenario", "sized_scenario",
           "steady_calibration", "DEFAULT_WINDOW", "DEFAULT_JOBS_PER_RUN",
           "DEFAULT_MAX_WORKERS", "SOURCES"]

logger = logging.getLogger(__name__)

#: ``--window``: the measured jobs the advice comes from (enqueued in the last 15 minutes).
DEFAULT_WINDOW = "15m"
#: Jobs per simulated replication (the model's run length).
DEFAULT_JOBS_PER_RUN = 10_000
#: The most workers the search considers.
DEFAULT_MAX_WORKERS = 500
SOURCES = ("qsim", "bullmq")


def parse_slos(slo: str | SLO | Sequence[str | SLO], *, option: str = "--slo") -> list[SLO]:
    """One SLO or several, as text (``p95_wait<=2``) or :class:`~qsim.analysis.slo.language.SLO`;
    ``option`` names where they came from in errors (``--advise-slo`` in ``qsim worker``)."""
    items = [slo] if isinstance(slo, (str, SLO)) else list(slo)
    if not items:
        raise ScenarioError(f"give at least one {option}, e.g. p95_wait<=2")
    return [s if isinstance(s, SLO) else parse_slo(s, option=option) for s in items]


def parse_window(text: str | float, *, option: str = "--window") -> float:
    """``--window``: a duration back from now (``90s``, ``15m``, ``2h``, ``1h30m``) or seconds; returns seconds.
    ``option`` names it in errors (``--advise-window`` in ``qsim worker``)."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            back = parse_when(str(text), now=0.0, what="--window")
        except CalibrationError:
            back = None
        seconds = -back if back is not None and back <= 0 else math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ScenarioError(f"{option} must be a duration like 90s, 15m or 2h (or seconds > 0), got {text!r}")
    return seconds


def _cpu() -> float:
    """CPU seconds of this process and its finished children (plan's process pool)."""
    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


def _pool(cal: Calibration, queues: Sequence[str]) -> tuple[PoolFit, list[str]]:
    serving = [p for p in cal.pools if set(p.queues) & set(queues)]
    if not serving:
        raise CalibrationError(f"no worker ran a job of {', '.join(map(repr, queues))} in the window: "
                               "no pool to size")
    pool = max(serving, key=lambda p: (p.runs, p.workers))
    notes = [f"several pools serve these queues ({', '.join(p.name for p in serving)}): sizing {pool.name!r}, "
             "the others as observed"] if len(serving) > 1 else []
    return pool, notes


def _safe_name(name: str, taken: set[str]) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name) or "workers"
    base, i = safe, 2
    while safe in taken - {name}:
        safe, i = f"{base}-{i}", i + 1
    return safe


def steady_calibration(cal: Calibration) -> tuple[Calibration, list[str]]:
    """``cal`` with every profiled job type at its latest rate (step 0 of the module docstring), and
    a warning per such type; ``cal`` itself when no rate changed."""
    fits, jobs, warnings = dict(cal.types), [], []
    for job in cal.scenario.jobs:
        f = cal.types.get(job.name)
        if f is None or f.arrival.profile is None or f.arrival.drift is None:
            jobs.append(job)
            continue
        a, d = f.arrival, f.arrival.drift
        latest = a.latest_rate
        since = "at the window's end" if d.model == "linear" else \
            f"from {d.latest_from:.6g} s into the window to its end" if d.model == "steps" else "over its last hour"
        warnings.append(f"job type {job.name!r}: the rate changed within the window ({d.model} profile: mean "
                        f"{a.rate:.4g}/s, peak {a.peak_rate:.4g}/s); planned on its latest rate {latest:.4g}/s "
                        f"({since}), so the advice holds while that rate does")
        kind = "burst" if a.kind == "burst" else "poisson"
        fits[job.name] = dataclasses.replace(f, arrival=dataclasses.replace(a, kind=kind, rate=latest, drift=None))
        if latest > 0:
            arrival: Any = BurstArrivals(rate=latest, size=a.size) if kind == "burst" else PoissonArrivals(rate=latest)
        else:
            arrival = None
        jobs.append(dataclasses.replace(job, arrival=arrival))
    if not warnings:
        return cal, []
    return dataclasses.replace(cal, types=fits, scenario=dataclasses.replace(cal.scenario, jobs=tuple(jobs))), warnings


def planned_scenario(cal: Calibration, pool: PoolFit, concurrency: int, jobs_per_run: int,
                     seed: int) -> tuple[Scenario, str]:
    """The calibrated scenario as planned: the pool at ``concurrency`` (renamed to a dotted-path-safe name),
    long enough for about ``jobs_per_run`` jobs, a tenth of it warm-up. Returns it and the pool's name."""
    return sized_scenario(cal.scenario, pool.name, concurrency, jobs_per_run, seed)


def sized_scenario(s: Scenario, pool: str, concurrency: int, jobs_per_run: int, seed: int) -> tuple[Scenario, str]:
    """``s`` as planned: ``pool`` at ``concurrency`` (renamed to a dotted-path-safe name), long enough for
    about ``jobs_per_run`` jobs at its arrival rates, a tenth of it warm-up. Returns it and the pool's name."""
    rate = sum(j.arrival.rate for j in s.jobs if j.arrival is not None)
    duration = max(jobs_per_run / rate, 1.0) if rate > 0 else s.duration
    name = _safe_name(pool, {p.name for p in s.pools})
    pools = tuple(dataclasses.replace(p, name=name, concurrency=concurrency) if p.name == pool else p
                  for p in s.pools)
    return dataclasses.replace(s, pools=pools, duration=duration, warmup=duration / 10, seed=seed), name


def _point(result: PlanResult, path: str, workers: int) -> dict[str, Any] | None:
    points: list[dict[str, Any]] = result["points"]
    for p in points:
        if p["params"].get(path) == workers:
            return p
    return None


def _predicted(point: dict[str, Any]) -> dict[str, Any]:
    s = point["summary"]
    return {"workers": next(iter(point["params"].values())), "wait": {k: s["wait"].get(k) for k in ("mean", "p50", "p95", "p99")},
            "latency": {k: s["latency"].get(k) for k in ("mean", "p50", "p95", "p99")},
            "utilization": s.get("utilization"), "throughput": s.get("throughput"),
            "metrics": point.get("metrics", {}), "replications": point.get("replications", 1),
            "unstable": bool(point.get("run_length", {}).get("unstable"))}


def _miss(slos: Sequence[SLO], lo: int, hi: int, point: dict[str, Any] | None, cap: int | None,
          concurrency: int) -> str:
    text = " and ".join(map(str, slos))
    why = f"no worker count from {lo} to {hi} (concurrency {concurrency}) meets {text}"
    if point is not None:
        if point.get("run_length", {}).get("unstable"):
            why += f": at {hi} workers the queue still grows"
        else:
            figures = ", ".join(f"{s.target.key} {_fig(point, s.target.key)}" for s in slos)
            why += f": at {hi} workers the model predicts {figures}"
    if cap is not None and hi >= cap:
        why += f" (more than {cap} workers add no capacity under the queues' concurrency limits)"
    return why


def _fig(point: dict[str, Any], key: str) -> str:
    m = point.get("metrics", {}).get(key) or {}
    mean, ci = m.get("mean"), m.get("ci")
    if mean is None:
        return "undefined"
    return f"{mean:.3g}" + (f" (CI {ci[0]:.3g}..{ci[1]:.3g})" if ci else "")


def advise_from(cal: Calibration, slo: str | SLO | Sequence[str | SLO], *, queues: Sequence[str] | None = None,
                concurrency: int | None = None, max_workers: int = DEFAULT_MAX_WORKERS,
                replications: int | str = "auto", confidence: float = 0.95, search: str = "auto",
                jobs_per_run: int = DEFAULT_JOBS_PER_RUN, seed: int = 0, processes: int | None = None,
                pre_stop: float = 0.0, window: str | None = None,
                progress: Callable[[float], None] | None = None, redis_ceiling: float = DEFAULT_CEILING,
                redis_cpu_per_job_us: float | None = None) -> Advice:
    """The advice for a calibration (see the module docstring); ``queues`` default to every calibrated one.

    ``redis_ceiling`` and ``redis_cpu_per_job_us`` price Redis at the recommendation as ``qsim plan`` does
    (:mod:`qsim.analysis.plan.redis_load`): the advice's ``redis``, and a warning above the ceiling.
    """
    t0, cpu0 = time.monotonic(), _cpu()
    slos = parse_slos(slo)
    try:
        check_ceiling(redis_ceiling)
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    if redis_cpu_per_job_us is not None and not (redis_cpu_per_job_us > 0 and math.isfinite(redis_cpu_per_job_us)):
        raise ScenarioError(f"--redis-cpu-per-job must be > 0, got {redis_cpu_per_job_us}")
    if concurrency is not None and concurrency < 1:
        raise ScenarioError(f"--concurrency must be >= 1, got {concurrency}")
    if max_workers < 1:
        raise ScenarioError(f"--max-workers must be >= 1, got {max_workers}")
    if jobs_per_run < 100:
        raise ScenarioError(f"--jobs-per-run must be >= 100, got {jobs_per_run}")
    names = list(queues) if queues else sorted({f.queue for f in cal.types.values()})
    cal, drifted = steady_calibration(cal)
    pool, warnings = _pool(cal, names)
    warnings += drifted
    c = concurrency or pool.concurrency
    load = pool_load(cal, pool)
    cap = limit_workers(cal, pool, c)
    lo, hi = search_range(load, c, pool.workers, max_workers=max_workers, cap=cap)
    scenario, pname = planned_scenario(cal, pool, c, jobs_per_run, seed)
    path = f"pools.{pname}.workers"
    reason = blocked(cal, pool)
    if reason is None and not any(j.arrival is not None for j in scenario.jobs if j.queue in pool.queues):
        reason = (f"no job of {', '.join(map(repr, pool.queues))} arrives at the window's end (the rate fell to 0 "
                  "within the window): no worker count to plan for")
    if reason is None and lo > max_workers:
        reason = (f"the offered load of {load:.4g} busy slots needs more than --max-workers {max_workers} workers "
                  f"of concurrency {c}")
    result: PlanResult | None = None
    redis: dict[str, Any] | None = None
    recommended: int | None = None
    predicted: dict[str, Any] | None = None
    if reason is None:
        result = plan(scenario, slos, {path: list(range(lo, hi + 1))}, seed=seed, replications=replications,
                      confidence=confidence, search=search, processes=processes, progress=progress,
                      redis_ceiling=redis_ceiling, redis_cpu_per_job_us=redis_cpu_per_job_us)
        best = result["recommended"]
        if best is not None:
            recommended = int(best[path])
            point = _point(result, path, recommended)
            predicted = _predicted(point) if point else None
        else:
            reason = _miss(slos, lo, hi, _point(result, path, hi), cap, c)
        redis = result.get("redis") if best is not None else None
        warnings += list(result.get("warnings", [])) if best is not None else []
    measured = cal.measured_summary()
    return Advice(
        queues=tuple(names), slos=tuple(str(s) for s in slos), window=window, recommended_workers=recommended,
        concurrency=c, reason=reason, current_workers=pool.workers, observed_concurrency=pool.concurrency,
        pool=pool.name, arrival_rate=sum(f.arrival.rate for f in cal.types.values() if f.queue in pool.queues),
        offered_load=load, utilization=busy_share(cal, pool, c), measured=measured, predicted=predicted,
        search={"path": path, "workers": [lo, hi], "cap": cap, "replications": replications,
                "confidence": confidence, "method": search, "seed": seed, "jobs_per_run": jobs_per_run,
                **({k: result["search"][k] for k in ("points_simulated", "runs")} if result else
                   {"points_simulated": 0, "runs": 0})},
        shutdown=shutdown_for(cal, pool, pre_stop=pre_stop), at=cal.window[1],
        seconds=time.monotonic() - t0, cpu_seconds=_cpu() - cpu0,
        warnings=tuple(warnings) + cal.warnings, scenario=scenario, calibration=cal, plan=result, redis=redis)


def advise(url: str, queues: str | Sequence[str], slo: str | SLO | Sequence[str | SLO], *,
           window: str = DEFAULT_WINDOW, source: str = "qsim", prefix: str | None = None, group: str | None = None,
           min_jobs: int = MIN_JOBS, max_jobs: int = 200_000, progress: Callable[[float], None] | None = None,
           **options: Any) -> Advice:
    """Advise the worker count of a running queue from the jobs enqueued in its last ``window``.

    Reads ``url`` only (the :mod:`qsim.calibrate` sources: batched reads, never a
    write). ``source`` is ``qsim`` (the engine's records) or ``bullmq``.
    ``options`` go to :func:`advise_from` (``concurrency``, ``max_workers``,
    ``replications``, ``confidence``, ``search``, ``jobs_per_run``, ``seed``,
    ``processes``, ``pre_stop``).

    Raises:
        NoJobsInWindow: too few jobs (or none) in the window to calibrate.
        CalibrationError: the queue is not there or not in the source's layout.
        ScenarioError: a bad SLO or option.  RedisUnavailable: Redis cannot be reached.
    """
    t0, cpu0 = time.monotonic(), _cpu()
    slos = parse_slos(slo)  # bad SLOs and windows fail before any read
    seconds = parse_window(window)
    if source not in SOURCES:
        raise ScenarioError(f"--from must be qsim or bullmq, got {source!r}")
    names = [queues] if isinstance(queues, str) else list(queues)
    read = from_redis if source == "qsim" else from_bullmq
    extra: dict[str, Any] = {"group": group} if source == "qsim" else {}
    try:
        cal = read(url, names, prefix=prefix or ("qsim" if source == "qsim" else "bull"), since=f"{seconds:.6f}s",
                   max_jobs=max_jobs, min_jobs=min_jobs, name="advised", **extra)
    except CalibrationError as e:
        text = str(e)
        where = f"queue{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}"
        if text.startswith("no jobs"):
            raise NoJobsInWindow(f"no jobs in {where} in the last {window} (--window): nothing to advise from") \
                from None
        if text.startswith("too few jobs"):
            raise NoJobsInWindow(f"{where}, last {window}: {text.replace('widen --since/--until', 'widen --window')}") \
                from None
        raise
    advice = advise_from(cal, slos, queues=names, window=window, progress=progress, **options)
    return dataclasses.replace(advice, seconds=time.monotonic() - t0, cpu_seconds=_cpu() - cpu0)
