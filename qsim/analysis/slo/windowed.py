"""SLOs judged over a run's windows: ``p95_wait<=2 in 95% of windows``, ``p95_wait<=2 in every window``.

A plain SLO (``p95_wait<=2``) judges the whole run's figure. A *windowed* SLO
judges the Summary's ``windows`` (:mod:`qsim.results.windows`), in one of two forms:

``METRIC OP NUMBER in P% of windows``
    At least ``P`` percent of the windows meet ``METRIC OP NUMBER``. Its
    per-run value is the *share* of windows that meet it (0..1); the SLO is met
    when that share is ``>= P / 100``.
``METRIC OP NUMBER in every window``
    The worst window meets it (``in the worst window`` and ``in worst window``
    say the same). Its per-run value is the worst window's figure: the largest
    for ``<=``/``<``, the smallest for ``>=``/``>``.

Windows in which the metric has no value (no job started in it, for a wait
quantile) are left out of both forms; a run with no window that has one
meets neither. Metrics (the window's field in brackets): ``p50_wait``
(``wait_p50``), ``p95_wait`` (``wait_p95``), ``throughput``, ``oldest_age``,
``max_depth``, ``busy`` and ``arrivals``; the last four exist only per window.
Windowed SLOs have no per-type form. :func:`qsim.analysis.slo.language.parse_slo`
reads every form; plan (with replications: the interval of the per-run value
must meet it, as for any metric), ``qsim compare --check --slo`` and the Locust
thresholds judge them.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from qsim.errors import ScenarioError

__all__ = ["WINDOW_METRICS", "WINDOW_ONLY", "SCOPES", "split_scope", "parse_windowed", "WindowMetric"]

#: SLO metric name -> the window's field.
WINDOW_METRICS: Mapping[str, str] = {"p50_wait": "wait_p50", "p95_wait": "wait_p95", "throughput": "throughput",
                                     "oldest_age": "oldest_age", "max_depth": "max_depth", "busy": "busy",
                                     "arrivals": "arrivals"}
#: Metrics that exist only per window (no whole-run figure of that name).
WINDOW_ONLY = ("oldest_age", "max_depth", "busy", "arrivals")
#: ``run``: the whole run; ``every``: every window (the worst one); ``share``: a share of the windows.
SCOPES = ("run", "every", "share")

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, "<": operator.lt, ">=": operator.ge,
                                                   ">": operator.gt}
_SCOPE = re.compile(r"\s+in\s+(?:(?P<share>\S+?)\s*%\s*of\s+(?:the\s+)?windows|(?P<every>every\s+window"
                    r"|(?:the\s+)?worst\s+window))\s*$", re.IGNORECASE)
_BODY = re.compile(r"^\s*(?P<metric>[a-z0-9_]+)(?:\[(?P<type>[^\]]+)\])?\s*(?P<op><=|>=|<|>)\s*(?P<value>\S+)\s*$")
_FORMS = "'p95_wait<=2 in 95% of windows' or 'p95_wait<=2 in every window'"


def split_scope(text: str) -> tuple[str, str, float | None]:
    """``(body, scope, share)``: ``p95_wait<=2 in 95% of windows`` -> ``("p95_wait<=2", "share", 0.95)``;
    a plain SLO comes back whole with scope ``run``."""
    m = _SCOPE.search(text)
    if m is None:
        if re.search(r"\swindows?\b", text, re.IGNORECASE):
            raise ScenarioError(f"--slo over windows must look like {_FORMS}, got {text!r}")
        return text, "run", None
    body = text[:m.start()]
    if m["every"]:
        return body, "every", None
    try:
        percent = float(m["share"])
    except ValueError:
        raise ScenarioError(f"--slo share of windows must be a percentage like 95%, got {m['share'] + '%'!r}") from None
    if not 0.0 < percent <= 100.0:
        raise ScenarioError(f"--slo share of windows must be above 0% and at most 100%, got {m['share']}%")
    return body, "share", percent / 100.0


def parse_windowed(body: str, text: str) -> tuple[str, str, float]:
    """``(metric, op, value)`` of a windowed SLO's ``body`` (``p95_wait<=2``); ``text`` is the whole SLO."""
    if "==" in body:
        raise ScenarioError(f"--slo over windows compares with <=, <, >= or >, not ==: {text!r}")
    m = _BODY.match(body)
    if not m:
        raise ScenarioError(f"--slo over windows must look like {_FORMS}, got {text!r}")
    if m["metric"] not in WINDOW_METRICS:
        raise ScenarioError(f"--slo over windows: the metric must be one of {', '.join(WINDOW_METRICS)} "
                            f"(the figures each window has), got {m['metric']!r}")
    if m["type"]:
        raise ScenarioError(f"--slo over windows has no per-type form (windows are of all jobs): {text!r}")
    try:
        value = float(m["value"])
    except ValueError:
        raise ScenarioError(f"--slo value must be a number, got {m['value']!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ScenarioError(f"--slo value must be a finite number, got {m['value']!r}")
    return m["metric"], m["op"], value


@dataclass(frozen=True)
class WindowMetric:
    """The per-run value of a windowed SLO (see the module docstring).

    ``scope`` ``every``: the worst window's figure (largest for ``<=``/``<``,
    smallest for ``>=``/``>``); ``share``: the share of windows meeting ``op
    value``. ``span``: only the windows that lie inside ``[start, end)``
    (``label`` names it in the key, e.g. ``peak``).
    """

    name: str
    op: str
    value: float
    scope: str
    span: tuple[float, float] | None = None
    label: str = ""

    @property
    def key(self) -> str:
        """``max_over_windows(p95_wait)``, ``share_of_windows(p95_wait<=2)``, ``...@peak``: its name in JSON."""
        if self.scope == "every":
            base = f"{'max' if self.op in ('<=', '<') else 'min'}_over_windows({self.name})"
        else:
            base = f"share_of_windows({self.name}{self.op}{self.value:g})"
        return f"{base}@{self.label}" if self.label else base

    @property
    def quantile(self) -> float | None:
        """None: not a quantile of jobs (the run-length check leaves it alone)."""
        return None

    @property
    def bounds(self) -> tuple[float, float | None]:
        """``(0, 1)`` for a share, ``(0, None)`` for a worst window."""
        return (0.0, 1.0) if self.scope == "share" else (0.0, None)

    def values(self, summary: Mapping[str, Any]) -> list[float]:
        """The metric in each window (inside ``span``) that has a value."""
        field = WINDOW_METRICS[self.name]
        out = []
        for w in summary.get("windows") or ():
            if self.span is not None and not (w["start"] >= self.span[0] - 1e-9 and w["end"] <= self.span[1] + 1e-9):
                continue
            v = w.get(field)
            if v is not None:
                out.append(float(v))
        return out

    def measure(self, summary: Mapping[str, Any]) -> float | None:
        """The per-run value (None when no window has a value)."""
        values = self.values(summary)
        if not values:
            return None
        if self.scope == "every":
            return max(values) if self.op in ("<=", "<") else min(values)
        test = _OPS[self.op]
        return sum(1 for v in values if test(v, self.value)) / len(values)

    def sample_size(self, summary: Mapping[str, Any]) -> int | None:
        """None: not a figure over jobs."""
        return None

    def __str__(self) -> str:
        return self.key
