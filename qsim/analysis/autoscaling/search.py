"""Where ``qsim autoscale --tune`` looks, and how: each policy's search space and a successive-halving search.

**Search spaces** (:data:`SEARCH_SPACES`, one entry per policy: a policy added
later adds its entry and nothing else). Each maps the scenario, the pool and
the SLO (``x``: its number of seconds) to the values of the knobs that decide
the policy's outcome, around the values the SLO gives (``t``: the derived or
configured ``hpa`` target). Every policy also searches ``min`` (1, a quarter
and a half of the workers the peak load needs) — the floor decides a morning
ramp for every policy alike:

- ``hpa``: ``target`` t x 1/4, 1/2, 1, 2; ``scale_down_rate`` (below);
  ``scale_down_stabilization`` 60 | 300 | 600 s; ``tolerance`` 0.1 | 0.3;
- ``step``: ``up_when`` x/4 | x/2 | x, ``down_when`` x/20 | x/8, ``step`` 1 | 2 | 4,
  ``up_delay`` 30 | 60 s, ``down_delay`` 120 | 300 | 600 s;
- ``target-tracking``: ``acceptable_latency`` x/4 | x/2 | x | 2x,
  ``scale_out_cooldown`` 30 | 60 | 120 s, ``scale_in_cooldown`` 60 | 300 | 900 s;
- ``qsim``: the advice ``window`` 60 | 120 | 300 | 600 | 900 s (those no longer
  than the run), ``slo_margin`` 0.5 | 0.75 | 1 (the advice's SLO is the SLO's number
  times the margin), ``scale_down_rate``, ``scale_down_stabilization`` 120 | 300 | 600 s;
- ``schedule``: the floors as written; its reactive trigger (with a ``target``) as ``hpa``'s;
- ``predictive``: ``lead`` the cold start's mean x 0.5 | 1 | 2, ``utilization`` 0.6 | 0.7 | 0.8 | 0.9,
  and its reactive trigger as ``hpa``'s.

Without ``behavior`` (``behavior = false``) an HPA's scale-down is Kubernetes' fixed
rule: ``scale_down_rate`` and ``scale_down_stabilization`` are not searched.

``scale_down_rate`` is the HPA's scale-down policy written ``"N/Ps"`` (at most N
pods per P seconds) or ``"N%/Ps"``: ``100%/15s`` (Kubernetes' default), ``2/60s``,
``1/120s`` (``deploy/kubernetes/keda-scaledobject.yaml``'s). Knobs are named as
``--vary`` names them, ``autoscalers.POOL.KNOB``.

**Search** (:func:`halving`): ``budget`` points drawn at random (seeded) from
the space's grid, plus the policy as configured, run on the first training seed;
the best third (at least one) go on to twice the seeds, and so on until the
survivors have run on every training seed; the policy as configured always goes
on, so the tuned point is never worse than it on the training seeds. A point
ranks by whether the mean of the SLO's per-run value meets the SLO, then by
worker-seconds when it does and by how far it misses when it does not.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from qsim.analysis.autoscaling.runs import summarize_runs, with_policy
from qsim.analysis.plan.profile import peak_load
from qsim.analysis.plan.sweep import check_rules, with_params
from qsim.analysis.slo.language import SLO
from qsim.errors import ScenarioError
from qsim.spec.autoscaler import ScalePolicySpec
from qsim.spec.scenario import Scenario

__all__ = ["SEARCH_SPACES", "Space", "search_space", "apply_point", "scale_rules", "halving", "planned_runs", "rank_key",
           "DEFAULT_BUDGET"]

#: Points drawn from a space's grid for the first rung (the policy as configured comes on top).
DEFAULT_BUDGET = 24

#: A policy's search space: (scenario, pool, SLO, the policy's parameters) -> {knob: values}.
Space = Callable[[Scenario, str, SLO, Mapping[str, Any]], dict[str, list[Any]]]

_WHOLE = {"min", "max", "step"}
_RATES = ["100%/15s", "2/60s", "1/120s"]
_RATE = re.compile(r"^\s*(\d+)\s*(%?)\s*/\s*(\d+(?:\.\d+)?)\s*s?\s*$")


def scale_rules(text: str) -> tuple[ScalePolicySpec, ...]:
    """``"N/Ps"`` (N pods per P s) or ``"N%/Ps"`` as the one HPA scaling policy it names."""
    m = _RATE.match(str(text))
    if not m:
        raise ScenarioError(f"scale_down_rate must read N/Ps or N%/Ps (e.g. 1/120s), got {text!r}")
    return (ScalePolicySpec(type="percent" if m.group(2) else "pods", value=int(m.group(1)),
                            period=float(m.group(3))),)


def _floors(scenario: Scenario, pool: str, low: int, high: int) -> list[int]:
    need = math.ceil(peak_load(scenario, pool) / scenario.pool(pool).concurrency)
    return sorted({min(max(v, low), high) for v in (1, math.ceil(need / 4), math.ceil(need / 2))})


def _scale_down(p: Mapping[str, Any], windows: list[float]) -> dict[str, list[Any]]:
    """The scale-down knobs, where the HPA has ``behavior`` (without it Kubernetes' rules are fixed)."""
    return {} if p.get("behavior") is False else {"scale_down_rate": _RATES, "scale_down_stabilization": windows}


def _hpa(s: Scenario, pool: str, slo: SLO, p: Mapping[str, Any]) -> dict[str, list[Any]]:
    t = float(p["target"])
    return {"target": sorted({max(0.5, round(t * f, 3)) for f in (0.25, 0.5, 1, 2)}),
            **_scale_down(p, [60.0, 300.0, 600.0]), "tolerance": [0.1, 0.3]}


def _schedule(s: Scenario, pool: str, slo: SLO, p: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The floors stay as written; the reactive trigger beside them (if any) is searched as ``hpa``'s."""
    return _hpa(s, pool, slo, p) if p.get("target") is not None else {}


def _predictive(s: Scenario, pool: str, slo: SLO, p: Mapping[str, Any]) -> dict[str, list[Any]]:
    """How far ahead the floors rise (the cold start's mean x 0.5 | 1 | 2) and the utilization they size for
    (lower: a wider margin), with the reactive trigger beside them (if any) as ``hpa``'s."""
    spec = s.autoscaler(pool)
    cold = spec.start_delay.mean if spec is not None and spec.start_delay is not None else 0.0
    lead = sorted({round(cold * f, 3) for f in (0.5, 1.0, 2.0)}) if cold > 0 else [0.0, 30.0, 60.0]
    return {"lead": lead, "utilization": [0.6, 0.7, 0.8, 0.9], **_schedule(s, pool, slo, p)}


def _step(s: Scenario, pool: str, slo: SLO, p: Mapping[str, Any]) -> dict[str, list[Any]]:
    x = slo.value
    return {"up_when": [x / 4, x / 2, x], "down_when": [x / 20, x / 8], "step": [1, 2, 4],
            "up_delay": [30.0, 60.0], "down_delay": [120.0, 300.0, 600.0]}


def _tracking(s: Scenario, pool: str, slo: SLO, p: Mapping[str, Any]) -> dict[str, list[Any]]:
    x = slo.value
    return {"acceptable_latency": [x / 4, x / 2, x, 2 * x], "scale_out_cooldown": [30.0, 60.0, 120.0],
            "scale_in_cooldown": [60.0, 300.0, 900.0]}


def _qsim(s: Scenario, pool: str, slo: SLO, p: Mapping[str, Any]) -> dict[str, list[Any]]:
    windows = [w for w in (60.0, 120.0, 300.0, 600.0, 900.0) if w <= s.duration] or [s.duration]
    return {"window": windows, "slo_margin": [0.5, 0.75, 1.0], **_scale_down(p, [120.0, 300.0, 600.0])}


#: Every policy's search space (see the module docstring), by policy name.
SEARCH_SPACES: dict[str, Space] = {"hpa": _hpa, "step": _step, "target-tracking": _tracking, "qsim": _qsim,
                                   "schedule": _schedule, "predictive": _predictive}


def search_space(policy: str, scenario: Scenario, pool: str, slo: SLO) -> dict[str, list[Any]]:
    """The policy's knobs and their values as ``--vary`` paths (``autoscalers.POOL.KNOB``), ``min`` included."""
    if policy not in SEARCH_SPACES:
        raise ScenarioError(f"--tune {policy}: no search space for this policy (give one with --vary)")
    spec = with_policy(scenario, pool, policy, slo).autoscaler(pool)
    assert spec is not None
    space = {"min": _floors(scenario, pool, spec.min if spec.min == 0 else 1, spec.max),
             **SEARCH_SPACES[policy](scenario, pool, slo, spec.params())}
    return {f"autoscalers.{pool}.{k}": list(v) for k, v in space.items()}


def apply_point(scenario: Scenario, point: Mapping[str, Any]) -> Scenario:
    """``scenario`` with a point's values set: ``--vary`` paths, and the knobs ``scale_down_rate`` (the HPA
    scale-down policy it names) and ``slo_margin`` (the advice's SLO number times it)."""
    plain: dict[str, Any] = {}
    for path, value in point.items():
        head, _, knob = path.rpartition(".")
        if knob == "scale_down_rate":
            plain[f"{head}.scale_down"] = scale_rules(value)
        elif knob == "slo_margin":
            pool = head.split(".", 1)[1]
            spec = scenario.autoscaler(pool)
            m = re.match(r"^\s*([a-z0-9_]+(?:\[[^\]]+\])?)\s*(<=|>=|<|>)\s*([-+0-9.eE]+)\s*$", str(spec and spec.slo))
            if spec is None or m is None:
                raise ScenarioError(f"--vary {path}: the autoscaler of pool {pool!r} has no advice SLO")
            plain[f"{head}.slo"] = f"{m.group(1)}{m.group(2)}{float(m.group(3)) * float(value):g}"
        else:
            plain[path] = value
    together: dict[str, dict[str, Any]] = {}  # an autoscaler's knobs are set at once (down_when < up_when)
    rest: dict[str, Any] = {}
    for path, value in plain.items():
        parts = path.split(".")
        if len(parts) == 3 and parts[0] == "autoscalers":
            together.setdefault(parts[1], {})[parts[2]] = value
        else:
            rest[path] = value
    out = with_params(scenario, rest)
    for pool, knobs in together.items():
        out = _set_autoscaler(out, pool, knobs)
    if together:  # the scenario's rules for the autoscaler's values (target > 0, tolerance >= 0, ...)
        check_rules(out, point)
    return out


def _set_autoscaler(scenario: Scenario, pool: str, knobs: Mapping[str, Any]) -> Scenario:
    where = f"--vary {', '.join(f'autoscalers.{pool}.{k}' for k in knobs)}"
    spec = scenario.autoscaler(pool)
    if spec is None:
        raise ScenarioError(f"{where}: pool {pool!r} has no autoscaler")
    names = {f.name for f in dataclasses.fields(spec)}
    values: dict[str, Any] = {}
    for knob, value in knobs.items():
        if knob not in names:
            raise ScenarioError(f"--vary autoscalers.{pool}.{knob}: an autoscaler has no field {knob!r}")
        if knob in _WHOLE:
            if isinstance(value, bool) or not float(value).is_integer():
                raise ScenarioError(f"--vary autoscalers.{pool}.{knob} must be a whole number, got {value!r}")
            value = int(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        values[knob] = value
    try:
        new = dataclasses.replace(spec, **values)
    except ValueError as e:  # the autoscaler's own check
        raise ScenarioError(f"{where}: {e}") from None
    return dataclasses.replace(scenario, autoscalers=tuple(new if a.pool == pool else a for a in scenario.autoscalers))


def rank_key(figures: Mapping[str, Any], slo: SLO) -> tuple[int, float, float]:
    """Meets the SLO first, by worker-seconds; then by how far the mean SLO value misses it."""
    cost = float(figures["worker_seconds"])
    if figures["meets_slo"]:
        return (0, 0.0, cost)
    value = figures.get("slo_value")
    op, limit = slo.judged
    if value is None:
        return (1, math.inf, cost)
    miss = (limit - value) if op in (">=", ">") else (value - limit)
    return (1, float(miss), cost)


def planned_runs(points: int, seeds: int, *, keep: float = 1 / 3) -> int:
    """At most how many runs :func:`halving` makes for ``points`` points (the configured one included) and
    ``seeds`` training seeds."""
    runs, alive, have, n = 0, points, 0, 1
    while True:
        n = min(n, seeds)
        runs += alive * (n - have)
        have = n
        if n >= seeds:
            return runs
        alive = min(alive, max(1, math.ceil(alive * keep)) + 1)
        n *= 2


Evaluate = Callable[[Sequence[Scenario], Sequence[int]], list[list[dict[str, Any]]]]


def halving(base: Scenario, space: Mapping[str, Sequence[Any]], slo: SLO, seeds: Sequence[int],
            evaluate: Evaluate, *, budget: int = DEFAULT_BUDGET, keep: float = 1 / 3,
            rng_seed: int = 0) -> list[dict[str, Any]]:
    """Successive halving over ``space`` (see the module docstring); ``evaluate(scenarios, seeds)`` gives each
    scenario's per-run figures. Returns every point tried, best first: ``{"params", "figures", "seeds",
    "configured", "scenario"}`` (``figures`` over the seeds it ran on)."""
    if budget < 1:
        raise ScenarioError(f"--tune budget must be >= 1 point, got {budget!r}")
    paths = list(space)
    combos = list(itertools.product(*(space[p] for p in paths)))
    rng = np.random.default_rng(rng_seed)
    picked = sorted(rng.choice(len(combos), size=min(budget, len(combos)), replace=False).tolist())
    points: list[dict[str, Any]] = [{}] + [dict(zip(paths, combos[i])) for i in picked]
    scenarios: list[Scenario | None] = []
    for params in points:
        try:
            scenarios.append(apply_point(base, params))
        except ScenarioError:
            scenarios.append(None)  # a combination the policy refuses (e.g. down_when >= up_when)
    alive = [i for i, s in enumerate(scenarios) if s is not None]
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i in alive}
    n = 1
    while True:
        n = min(n, len(seeds))
        waiting: dict[int, list[int]] = {}
        for i in alive:
            if len(runs[i]) < n:
                waiting.setdefault(len(runs[i]), []).append(i)
        for have, group in waiting.items():
            results = evaluate([scenarios[i] for i in group], seeds[have:n])  # type: ignore[misc]
            for i, r in zip(group, results):
                runs[i].extend(r)
        alive.sort(key=lambda i: (rank_key(summarize_runs(runs[i], slo), slo), i))
        if n >= len(seeds):
            break
        survivors = alive[:max(1, math.ceil(len(alive) * keep))]
        if 0 in alive and 0 not in survivors:
            survivors.append(0)  # the policy as configured always goes on
        alive = survivors
        n *= 2
    order = alive + sorted((i for i in runs if i not in alive),
                           key=lambda i: (-len(runs[i]), rank_key(summarize_runs(runs[i], slo), slo), i))
    return [{"params": points[i], "figures": summarize_runs(runs[i], slo), "seeds": len(runs[i]),
             "configured": i == 0, "scenario": scenarios[i]} for i in order]
