"""Model and engine side by side: the same Summary fields, and their ratios."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["RATIO_FIELDS", "ratios", "compare_summaries", "field_value"]

#: Summary fields compared, as dotted paths.
RATIO_FIELDS = (
    "throughput", "utilization",
    "wait.mean", "wait.p50", "wait.p95", "wait.p99",
    "latency.mean", "latency.p50", "latency.p95", "latency.p99",
    "jobs.completed", "jobs.dead", "jobs.failed_attempts", "jobs.stalled",
)


def field_value(summary: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a Summary (None when absent)."""
    node: Any = summary
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def ratios(model: Mapping[str, Any], engine: Mapping[str, Any]) -> dict[str, float | None]:
    """engine / model for each of :data:`RATIO_FIELDS` (None where the model's value is 0 or missing)."""
    out: dict[str, float | None] = {}
    for path in RATIO_FIELDS:
        m, e = field_value(model, path), field_value(engine, path)
        out[path] = float(e) / float(m) if isinstance(m, (int, float)) and isinstance(e, (int, float)) and m else None
    return out


def compare_summaries(model: Mapping[str, Any], engine: Mapping[str, Any]) -> dict[str, Any]:
    """The ``qsim compare --json`` document: ``{"model", "engine", "ratios"}``."""
    return {"model": model, "engine": engine, "ratios": ratios(model, engine)}
