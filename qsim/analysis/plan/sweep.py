"""Parameter sweeps over the model, on every core.

A parameter is named by a dotted path into the scenario::

    pools.craftsmen.concurrency     pools.<name>.<field>
    queues.orders.concurrency_limit queues.<name>.<field>
    jobs.cut.arrival.rate           jobs.<name>.<field>[.<field>]
    autoscalers.craftsmen.target    autoscalers.<pool>.<field> (a pool's autoscaler)
    duration                        a top-level field

:func:`with_params` returns a new scenario with those values (validated by
the scenario's own rules); :func:`sweep` simulates every combination in a
process pool and returns one row per point.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from qsim.analysis.plan.runner import RunResult, Runner, Task, make_runner
from qsim.analysis.stats import mean_summary
from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario

__all__ = ["with_params", "check_rules", "param_value", "grid", "sweep", "parse_values", "replication_seeds", "run_points"]

_COLLECTIONS = {"pools", "queues", "jobs", "autoscalers"}
#: The field that names an item of each collection (autoscalers are named by their pool).
_NAMED_BY = {"autoscalers": "pool"}
_INTEGER_FIELDS = {"workers", "concurrency", "concurrency_limit", "attempts", "max", "count", "size", "seed",
                   "max_stalled", "priority"}


def _replace(obj: Any, fields: Sequence[str], value: Any, path: str) -> Any:
    name = fields[0]
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type) or name not in {f.name for f in dataclasses.fields(obj)}:
        raise ScenarioError(f"--vary {path}: {type(obj).__name__} has no field {name!r}")
    if len(fields) == 1:
        current = getattr(obj, name)
        if name in _INTEGER_FIELDS or isinstance(current, int) and not isinstance(current, bool):
            if not float(value).is_integer():
                raise ScenarioError(f"--vary {path} must be a whole number, got {value!r}")
            value = int(value)
        elif isinstance(current, float):
            value = float(value)
        try:
            return dataclasses.replace(obj, **{name: value})
        except ValueError as e:  # a dataclass's own check (an autoscaler's parameters)
            raise ScenarioError(f"--vary {path}: {e}") from None
    return dataclasses.replace(obj, **{name: _replace(getattr(obj, name), fields[1:], value, path)})


def with_params(scenario: Scenario, params: Mapping[str, Any]) -> Scenario:
    """A copy of ``scenario`` with each dotted path set to its value."""
    for path, value in params.items():
        parts = path.split(".")
        if parts[0] in _COLLECTIONS:
            if len(parts) < 3:
                raise ScenarioError(f"--vary {path}: expected {parts[0]}.<name>.<field>")
            items = getattr(scenario, parts[0])
            key = _NAMED_BY.get(parts[0], "name")
            names = [getattr(item, key) for item in items]
            if parts[1] not in names:
                raise ScenarioError(f"--vary {path}: no {parts[0][:-1]} named {parts[1]!r} "
                                    f"(defined: {', '.join(names) or 'none'})")
            new = tuple(_replace(it, parts[2:], value, path) if getattr(it, key) == parts[1] else it for it in items)
            changes: dict[str, Any] = {parts[0]: new}
            scenario = dataclasses.replace(scenario, **changes)
        else:
            scenario = _replace(scenario, parts, value, path)
    check_rules(scenario, params)
    _check_values(scenario, params)
    return scenario


def param_value(scenario: Scenario, path: str) -> Any:
    """The value at a dotted path of ``scenario`` (as :func:`with_params` names them)."""
    parts = path.split(".")
    obj: Any = scenario
    if parts[0] in _COLLECTIONS:
        if len(parts) < 3:
            raise ScenarioError(f"{path}: expected {parts[0]}.<name>.<field>")
        items = {getattr(item, _NAMED_BY.get(parts[0], "name")): item for item in getattr(scenario, parts[0])}
        if parts[1] not in items:
            raise ScenarioError(f"{path}: no {parts[0][:-1]} named {parts[1]!r} (defined: {', '.join(items)})")
        obj, parts = items[parts[1]], parts[2:]
    for name in parts:
        if not dataclasses.is_dataclass(obj) or isinstance(obj, type) or name not in {f.name for f in dataclasses.fields(obj)}:
            raise ScenarioError(f"{path}: {type(obj).__name__} has no field {name!r}")
        obj = getattr(obj, name)
    return obj


def _check_values(scenario: Scenario, params: Mapping[str, Any]) -> None:
    for path, value in params.items():
        field = path.rsplit(".", 1)[-1]
        low = 1 if field in {"concurrency", "concurrency_limit", "attempts", "max"} else 0
        if isinstance(value, (int, float)) and (not math.isfinite(value) or value < low):
            raise ScenarioError(f"--vary {path} must be >= {low}, got {value!r}")


def check_rules(scenario: Scenario, params: Mapping[str, Any]) -> None:
    """Hold the varied scenario to every rule its TOML is held to (``rate > 0``, ``fail_prob <= 1``,
    ``warmup < duration``, ...): it is written out and read back as a file would be (a fraction of a ms), its
    file-backed distributions as stand-ins (:func:`_without_files`)."""
    try:
        Scenario.from_dict(_without_files(scenario.to_dict()))
    except ScenarioError as e:
        shown = " ".join(f"{path}={value!r}" for path, value in params.items())
        raise ScenarioError(f"--vary {shown}: {str(e).removeprefix('scenario: ')}") from None


#: Stand-ins for the distributions whose values a file holds: the rules are checked without reading it again (a
#: scenario built in memory, as ``qsim advise`` builds one, names a file that need not exist).
_READ_FROM_FILES = {"empirical": {"kind": "constant", "mean": 1.0}, "trace": {"kind": "poisson", "rate": 1.0}}


def _without_files(x: Any) -> Any:
    """``x`` (a scenario's dict) with each file-backed distribution replaced by a stand-in of its role."""
    if isinstance(x, dict):
        if x.get("kind") in _READ_FROM_FILES and "path" in x:
            return dict(_READ_FROM_FILES[x["kind"]])
        return {k: _without_files(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_without_files(v) for v in x]
    return x


def _number(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def parse_values(text: str) -> list[float | int]:
    """``1:64`` (every integer), ``1:64:4`` (a step), ``0.5:2:0.5`` or ``1,2,4,8``."""
    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if len(parts) not in (2, 3):
                raise ValueError
            lo, hi = parts[0], parts[1]
            step = parts[2] if len(parts) == 3 else 1.0
            if step <= 0 or hi < lo:
                raise ValueError
            n = int(math.floor((hi - lo) / step + 1e-9)) + 1
            return [_number(round(lo + k * step, 12)) for k in range(n)]
        values = [_number(float(p)) for p in text.split(",") if p.strip()]
        if not values:
            raise ValueError
        return values
    except ValueError:
        raise ScenarioError(f"values must look like 1:64, 1:64:4 or 1,2,4 (low <= high, step > 0), "
                            f"got {text!r}") from None


def grid(vary: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, in lexicographic order of the paths as given."""
    paths = list(vary)
    return [dict(zip(paths, combo)) for combo in itertools.product(*(vary[p] for p in paths))]


def replication_seeds(seed: int, replications: int, *, start: int = 0) -> list[int]:
    """The seeds of replications ``start .. start+replications-1``: replication ``r`` runs with ``seed + r``.

    Every point of a sweep uses the same seeds (common random numbers): replication
    ``r`` of one point sees the same arrivals and service draws as replication ``r`` of
    any other, so differences between points are differences of the setting, not luck.
    The model keys its random streams by (seed, job type, purpose) through NumPy's
    ``SeedSequence``, so consecutive seeds give independent streams.
    """
    return [seed + r for r in range(start, start + replications)]


def run_points(runner: Runner, scenario: Scenario, points: Sequence[Mapping[str, Any]], seeds: Sequence[int], *,
               max_jobs: int | None = None, first_part: bool = False,
               done: Callable[[int], None] | None = None,
               recommend: Mapping[str, Any] | None = None) -> list[list[RunResult]]:
    """Run every point with every seed on ``runner``; ``[point][seed]`` results.

    Only the point's scenario (its values set), a seed and the ``qsim`` autoscalers'
    recommendation functions (``recommend``) travel to the runner.
    """
    tasks = [Task(with_params(scenario, params), seed, max_jobs, first_part, recommend)
             for params in points for seed in seeds]
    flat = runner.map(tasks, done)
    k = len(seeds)
    return [flat[i * k:(i + 1) * k] for i in range(len(points))]


def sweep(scenario: Scenario, vary: Mapping[str, Sequence[Any]], *, seed: int | None = None,
          max_jobs: int | None = None, processes: int | None = None, replications: int = 1, client: Any = None,
          progress: Callable[[float], None] | None = None) -> list[dict[str, Any]]:
    """Simulate every combination of ``vary``; returns ``[{"params", "summary"}]`` in grid order.

    Points run in a process pool of ``processes`` workers (default: every core);
    ``processes=1`` runs them here, one after the other; with a Dask ``client``
    (``distributed.Client``) they run on its cluster instead (only the scenario and
    a seed travel, only the Summary comes back). Each point runs with
    ``records=False`` (see :func:`qsim.model.simulate`): its p50/p95/p99 are within
    :data:`qsim.results.summary.STREAM_REL_ERROR` of a recorded run's.

    With ``replications=R > 1`` each point runs with seeds ``seed .. seed+R-1`` (the
    same at every point, see :func:`replication_seeds`); ``summary`` is then the mean
    run (:func:`~qsim.analysis.stats.mean_summary`) and ``runs`` the R Summaries.
    """
    if replications < 1:
        raise ValueError(f"replications must be >= 1, got {replications}")
    points = grid(vary)
    for params in points:  # refuse bad paths before starting any process
        with_params(scenario, params)
    seeds = replication_seeds(scenario.seed if seed is None else seed, replications)
    total = len(points) * len(seeds)

    def done(k: int) -> None:
        if progress:
            progress(k / total)

    with make_runner(processes=min(processes or os.cpu_count() or 1, total), client=client) as runner:
        results = run_points(runner, scenario, points, seeds, max_jobs=max_jobs, done=done)
    rows: list[dict[str, Any]] = []
    for params, runs in zip(points, results):
        summaries = [r["summary"] for r in runs]
        row: dict[str, Any] = {"params": params, "summary": summaries[0] if len(runs) == 1 else mean_summary(summaries)}
        if len(runs) > 1:
            row["runs"] = summaries
        rows.append(row)
    return rows
