"""Per-run metrics read from a Summary, by name: ``p95_wait``, ``mean_latency[cut]``, ``utilization``.

Names: ``mean``, ``p50``, ``p95``, ``p99``, ``max`` of ``wait`` or ``latency``
(per job type: ``p95_wait[cut]``), ``throughput``, ``utilization``, ``dead``
and ``lost``. An SLO (:mod:`qsim.analysis.plan.planner`) is a metric, an operator and
a number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qsim.errors import ScenarioError

__all__ = ["METRICS", "Metric", "parse_metric"]

_STATS = ("mean", "p50", "p95", "p99", "max")
_GLOBAL = ("throughput", "utilization", "dead", "lost")
#: Every metric name, in the order the docs list them.
METRICS = tuple(f"{s}_{f}" for f in ("wait", "latency") for s in _STATS) + _GLOBAL
_METRIC = re.compile(r"^\s*(?P<metric>[a-z0-9_]+)(?:\[(?P<type>[^\]]+)\])?\s*$")


@dataclass(frozen=True)
class Metric:
    """One figure of a Summary: ``name`` (e.g. ``p95_wait``), of all jobs or of one ``job_type``."""

    name: str
    job_type: str | None = None

    @property
    def key(self) -> str:
        """``p95_wait`` or ``p95_wait[cut]``: the metric's name in JSON and tables."""
        return f"{self.name}[{self.job_type}]" if self.job_type else self.name

    @property
    def quantile(self) -> float | None:
        """0.95 for ``p95_...``; None for a mean, a maximum or a global figure."""
        head = self.name.split("_", 1)[0]
        return int(head[1:]) / 100.0 if head.startswith("p") and head[1:].isdigit() else None

    @property
    def bounds(self) -> tuple[float, float | None]:
        """The range of the metric's values: ``(0, 1)`` for utilization, ``(0, None)`` for the rest."""
        return (0.0, 1.0) if self.name == "utilization" else (0.0, None)

    def measure(self, summary: Mapping[str, Any]) -> float | None:
        """The metric's value in a Summary (None when undefined: nothing completed)."""
        if self.name in ("throughput", "utilization"):
            return float(summary[self.name])
        if self.name in ("dead", "lost"):
            return float(summary["jobs"][self.name])
        stat, field = self.name.split("_", 1)
        scope = summary["by_type"].get(self.job_type, {}) if self.job_type else summary
        value = scope.get(field, {}).get(stat)
        return None if value is None else float(value)

    def sample_size(self, summary: Mapping[str, Any]) -> int | None:
        """How many jobs a wait or latency figure is over: started jobs (completed or dead) for a
        wait, completed ones for a latency; None for a global figure."""
        if self.name in _GLOBAL:
            return None
        scope = summary["by_type"].get(self.job_type, {}) if self.job_type else summary["jobs"]
        completed, dead = int(scope.get("completed", 0)), int(scope.get("dead", 0))
        return completed + dead if self.name.endswith("_wait") else completed

    def __str__(self) -> str:
        return self.key


def parse_metric(text: str) -> Metric:
    """``p95_wait`` or ``p95_wait[cut]`` -> :class:`Metric` (the name is checked, not the job type)."""
    m = _METRIC.match(text)
    if not m or m["metric"] not in METRICS:
        raise ScenarioError(f"metric must be one of {', '.join(METRICS)} (per type: p95_wait[TYPE]), got {text!r}")
    if m["type"] and m["metric"] in _GLOBAL:
        raise ScenarioError(f"{m['metric']} has no per-type value: {text!r}")
    return Metric(m["metric"], m["type"])
