"""Service-level objectives: ``p95_wait<=2`` parsed into an :class:`SLO` (the one parser of the grammar).

Grammar: ``METRIC[TYPE] OP NUMBER [SCOPE]``. ``METRIC`` is one of
:data:`~qsim.analysis.slo.metrics.METRICS` (``p95_wait``, ``mean_latency``,
``throughput``...), ``[TYPE]`` optionally restricts it to one job type,
``OP`` is ``<=``, ``<``, ``>=``, ``>`` or ``==`` (``lost==0``), and ``NUMBER``
a finite number (seconds for waits and latencies, jobs/s for throughput, a
fraction for utilization). Spaces around the parts are allowed. ``SCOPE``
judges the run's windows instead of the whole run: ``in 95% of windows`` or
``in every window`` (:mod:`qsim.analysis.slo.windowed` reads it and the
per-window metrics).

:func:`parse_slo` reads a whole-run objective in three steps — the
comparison that splits it (:func:`_split`), the metric on its left
(:func:`_metric`), the number on its right (:func:`_value`) — and each step
says what it expected, with an example, naming the option the text came from
(``--slo``, ``--advise-slo``).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from qsim.analysis.slo.metrics import METRICS, Metric
from qsim.analysis.slo.windowed import WINDOW_METRICS, WINDOW_ONLY, WindowMetric, parse_windowed, split_scope
from qsim.analysis.stats import Estimate
from qsim.errors import ScenarioError

__all__ = ["SLO", "parse_slo", "OPERATORS", "EXAMPLE"]

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, "<": operator.lt, ">=": operator.ge,
                                                   ">": operator.gt, "==": operator.eq}
#: The comparisons an objective may use.
OPERATORS = tuple(_OPS)
#: The example every message shows.
EXAMPLE = "p95_wait<=2"
_GLOBAL = ("throughput", "utilization", "dead", "lost")
_LEFT = re.compile(r"^(?P<metric>[A-Za-z0-9_]+)\s*(?:\[(?P<type>[^\]]*)\])?$")
_OP_CHARS = re.compile(r"[<>=!]+")
_HINTS = {"=": "<= (at most), >= (at least) or == (exactly)", "=<": "<=", "=>": ">=", "!=": "<= or >="}


@dataclass(frozen=True)
class SLO:
    """One objective: ``metric`` (optionally of one job type) compared with ``value``.

    ``scope`` says over what: ``run`` (the whole run's figure), ``every`` (every
    window: the worst one) or ``share`` (at least ``share`` of the windows,
    0..1); ``span`` restricts a windowed SLO to the windows inside ``[start,
    end)`` (``label`` names that part, e.g. ``peak``). See :mod:`qsim.analysis.slo.windowed`.
    """

    metric: str
    op: str
    value: float
    job_type: str | None = None
    scope: str = "run"
    share: float | None = None
    span: tuple[float, float] | None = None
    label: str = ""

    @property
    def windowed(self) -> bool:
        """Whether it judges the run's windows rather than the whole run."""
        return self.scope != "run"

    @property
    def target(self) -> Metric | WindowMetric:
        """The per-run value this objective is about."""
        if self.windowed:
            return WindowMetric(self.metric, self.op, self.value, self.scope, self.span, self.label)
        return Metric(self.metric, self.job_type)

    @property
    def judged(self) -> tuple[str, float]:
        """How the per-run value is judged: ``(op, limit)``: the SLO's own, or ``(">=", share)`` for a share of windows."""
        return (">=", float(self.share or 0.0)) if self.scope == "share" else (self.op, self.value)

    @property
    def upper(self) -> bool:
        """True when the interval's upper bound must meet it (``<=``/``<``; never for a share of windows)."""
        return self.judged[0] in ("<=", "<")

    def measure(self, summary: Mapping[str, Any]) -> float | None:
        """The per-run value in a Summary (None when undefined)."""
        return self.target.measure(summary)

    def met(self, summary: Mapping[str, Any]) -> bool:
        """Whether one Summary meets it."""
        value = self.measure(summary)
        op, limit = self.judged
        return value is not None and _OPS[op](value, limit)

    def check(self, est: Estimate) -> str:
        """``met``, ``failed`` or ``undecided`` for an estimate over replications (see the module docstring;
        ``==`` is met when both bounds equal the value)."""
        op, limit = self.judged
        if op == "==":
            low, high = est.bound(False), est.bound(True)
            if low is None or high is None:
                return "failed"
            if low == high == limit:
                return "met"
            return "undecided" if low <= limit <= high else "failed"
        bound = est.bound(self.upper)
        if bound is None:
            return "failed"
        if _OPS[op](bound, limit):
            return "met"
        other = est.bound(not self.upper)
        return "undecided" if other is not None and _OPS[op](other, limit) else "failed"

    def during(self, start: float, end: float, label: str) -> SLO:
        """The same objective judged only on the windows inside ``[start, end)`` (a plain one: in every window;
        one whose metric has no per-window figure, such as ``lost`` or ``p99_wait``, stays as it is)."""
        if not self.windowed and (self.metric not in WINDOW_METRICS or self.job_type or self.op == "=="):
            return self
        scope = self.scope if self.windowed else "every"
        return SLO(metric=self.metric, op=self.op, value=self.value, scope=scope, share=self.share,
                   span=(start, end), label=label)

    def __str__(self) -> str:
        scope = f"[{self.job_type}]" if self.job_type else ""
        text = f"{self.metric}{scope}{self.op}{self.value:g}"
        if self.scope == "every":
            text += " in every window"
        elif self.scope == "share":
            text += f" in {100 * (self.share or 0.0):g}% of windows"
        return f"{text} ({self.label})" if self.label else text


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
    if name in WINDOW_ONLY:
        raise _fail(option, text, f"{name} is a per-window figure: say '{text.strip()} in every window' or "
                                  f"'{text.strip()} in 95% of windows'")
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
    """Parse ``p95_wait<=2``, ``p95_wait<=2 in 95% of windows`` or ``p95_wait<=2 in every window`` (see the
    module docstring); ``option`` names where it came from in errors.

    Raises:
        ScenarioError: one sentence saying which part is wrong and what is expected, with an example.
    """
    if not isinstance(text, str) or not text.strip():
        raise ScenarioError(f"{option} is empty; write an objective such as {EXAMPLE}")
    try:
        body, scope, share = split_scope(text)
        if scope != "run":
            metric, op, limit = parse_windowed(body, text)
            _meetable(metric, op, limit, text, option)
            return SLO(metric=metric, op=op, value=limit, scope=scope, share=share)
    except ScenarioError as e:  # qsim.analysis.slo.windowed names --slo: say which option it was
        raise ScenarioError(str(e).replace("--slo", option, 1)) from None
    left, op, right = _split(text, option)
    name, job_type = _metric(left, op, text, option)
    value = _value(right, left, op, text, option)
    _meetable(name, op, value, text, option)
    return SLO(metric=name, op=op, value=value, job_type=job_type)


def _meetable(metric: str, op: str, value: float, text: str, option: str) -> None:
    """Refuse an objective no run can meet: every metric (waits, latencies, counts, rates, shares) is >= 0, and
    utilization (a share of the slots' time) is at most 1."""
    if (op in ("<=", "==") and value < 0) or (op == "<" and value <= 0):
        raise _fail(option, text, f"no run can meet it: {metric} is never below 0")
    if metric == "utilization" and ((op in (">=", "==") and value > 1) or (op == ">" and value >= 1)):
        raise _fail(option, text, f"no run can meet it: {metric} is never above 1")
