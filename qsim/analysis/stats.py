"""Estimates over independent replications: a mean and its Student-t confidence interval.

Every run of a point is one independent observation of each per-run metric
(a run's p95 wait is one number, like its mean wait). Over ``n`` runs with
values ``x_1..x_n`` the estimate is their mean and the interval is::

    mean ± t(1 - (1 - confidence) / 2, n - 1) * s / sqrt(n)     (s: sample standard deviation)

For a quantile this is an interval for the *expected per-run quantile* at this
run length, which tends to the steady-state quantile as runs get longer (a
short run's quantile is biased by its start from empty: a warm-up and the
run-length checks of :mod:`qsim.analysis.plan.runlength` deal with that). The
interval assumes the per-run values are roughly normal, which a mean over
thousands of jobs and a quantile of such a run are; with fewer than two runs
there is no interval.

:func:`mean_summary` averages Summaries of several runs into one "mean run"
with the Summary's shape (counts rounded to whole jobs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats as _scipy_stats

__all__ = ["Estimate", "estimate", "mean_summary"]


@dataclass(frozen=True)
class Estimate:
    """The mean of ``n`` per-run values and its confidence interval (``None`` when undefined).

    ``low``/``high``/``half_width`` are None with fewer than two values; ``mean``
    is None when some run left the metric undefined (nothing completed).
    ``half_width`` is the t-interval's, before ``low``/``high`` are clipped to the
    metric's range.
    """

    mean: float | None
    low: float | None
    high: float | None
    half_width: float | None
    n: int
    confidence: float

    @property
    def ci(self) -> list[float] | None:
        """``[low, high]``, or None without an interval."""
        return None if self.low is None or self.high is None else [self.low, self.high]

    def bound(self, upper: bool) -> float | None:
        """The interval's upper (or lower) bound; the mean itself when there is no interval."""
        if self.mean is None:
            return None
        if self.half_width is None:
            return self.mean
        return self.high if upper else self.low

    def to_dict(self) -> dict[str, Any]:
        """``{"mean", "ci": [low, high] | None, "half_width", "n"}`` for JSON."""
        return {"mean": self.mean, "ci": self.ci, "half_width": self.half_width, "n": self.n}

    def __str__(self) -> str:
        if self.mean is None:
            return "-"
        if self.half_width is None:
            return f"{self.mean:.3g}"
        return f"{self.mean:.3g} ± {self.half_width:.2g}"


def estimate(values: Sequence[float | None], confidence: float = 0.95, *,
             bounds: tuple[float | None, float | None] = (None, None)) -> Estimate:
    """The mean of ``values`` with a two-sided Student-t interval at ``confidence``.

    ``bounds`` clips the interval to the values the metric can take (a wait is
    never below 0, a utilization never above 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(values)
    if n == 0 or any(v is None or not math.isfinite(v) for v in values):
        return Estimate(None, None, None, None, n, confidence)
    xs = [float(v) for v in values if v is not None]
    mean = math.fsum(xs) / n
    if n < 2:
        return Estimate(mean, None, None, None, n, confidence)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    t = float(_scipy_stats.t.ppf(0.5 + confidence / 2.0, n - 1))
    half = t * math.sqrt(var / n)
    low, high = mean - half, mean + half
    if bounds[0] is not None:
        low = max(low, bounds[0])
    if bounds[1] is not None:
        high = min(high, bounds[1])
    return Estimate(mean, low, high, half, n, confidence)


def _mean_of(values: Sequence[Any]) -> Any:
    first = values[0]
    if isinstance(first, Mapping):
        keys = [k for k in first if all(isinstance(v, Mapping) and k in v for v in values)]
        return {k: _mean_of([v[k] for v in values]) for k in keys}
    if isinstance(first, list) and all(isinstance(v, list) for v in values):  # the windows: those every run has
        return [_mean_of([v[i] for v in values]) for i in range(min(len(v) for v in values))]
    if isinstance(first, bool) or not isinstance(first, (int, float)) or first is None:
        return first
    if any(v is None for v in values):
        return None
    mean = math.fsum(float(v) for v in values) / len(values)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return int(math.floor(mean + 0.5))
    return mean


def mean_summary(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One Summary whose every number is the mean over ``summaries`` (counts rounded to whole jobs).

    A figure that is undefined (None) in any run is None; text fields and the
    seed come from the first run; ``windows`` are averaged window by window, as
    many as every run has. One Summary comes back as an equal copy.
    """
    if not summaries:
        raise ValueError("mean_summary needs at least one Summary")
    out: dict[str, Any] = _mean_of(list(summaries))
    if "seed" in summaries[0]:
        out["seed"] = summaries[0]["seed"]
    return out
