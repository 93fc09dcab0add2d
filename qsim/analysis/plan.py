"""Capacity planning: the smallest setting that meets a service-level objective.

An SLO is ``<metric><op><number>``, e.g. ``p95_wait<=2``. Metrics name Summary
fields: ``mean_wait``, ``p50_wait``, ``p95_wait``, ``p99_wait``, ``max_wait``,
the same for ``latency``, ``throughput``, ``utilization``, ``dead`` and
``lost``; per job type ``p95_wait[cut]``. Operators: ``<=``, ``<``, ``>=``, ``>``.

:func:`plan` sweeps the model over the given values (every core) and
recommends the first point, in ascending order of the varied values (the
first path varies slowest), that meets every SLO: with one varied parameter,
the smallest value that does. A point whose wait or latency is undefined
(nothing completed) does not meet a wait or latency SLO.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qsim.analysis.sweep import sweep
from qsim.errors import ScenarioError
from qsim.scenario import Scenario

__all__ = ["SLO", "parse_slo", "plan"]

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, "<": operator.lt, ">=": operator.ge,
                                                   ">": operator.gt}
_SLO = re.compile(r"^\s*(?P<metric>[a-z0-9_]+)(?:\[(?P<type>[^\]]+)\])?\s*(?P<op><=|>=|<|>)\s*(?P<value>\S+)\s*$")
_STATS = ("mean", "p50", "p95", "p99", "max")


@dataclass(frozen=True)
class SLO:
    """One objective: ``metric`` (optionally of one job type) compared with ``value``."""

    metric: str
    op: str
    value: float
    job_type: str | None = None

    def measure(self, summary: Mapping[str, Any]) -> float | None:
        """The metric's value in a Summary (None when undefined)."""
        if self.metric in ("throughput", "utilization"):
            return float(summary[self.metric])
        if self.metric in ("dead", "lost"):
            return float(summary["jobs"][self.metric])
        stat, field = self.metric.split("_", 1)
        scope = summary["by_type"].get(self.job_type, {}) if self.job_type else summary
        value = scope.get(field, {}).get(stat)
        return None if value is None else float(value)

    def met(self, summary: Mapping[str, Any]) -> bool:
        value = self.measure(summary)
        return value is not None and _OPS[self.op](value, self.value)

    def __str__(self) -> str:
        scope = f"[{self.job_type}]" if self.job_type else ""
        return f"{self.metric}{scope}{self.op}{self.value:g}"


def parse_slo(text: str) -> SLO:
    """Parse ``p95_wait<=2`` (see the module docstring for the metrics)."""
    m = _SLO.match(text)
    metrics = [f"{s}_{f}" for f in ("wait", "latency") for s in _STATS] + ["throughput", "utilization", "dead", "lost"]
    if not m:
        raise ScenarioError(f"--slo must look like p95_wait<=2, got {text!r}")
    if m["metric"] not in metrics:
        raise ScenarioError(f"--slo metric must be one of {', '.join(metrics)}, got {m['metric']!r}")
    if m["type"] and m["metric"] in ("throughput", "utilization", "dead", "lost"):
        raise ScenarioError(f"--slo {m['metric']} has no per-type value: {text!r}")
    try:
        value = float(m["value"])
    except ValueError:
        raise ScenarioError(f"--slo value must be a number, got {m['value']!r}") from None
    return SLO(metric=m["metric"], op=m["op"], value=value, job_type=m["type"])


def plan(scenario: Scenario, slos: Sequence[SLO], vary: Mapping[str, Sequence[Any]], *, seed: int | None = None,
         max_jobs: int | None = None, processes: int | None = None,
         progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Sweep ``vary`` and recommend the first point meeting every SLO.

    Returns ``{"slo": [...], "points": [{"params", "summary", "meets_slo"}], "recommended": params | None}``.
    """
    if not slos:
        raise ScenarioError("plan needs at least one --slo")
    names = {j.name for j in scenario.jobs}
    for slo in slos:
        if slo.job_type and slo.job_type not in names:
            raise ScenarioError(f"--slo {slo}: no job type {slo.job_type!r} (defined: {', '.join(sorted(names))})")
    points = sweep(scenario, vary, seed=seed, max_jobs=max_jobs, processes=processes, progress=progress)
    for p in points:
        p["meets_slo"] = all(slo.met(p["summary"]) for slo in slos)
    ordered = sorted(points, key=lambda p: tuple(p["params"][k] for k in vary))
    best = next((p["params"] for p in ordered if p["meets_slo"]), None)
    return {"slo": [str(s) for s in slos], "points": points, "recommended": best}
