"""``qsim autoscale``'s answer: policies compared, the static peak, and policies tuned for least worker-hours.

:func:`autoscale` runs each policy (:mod:`qsim.analysis.autoscaling.runs` defines the
figures) and the static peak with the same replications (the **training seeds**
``seed .. seed + R - 1``), and with ``tune_policy`` (a policy, or ``"all"``)
searches each tuned policy's parameters (:func:`tune`): its search space
(:mod:`qsim.analysis.autoscaling.search`, or a grid given as dotted paths
``autoscalers.POOL.FIELD`` like ``qsim plan --vary``) by successive halving on
the training seeds, on the runner (local processes or Dask); the point with the
least mean worker-seconds among those whose mean SLO value meets the SLO wins.
The winner and the policy as configured then run on the **held-out seeds**:
``seed + 1,000,000 + r`` for ``r`` in ``0 .. held_out - 1`` (``held_out``
defaults to R), disjoint from the training seeds and the same for every policy.

The JSON document::

    {"slo": "p95_wait<=2 in 95% of windows", "pool": "p", "replications": 3, "seed": 0,
     "policies": {NAME: {"params": {...}, "worker_seconds", "worker_hours", "attainment", "flaps",
                         "scale_events", "cut_jobs", "recover_seconds", "p95_wait", "mean_workers",
                         "max_workers", "meets_slo", "ci": {...}, "replications", "lost",
                         "elasticity": {"under_accuracy", "over_accuracy", "under_timeshare",
                                        "over_timeshare", "instability"},
                         "cost" (with cost_per_worker_hour),
                         "tuned": {"params", "point", "train": {figures}, "held_out": {figures},
                                   "configured_held_out": {figures}, "seeds": {"train", "held_out"},
                                   "points": [...], "grid": {...}, "runs"} (tuned policies)}},
     "static_peak": {"workers", "worker_seconds", "attainment", ...},
     "tuned": {"policy", "params", "figures": {...}, "points": [...], "grid": {...}, ...} | null,
     "best": NAME | null, "tied": [NAME, ...], "held_out_seeds": [...] | null,
     "redis": {"cpu_per_job_us", "utilization", "throughput", "workers", "ceiling", "above_ceiling", "source"} | null,
     "warnings": [...]}   (warnings only when the answer's Redis load is above the ceiling)

Each policy's figures carry ``redis`` too: the Redis load at its most workers and the peak rate.

``best`` is the policy meeting the SLO at the least mean worker-seconds; a tuned
policy competes as ``NAME-tuned`` and is judged, as is ``NAME`` as configured,
on the held-out seeds (untuned policies on the training seeds). Costs within
``tie`` (relative, default 1%) of the least are **ties**: ``tied`` lists every
policy at the least cost and ``best`` is null when there are several.
``tuned`` is the tuned policy's entry when one policy is tuned (``--tune NAME``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from qsim.analysis.autoscaling.baseline import static_peak
from qsim.analysis.autoscaling.runs import (
    Flaps,
    autoscaled_pool,
    run_metrics,
    run_scenarios,
    summarize_runs,
    with_policy,
)
from qsim.analysis.plan.redis_load import attach, peak_rate, summary_load
from qsim.analysis.autoscaling.search import DEFAULT_BUDGET, apply_point, halving, planned_runs, search_space
from qsim.analysis.plan.runner import make_runner
from qsim.analysis.plan.sweep import grid, replication_seeds, with_params
from qsim.analysis.slo.language import SLO, parse_slo
from qsim.autoscale.build import Advisors
from qsim.errors import ScenarioError
from qsim.analysis.stats import mean_summary
from qsim.spec.autoscaler import AUTOSCALE_POLICIES
from qsim.spec.redis_cost import DEFAULT_CEILING, RedisCost, RedisLoad, check_ceiling, redis_cost
from qsim.spec.scenario import Scenario

__all__ = ["autoscale", "tune", "default_grid", "policy_table", "held_out_seeds", "AutoscaleResult",
           "HELD_OUT_OFFSET", "DEFAULT_TIE"]

#: Held-out replication r runs with seed + HELD_OUT_OFFSET + r.
HELD_OUT_OFFSET = 1_000_000
#: Costs within this share of the least are a tie.
DEFAULT_TIE = 0.01


def _redis_part(doc: dict[str, Any], scenario: Scenario, pool: str, summaries: Sequence[Mapping[str, Any]],
                cost: RedisCost, ceiling: float, candidates: Mapping[str, Mapping[str, Any]]) -> None:
    """Each policy's Redis load at its peak (its most workers of ``pool`` beside the other pools' workers, at the
    busiest window's rate), and the answer's (the best policy, else the static peak) as the document's ``redis``."""
    if not summaries:
        attach(doc, None, "")
        return
    typical = mean_summary(list(summaries))  # attempts per job and time in the handler: the workload's
    busiest = peak_rate(scenario)
    rate = float(typical.get("throughput") or 0.0) if busiest is None else busiest
    others = sum(p.workers for p in scenario.pools if p.name != pool)

    def at(workers: float) -> RedisLoad:
        return summary_load(scenario, typical, cost=cost, ceiling=ceiling, workers=others + math.ceil(workers),
                            throughput=rate)

    for f in doc["policies"].values():
        f["redis"] = at(f["max_workers"]).as_dict()
    best, peak = doc.get("best") or next(iter(doc.get("tied") or []), None), doc.get("static_peak") or {}
    if best is not None:
        attach(doc, at(candidates[best]["max_workers"]), f"policy {best} at its peak")
    elif peak.get("workers") is not None:
        attach(doc, at(peak["workers"]), f"the static peak ({peak['workers']} workers)")
    else:
        attach(doc, None, "")


class AutoscaleResult(dict[str, Any]):
    """``qsim autoscale``'s answer: the JSON document (see the module docstring) as a dict, with typed reads."""

    @property
    def policies(self) -> dict[str, dict[str, Any]]:
        """Each policy's parameters and figures, by policy name."""
        return dict(self["policies"])

    @property
    def static_peak(self) -> dict[str, Any] | None:
        """The least fixed worker count meeting the SLO and its figures (None: not asked for)."""
        peak: dict[str, Any] | None = self["static_peak"]
        return peak

    @property
    def best(self) -> str | None:
        """The policy meeting the SLO at the least mean worker-seconds (``NAME-tuned`` for a tuned one); None
        when none does or several tie (see :attr:`tied`)."""
        name: str | None = self["best"]
        return name

    @property
    def tied(self) -> list[str]:
        """Every policy meeting the SLO at the least mean worker-seconds, ties included."""
        return list(self.get("tied") or [])

    def to_dict(self) -> dict[str, Any]:
        """The document as a plain dict (what ``--json`` prints)."""
        return dict(self)


def policy_table(scenario: Scenario, pool: str) -> dict[str, Any]:
    """The pool's autoscaler as TOML keys (its policy and every parameter, defaults filled in)."""
    spec = scenario.autoscaler(pool)
    if spec is None:
        return {}
    full = dataclasses.replace(spec, **spec.filled())
    table = dataclasses.replace(scenario, autoscalers=(full,)).to_dict()["autoscalers"]
    return dict(table[0])


def default_grid(policy: str, scenario: Scenario, pool: str, slo: SLO) -> dict[str, list[Any]]:
    """The knobs ``--tune`` searches for the policy and their values
    (:func:`qsim.analysis.autoscaling.search.search_space`)."""
    return search_space(policy, scenario, pool, slo)


def held_out_seeds(seed: int, count: int) -> list[int]:
    """The held-out seeds: ``seed + HELD_OUT_OFFSET + r``, disjoint from training seeds ``seed .. seed + R - 1``
    for any R below the offset."""
    return replication_seeds(seed, count, start=HELD_OUT_OFFSET)


def _check_grid(vary: Mapping[str, Sequence[Any]], pool: str) -> None:
    for path in vary:
        if not path.startswith(f"autoscalers.{pool}.") and not path.startswith("pools."):
            raise ScenarioError(f"--tune grid: {path} is not a parameter of the autoscaler of pool {pool!r} "
                                f"(autoscalers.{pool}.FIELD)")


def tune(scenario: Scenario, slo: SLO, policy: str, runner: Any, seeds: Sequence[int], *, pool: str,
         vary: Mapping[str, Sequence[Any]] | None = None, advisors: Advisors | None = None,
         done: Callable[[int], None] | None = None, held_out: Sequence[int] = (),
         budget: int = DEFAULT_BUDGET, flaps: Flaps | None = None) -> dict[str, Any]:
    """The point of ``policy``'s space (or of ``vary``) with the least mean worker-seconds meeting the SLO on
    the training ``seeds``, and it and the policy as configured on the ``held_out`` seeds (see the module
    docstring)."""
    if set(seeds) & set(held_out):
        raise ScenarioError(f"held-out seeds must differ from the training seeds, both have "
                            f"{sorted(set(seeds) & set(held_out))}")
    base = with_policy(scenario, pool, policy, slo)
    vary = dict(vary or default_grid(policy, scenario, pool, slo))
    _check_grid(vary, pool)
    count = [0]

    def evaluate(scenarios: Sequence[Scenario], some: Sequence[int]) -> list[list[dict[str, Any]]]:
        before = count[0]
        results = run_scenarios(runner, scenarios, some, advisors=advisors,
                                done=(lambda k: done(before + k)) if done else None)
        count[0] += len(scenarios) * len(some)
        return [[run_metrics(x, pool, slo, duration=s.duration, scenario=s, flaps=flaps) for x in summaries]
                for s, summaries in zip(scenarios, results)]

    tried = halving(base, vary, slo, seeds, evaluate, budget=budget, rng_seed=seeds[0] if seeds else 0)
    full = [t for t in tried if t["seeds"] == len(seeds)]
    best = next((t for t in full if t["figures"]["meets_slo"]), None)
    configured = next(t for t in tried if t["configured"])
    points = [{"params": dict(t["params"]), "configured": t["configured"], "seeds": t["seeds"],
               **{k: t["figures"][k] for k in ("worker_seconds", "worker_hours", "attainment", "flaps", "cut_jobs",
                                               "meets_slo")}} for t in tried]
    out: dict[str, Any] = {"policy": policy, "grid": {k: list(v) for k, v in vary.items()}, "points": points,
                           "params": None, "point": None, "figures": None, "train": None, "held_out": None,
                           "configured_held_out": None, "scenario": None,
                           "seeds": {"train": list(seeds), "held_out": list(held_out)}}
    if held_out:
        judged = [configured["scenario"]] + ([best["scenario"]] if best is not None else [])
        figures = evaluate(judged, held_out)
        out["configured_held_out"] = summarize_runs(figures[0], slo)
        if best is not None:
            out["held_out"] = summarize_runs(figures[1], slo)
    if best is not None:
        out.update(params=policy_table(best["scenario"], pool), figures=best["figures"], train=best["figures"],
                   scenario=best["scenario"], point=dict(best["params"]))
    out["runs"] = count[0]
    return out


def _price(figures: dict[str, Any] | None, price: float | None) -> None:
    if figures is not None and price is not None and figures.get("worker_hours") is not None:
        figures["cost"] = figures["worker_hours"] * price


def _ties(candidates: Mapping[str, Mapping[str, Any]], tie: float) -> list[str]:
    """Every candidate whose mean worker-seconds is within ``tie`` (relative) of the least."""
    if not candidates:
        return []
    least = min(float(f["worker_seconds"]) for f in candidates.values())
    return sorted(p for p, f in candidates.items() if float(f["worker_seconds"]) <= least * (1 + tie) + 1e-9)


def _check_numbers(*, replications: int, held_out: int | None, cost_per_worker_hour: float | None,
                   tie: float) -> None:
    """Raise :class:`ScenarioError` for a count of runs, a price or a tie share out of range."""
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ScenarioError(f"--replications must be a whole number >= 1, got {replications!r}")
    if held_out is not None and (isinstance(held_out, bool) or not isinstance(held_out, int) or held_out < 1
                                 or held_out >= HELD_OUT_OFFSET):
        raise ScenarioError(f"--held-out must be a whole number of runs >= 1, got {held_out!r}")
    if replications >= HELD_OUT_OFFSET:
        raise ScenarioError(f"--replications must be below {HELD_OUT_OFFSET} (the held-out seeds start there), "
                            f"got {replications}")
    if cost_per_worker_hour is not None and not (cost_per_worker_hour >= 0 and cost_per_worker_hour < float("inf")):
        raise ScenarioError(f"--cost-per-worker-hour must be a number >= 0, got {cost_per_worker_hour!r}")
    if not tie >= 0:
        raise ScenarioError(f"--tie must be a share >= 0, got {tie!r}")


def _contestants(scenario: Scenario, name: str, policies: Sequence[str] | None, tune_policy: str | None,
                 vary: Mapping[str, Sequence[Any]] | None) -> tuple[list[str], list[str]]:
    """The policies run (default: the pool's autoscaler's, else all) and those tuned (``tune_policy``, or every
    one run for ``"all"``); a tuned policy also runs as configured.

    Raises:
        ScenarioError: an unknown policy, a grid without one policy to tune.
    """
    own = scenario.autoscaler(name)
    every = tune_policy == "all"
    if policies:
        chosen = list(policies)
    elif every or own is None:
        chosen = list(AUTOSCALE_POLICIES)
    else:
        chosen = [own.policy]
    for p in chosen + ([tune_policy] if tune_policy and not every else []):
        if p not in AUTOSCALE_POLICIES:
            raise ScenarioError(f"--policy must be one of {', '.join(AUTOSCALE_POLICIES)}, got {p!r}")
    if tune_policy is None and vary:
        raise ScenarioError("a grid (vary) needs --tune POLICY")
    if every and vary:
        raise ScenarioError("--vary names one policy's parameters: give --tune POLICY with it, not --tune all")
    tuned_policies = list(chosen) if every else ([tune_policy] if tune_policy else [])
    if tune_policy and not every and tune_policy not in chosen:
        chosen.append(tune_policy)  # the policy as configured runs beside its tuned point
    return chosen, tuned_policies


def _check_grids(scenario: Scenario, name: str, tuned_policies: Sequence[str],
                 vary: Mapping[str, Sequence[Any]] | None, wslo: SLO) -> None:
    """Fail on a bad grid, or a tuned policy without a search space, before anything runs."""
    for p in tuned_policies:
        if vary:
            _check_grid(vary, name)
            base = with_policy(scenario, name, p, wslo)
            for params in grid(vary):
                apply_point(base, params)
        else:
            default_grid(p, scenario, name, wslo)


def _space_sizes(scenario: Scenario, name: str, tuned_policies: Sequence[str],
                 vary: Mapping[str, Sequence[Any]] | None, wslo: SLO) -> list[int]:
    """The points of each tuned policy's grid (``vary``, else its default search space)."""
    return [len(grid(vary)) if vary else math.prod(len(v) for v in default_grid(p, scenario, name, wslo).values())
            for p in tuned_policies]


def _configured(chosen: Sequence[str], variants: Sequence[Scenario], results: Sequence[Sequence[Any]], name: str,
                wslo: SLO, flaps: Flaps) -> dict[str, dict[str, Any]]:
    """Each policy as configured: its parameters and figures over its runs (``results``: the Summaries of
    each variant)."""
    out: dict[str, dict[str, Any]] = {}
    for p, s, summaries in zip(chosen, variants, results):
        figures = summarize_runs([run_metrics(x, name, wslo, duration=s.duration, scenario=s, flaps=flaps)
                                  for x in summaries], wslo)
        out[p] = {"params": policy_table(s, name), **figures}
    return out


def _price_all(doc: dict[str, Any], price: float | None) -> None:
    """Give every figures of the document its ``cost`` at ``price`` per worker-hour (None: no cost)."""
    for f in doc["policies"].values():
        _price(f, price)
        for key in ("train", "held_out", "configured_held_out"):
            _price((f.get("tuned") or {}).get(key), price)
    _price(doc["static_peak"], price)


def _candidates(policies: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The figures that meet the SLO, by name: each policy as configured (held out when it was tuned) and
    ``<policy>-tuned`` for a tuned point that meets it on the held-out seeds."""
    candidates: dict[str, dict[str, Any]] = {}
    for p, f in policies.items():
        t = f.get("tuned")
        mine = t["configured_held_out"] if t is not None and t["configured_held_out"] is not None else f
        if mine["meets_slo"]:
            candidates[p] = mine
        if t is not None and t["held_out"] is not None and t["held_out"]["meets_slo"]:
            candidates[f"{p}-tuned"] = t["held_out"]
    return candidates


def autoscale(scenario: Scenario, slo: str | SLO, *, policies: Sequence[str] | None = None,
              tune_policy: str | None = None, vary: Mapping[str, Sequence[Any]] | None = None,
              replications: int = 3, seed: int | None = None, pool: str | None = None,
              static: bool = True, processes: int | None = None, client: Any = None,
              advisors: Advisors | None = None, held_out: int | None = None, budget: int = DEFAULT_BUDGET,
              cost_per_worker_hour: float | None = None, flap_size: int = 1, flap_window: float | None = None,
              tie: float = DEFAULT_TIE,
              progress: Callable[[float], None] | None = None, redis_ceiling: float = DEFAULT_CEILING,
              redis_cpu_per_job_us: float | None = None) -> AutoscaleResult:
    """Compare autoscaling policies on ``scenario`` (see the module docstring for the document).

    Args:
        slo: ``"p95_wait<=2 in 95% of windows"`` (or a parsed :class:`~qsim.analysis.slo.language.SLO`).
        policies: the policies to run (default: the pool's autoscaler, else all of them; with ``tune_policy``
            ``"all"``: all of them).
        tune_policy: also search this policy's parameters, or ``"all"``: every policy run (``vary``: the grid
            of one policy, default its search space; ``budget``: points drawn for the first rung).
        replications: runs per policy: the training seeds ``seed .. seed + R - 1``, the same for every policy.
        held_out: held-out runs of each tuned point and the policy as configured (default ``replications``).
        pool: the autoscaled pool (default: :func:`~qsim.analysis.autoscaling.runs.autoscaled_pool`).
        static: also find the static peak sizing.
        cost_per_worker_hour: money per worker-hour: every figures gains ``cost``.
        flap_size, flap_window: a flap is a reversal of at least ``flap_size`` workers within ``flap_window`` s
            of the previous scale event (None: the autoscaler's ``flap_window``).
        tie: relative difference of worker-seconds within which policies tie for ``best``.
        processes, client: where the runs go (:func:`qsim.analysis.plan.runner.make_runner`).
        advisors: the recommendation of each autoscaler that scales on it (:func:`qsim.advise.load.advisors`;
            needed for the ``qsim`` policy and an ``hpa`` on ``recommended_workers``).
        redis_ceiling, redis_cpu_per_job_us: how Redis is priced (:mod:`qsim.spec.redis_cost`): each policy
            gets ``redis`` at its peak (its most workers, the busiest window's rate); the document gets the
            best's (else the static peak's) as ``redis``, and ``warnings`` when it is above the ceiling.
    """
    started = time.monotonic()
    check_ceiling(redis_ceiling)
    cost = redis_cost(scenario.engine, cpu_per_job_us=redis_cpu_per_job_us)
    wslo = parse_slo(slo) if isinstance(slo, str) else slo
    _check_numbers(replications=replications, held_out=held_out, cost_per_worker_hour=cost_per_worker_hour, tie=tie)
    flaps = Flaps(window=flap_window, size=flap_size)
    name = autoscaled_pool(scenario, pool)
    chosen, tuned_policies = _contestants(scenario, name, policies, tune_policy, vary)
    _check_grids(scenario, name, tuned_policies, vary, wslo)
    first = scenario.seed if seed is None else seed
    seeds = replication_seeds(first, replications)
    judge = held_out_seeds(first, held_out or replications) if tuned_policies else []
    variants = [with_policy(scenario, name, p, wslo) for p in chosen]
    total = len(variants) * len(seeds) + sum(planned_runs(min(budget, n) + 1, len(seeds)) + 2 * len(judge)
                                             for n in _space_sizes(scenario, name, tuned_policies, vary, wslo))
    finished = [0]

    def done(k: int) -> None:
        if progress:
            progress(min((finished[0] + k) / max(total, 1), 0.99))

    doc: dict[str, Any] = {"slo": str(wslo), "pool": name, "replications": replications, "seed": seeds[0],
                           "policies": {}, "static_peak": None, "tuned": None, "best": None, "tied": [],
                           "held_out_seeds": judge or None, "cost_per_worker_hour": cost_per_worker_hour,
                           "flap_size": flaps.size, "flap_window": flaps.window, "tie": tie}
    with make_runner(processes=processes, client=client) as runner:
        results = run_scenarios(runner, variants, seeds, advisors=advisors, done=done)
        finished[0] = len(variants) * len(seeds)
        doc["policies"] = _configured(chosen, variants, results, name, wslo, flaps)
        if static:
            doc["static_peak"] = static_peak(scenario, name, wslo, runner, seeds, advisors=advisors)
        for p in tuned_policies:
            tuned = tune(scenario, wslo, p, runner, seeds, pool=name, vary=vary, advisors=advisors,
                         held_out=judge, budget=budget, flaps=flaps, done=done)
            finished[0] += tuned["runs"]
            tuned.pop("scenario", None)
            doc["policies"][p]["tuned"] = {k2: v for k2, v in tuned.items() if k2 not in ("policy", "figures")}
            if tune_policy != "all":
                doc["tuned"] = tuned
    _price_all(doc, cost_per_worker_hour)
    candidates = _candidates(doc["policies"])
    doc["tied"] = tied = _ties(candidates, tie)
    doc["best"] = tied[0] if len(tied) == 1 else None
    _redis_part(doc, scenario, name, [x for r in results for x in r], cost, redis_ceiling, candidates)
    doc["seconds"] = round(time.monotonic() - started, 3)
    if progress:
        progress(1.0)
    return AutoscaleResult(doc)
