"""``qsim autoscale``'s answer: policies compared, the static peak, and a policy tuned for least worker-hours.

:func:`autoscale` runs each policy (:mod:`qsim.analysis.autoscale` defines the
figures) and the static peak with the same replications, and with ``tune``
searches one policy's parameters (:func:`tune`): every point of a grid
(:func:`default_grid`, or one given as dotted paths ``autoscalers.POOL.FIELD``
like ``qsim plan --vary``) runs ``replications`` times on the runner (local
processes or Dask), and the point with the least mean worker-seconds among
those whose mean attainment meets the SLO wins (ties: the first in grid order).

The JSON document::

    {"slo": "p95_wait<=2 in 95% of windows", "pool": "p", "replications": 3, "seed": 0,
     "policies": {NAME: {"params": {...}, "worker_seconds", "worker_hours", "attainment", "flaps",
                         "scale_events", "cut_jobs", "recover_seconds", "p95_wait", "mean_workers",
                         "max_workers", "meets_slo", "ci": {...}, "replications", "lost"}},
     "static_peak": {"workers", "worker_seconds", "attainment", ...},
     "tuned": {"policy", "params", "figures": {...}, "points": [...], "grid": {...}} | null,
     "best": NAME | null}

``best`` is the policy (tuned included, as ``NAME-tuned``) meeting the SLO
at the least mean worker-seconds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from qsim.analysis.autoscale import (
    autoscaled_pool,
    run_metrics,
    run_scenarios,
    static_peak,
    summarize_runs,
    with_policy,
)
from qsim.analysis.plan import SLO, parse_slo
from qsim.analysis.runner import make_runner
from qsim.analysis.sweep import grid, replication_seeds, with_params
from qsim.errors import ScenarioError
from qsim.scenario import Scenario
from qsim.scenario_autoscale import AUTOSCALE_POLICIES

__all__ = ["autoscale", "tune", "default_grid", "policy_table"]


def policy_table(scenario: Scenario, pool: str) -> dict[str, Any]:
    """The pool's autoscaler as TOML keys (its policy and every parameter, defaults filled in)."""
    spec = scenario.autoscaler(pool)
    if spec is None:
        return {}
    full = dataclasses.replace(spec, **spec.filled())
    table = dataclasses.replace(scenario, autoscalers=(full,)).to_dict()["autoscalers"]
    return dict(table[0])


def default_grid(policy: str, scenario: Scenario, pool: str, slo: SLO) -> dict[str, list[Any]]:
    """The parameters ``--tune`` searches for each policy, around the SLO-derived values.

    ``hpa``: ``target`` x 1/4 .. 4 (five values) and ``scale_down_stabilization`` 60 | 300 s;
    ``step``: ``up_when`` x 1/4, 1/2, 1 of the SLO, ``down_delay`` 60 | 300 | 900 s, ``step`` 1 | 3;
    ``target-tracking``: ``acceptable_latency`` x 1/4 .. 2 of the SLO, ``scale_in_cooldown`` 60 | 300 | 900 s;
    ``qsim``: the advice ``window`` 300 | 900 s and ``scale_down_stabilization`` 120 | 600 s.
    """
    spec = with_policy(scenario, pool, policy, slo).autoscaler(pool)
    assert spec is not None
    p = spec.params()
    x = slo.value
    at = f"autoscalers.{pool}."
    if policy == "hpa":
        t = float(p["target"])
        return {at + "target": sorted({max(0.5, round(t * f, 3)) for f in (0.25, 0.5, 1, 2, 4)}),
                at + "scale_down_stabilization": [60.0, 300.0]}
    if policy == "step":
        return {at + "up_when": [x / 4, x / 2, x], at + "down_when": [x / 10], at + "down_delay": [60.0, 300.0, 900.0],
                at + "step": [1, 3]}
    if policy == "target-tracking":
        return {at + "acceptable_latency": [x / 4, x / 2, x, 2 * x], at + "scale_in_cooldown": [60.0, 300.0, 900.0]}
    return {at + "window": [300.0, 900.0], at + "scale_down_stabilization": [120.0, 600.0]}


def _check_grid(vary: Mapping[str, Sequence[Any]], pool: str) -> None:
    for path in vary:
        if not path.startswith(f"autoscalers.{pool}.") and not path.startswith("pools."):
            raise ScenarioError(f"--tune grid: {path} is not a parameter of the autoscaler of pool {pool!r} "
                                f"(autoscalers.{pool}.FIELD)")


def tune(scenario: Scenario, slo: SLO, policy: str, runner: Any, seeds: Sequence[int], *, pool: str,
         vary: Mapping[str, Sequence[Any]] | None = None,
         done: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The grid point of ``policy`` with the least mean worker-seconds meeting the SLO (see the module docstring)."""
    base = with_policy(scenario, pool, policy, slo)
    vary = dict(vary or default_grid(policy, scenario, pool, slo))
    _check_grid(vary, pool)
    points = grid(vary)
    scenarios = []
    for params in points:
        scenarios.append(with_params(base, params))
    results = run_scenarios(runner, scenarios, seeds, done=done)
    rows = []
    for params, s, summaries in zip(points, scenarios, results):
        figures = summarize_runs([run_metrics(x, pool, slo, duration=s.duration) for x in summaries], slo)
        rows.append({"params": dict(params), **{k: figures[k] for k in ("worker_seconds", "worker_hours",
                                                                         "attainment", "flaps", "cut_jobs",
                                                                         "meets_slo")},
                     "figures": figures, "scenario": s})
    ok = [r for r in rows if r["meets_slo"]]
    best = min(ok, key=lambda r: r["worker_seconds"]) if ok else None
    out: dict[str, Any] = {"policy": policy, "grid": {k: list(v) for k, v in vary.items()},
                           "points": [{k: v for k, v in r.items() if k not in ("figures", "scenario")} for r in rows],
                           "params": None, "figures": None, "scenario": None}
    if best is not None:
        out.update(params=policy_table(best["scenario"], pool), figures=best["figures"], scenario=best["scenario"],
                   point=best["params"])
    return out


def autoscale(scenario: Scenario, slo: str | SLO, *, policies: Sequence[str] | None = None,
              tune_policy: str | None = None, vary: Mapping[str, Sequence[Any]] | None = None,
              replications: int = 3, seed: int | None = None, pool: str | None = None,
              static: bool = True, processes: int | None = None, client: Any = None,
              progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Compare autoscaling policies on ``scenario`` (see the module docstring for the document).

    Args:
        slo: ``"p95_wait<=2 in 95% of windows"`` (or a parsed :class:`~qsim.analysis.plan.SLO`).
        policies: the policies to run (default: the pool's autoscaler, else all four).
        tune_policy: also search this policy's parameters (``vary``: the grid, default :func:`default_grid`).
        replications: runs per policy (seeds ``seed .. seed + R - 1``, the same for every policy).
        pool: the autoscaled pool (default: :func:`~qsim.analysis.autoscale.autoscaled_pool`).
        static: also find the static peak sizing.
        processes, client: where the runs go (:func:`qsim.analysis.runner.make_runner`).
    """
    started = time.monotonic()
    wslo = parse_slo(slo) if isinstance(slo, str) else slo
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ScenarioError(f"--replications must be a whole number >= 1, got {replications!r}")
    name = autoscaled_pool(scenario, pool)
    own = scenario.autoscaler(name)
    chosen = list(policies) if policies else ([own.policy] if own is not None else list(AUTOSCALE_POLICIES))
    for p in chosen + ([tune_policy] if tune_policy else []):
        if p not in AUTOSCALE_POLICIES:
            raise ScenarioError(f"--policy must be one of {', '.join(AUTOSCALE_POLICIES)}, got {p!r}")
    if tune_policy is None and vary:
        raise ScenarioError("a grid (vary) needs --tune POLICY")
    if tune_policy is not None and vary:  # a bad grid fails before anything runs
        _check_grid(vary, name)
        base = with_policy(scenario, name, tune_policy, wslo)
        for params in grid(vary):
            with_params(base, params)
    seeds = replication_seeds(scenario.seed if seed is None else seed, replications)
    variants = [with_policy(scenario, name, p, wslo) for p in chosen]
    total = len(variants) * len(seeds)

    def done(k: int) -> None:
        if progress:
            progress(min(k / max(total, 1), 0.99))

    doc: dict[str, Any] = {"slo": str(wslo), "pool": name, "replications": replications, "seed": seeds[0],
                           "policies": {}, "static_peak": None, "tuned": None, "best": None}
    with make_runner(processes=processes, client=client) as runner:
        results = run_scenarios(runner, variants, seeds, done=done)
        for p, s, summaries in zip(chosen, variants, results):
            figures = summarize_runs([run_metrics(x, name, wslo, duration=s.duration) for x in summaries], wslo)
            doc["policies"][p] = {"params": policy_table(s, name), **figures}
        if static:
            doc["static_peak"] = static_peak(scenario, name, wslo, runner, seeds)
        if tune_policy:
            tuned = tune(scenario, wslo, tune_policy, runner, seeds, pool=name, vary=vary)
            tuned.pop("scenario", None)
            doc["tuned"] = tuned
    candidates = {p: f for p, f in doc["policies"].items() if f["meets_slo"]}
    if doc["tuned"] and doc["tuned"]["figures"] is not None:
        candidates[f"{tune_policy}-tuned"] = doc["tuned"]["figures"]
    doc["best"] = min(candidates, key=lambda p: candidates[p]["worker_seconds"]) if candidates else None
    doc["seconds"] = round(time.monotonic() - started, 3)
    if progress:
        progress(1.0)
    return doc
