"""Service-level objectives: ``p95_wait<=2`` parsed into an :class:`SLO` (the one parser of the grammar).

Grammar: ``METRIC[TYPE] OP NUMBER``. ``METRIC`` is one of
:data:`~qsim.analysis.metrics.METRICS` (``p95_wait``, ``mean_latency``,
``throughput``...), ``[TYPE]`` optionally restricts it to one job type,
``OP`` is ``<=``, ``<``, ``>=`` or ``>``, and ``NUMBER`` a finite number
(seconds for waits and latencies, jobs/s for throughput, a fraction for
utilization). Spaces around the parts are allowed.

:func:`parse_slo` reads the text in three steps — the comparison that splits
it (:func:`_split`), the metric on its left (:func:`_metric`), the number on
its right (:func:`_value`) — and each step says what it expected, with an
example, naming the option the text came from (``--slo``, ``--advise-slo``).
A later form of the objective (e.g. a suffix after the number) extends
:func:`_value` and :class:`SLO` here, and nowhere else.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from qsim.analysis.metrics import METRICS, Metric
from qsim.analysis.stats import Estimate
from qsim.errors import ScenarioError

__all__ = ["SLO", "parse_slo", "OPERATORS", "EXAMPLE"]

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, "<": operator.lt, ">=": operator.ge,
                                                   ">": operator.gt}
#: The comparisons an objective may use.
OPERATORS = tuple(_OPS)
#: The example every message shows.
EXAMPLE = "p95_wait<=2"
_GLOBAL = ("throughput", "utilization", "dead", "lost")
_LEFT = re.compile(r"^(?P<metric>[A-Za-z0-9_]+)\s*(?:\[(?P<type>[^\]]*)\])?$")
_OP_CHARS = re.compile(r"[<>=!]+")
_HINTS = {"=": "<= (at most) or >= (at least)", "==": "<= (at most) or >= (at least)", "=<": "<=", "=>": ">=",
          "!=": "<= or >="}


@dataclass(frozen=True)
class SLO:
    """One objective: ``metric`` (optionally of one job type) compared with ``value``."""

    metric: str
    op: str
    value: float
    job_type: str | None = None

    @property
    def target(self) -> Metric:
        """The metric this objective is about."""
        return Metric(self.metric, self.job_type)

    @property
    def upper(self) -> bool:
        """True for ``<=``/``<``: the interval's upper bound must meet it."""
        return self.op in ("<=", "<")

    def measure(self, summary: Mapping[str, Any]) -> float | None:
        """The metric's value in a Summary (None when undefined)."""
        return self.target.measure(summary)

    def met(self, summary: Mapping[str, Any]) -> bool:
        """Whether one Summary meets it."""
        value = self.measure(summary)
        return value is not None and _OPS[self.op](value, self.value)

    def check(self, est: Estimate) -> str:
        """``met``, ``failed`` or ``undecided`` for an estimate over replications (see :mod:`qsim.analysis.plan`)."""
        bound = est.bound(self.upper)
        if bound is None:
            return "failed"
        if _OPS[self.op](bound, self.value):
            return "met"
        other = est.bound(not self.upper)
        return "undecided" if other is not None and _OPS[self.op](other, self.value) else "failed"

    def __str__(self) -> str:
        scope = f"[{self.job_type}]" if self.job_type else ""
        return f"{self.metric}{scope}{self.op}{self.value:g}"


def _fail(option: str, text: str, what: str) -> ScenarioError:
    return ScenarioError(f"{option} {text.strip()!r}: {what}")


def _split(text: str, option: str) -> tuple[str, str, str]:
    """``(left, op, right)`` around the first comparison in ``text``."""
    m = _OP_CHARS.search(text)
    if m is None:
        raise _fail(option, text, f"no comparison; write METRIC OP NUMBER with OP one of {', '.join(OPERATORS)}, "
                                  f"e.g. {EXAMPLE}")
    op = m.group()
    if op not in _OPS:
        hint = _HINTS.get(op, ", ".join(OPERATORS))
        raise _fail(option, text, f"{op!r} is not a comparison qsim knows; use {hint}, e.g. {EXAMPLE}")
    return text[:m.start()].strip(), op, text[m.end():].strip()


def _metric(left: str, op: str, text: str, option: str) -> tuple[str, str | None]:
    """The metric name and job type on the left of the comparison."""
    if not left:
        raise _fail(option, text, f"no metric before {op!r}; e.g. {EXAMPLE} (metrics: {', '.join(METRICS)})")
    m = _LEFT.match(left)
    if m is None:
        raise _fail(option, text, f"the metric must be a name such as p95_wait, or p95_wait[TYPE] for one job "
                                  f"type, got {left!r}")
    name, job_type = m["metric"].lower(), m["type"]
    if name not in METRICS:
        raise _fail(option, text, f"unknown metric {m['metric']!r}; use one of {', '.join(METRICS)}, e.g. {EXAMPLE}")
    if job_type is not None and not job_type.strip():
        raise _fail(option, text, f"empty job type in {left!r}; write {name}[TYPE] with a job type's name, or "
                                  f"{name} for all jobs")
    if job_type and name in _GLOBAL:
        raise _fail(option, text, f"{name} has no per-type value; write {name}{op}... for all jobs")
    return name, job_type.strip() if job_type else None


def _value(right: str, left: str, op: str, text: str, option: str) -> float:
    """The number on the right of the comparison."""
    unit = "seconds" if left.split("[", 1)[0].lower().endswith(("_wait", "_latency")) else "a number"
    if not right:
        raise _fail(option, text, f"no number after {op!r}; write it like {left or 'p95_wait'}{op}2 ({unit})")
    try:
        value = float(right)
    except ValueError:
        raise _fail(option, text, f"the value after {op!r} must be a number ({unit}, e.g. "
                                  f"{left or 'p95_wait'}{op}2), got {right!r}") from None
    if not math.isfinite(value):
        raise _fail(option, text, f"the value after {op!r} must be a finite number, got {right!r}")
    return value


def parse_slo(text: str, *, option: str = "--slo") -> SLO:
    """Parse ``p95_wait<=2`` (see the module docstring); ``option`` names where it came from in errors.

    Raises:
        ScenarioError: one sentence saying which part is wrong and what is expected, with an example.
    """
    if not isinstance(text, str) or not text.strip():
        raise ScenarioError(f"{option} is empty; write an objective such as {EXAMPLE}")
    left, op, right = _split(text, option)
    name, job_type = _metric(left, op, text, option)
    value = _value(right, left, op, text, option)
    return SLO(metric=name, op=op, value=value, job_type=job_type)
