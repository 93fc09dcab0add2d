"""Arrival fits: the rate of a job type and which process its arrivals look like.

The rate is jobs per second over the calibration window. The kind:

1. **batches** — arrivals at the same instant (within two ticks of the clock)
   far more often than a Poisson stream of this rate would put them there
   (a one-sided binomial test, p < 0.001) and at least 1.5 jobs per batch on
   average: ``burst`` with ``size`` = the mean batch size, rounded;
2. otherwise a **dispersion test** of the counts in ``k`` equal windows
   (about ten jobs per window, 20 <= k <= 2000): the index of dispersion
   ``D = var / mean``, and ``(k - 1) D`` against chi-squared with ``k - 1``
   degrees of freedom. Over-dispersed (p < 0.01): ``burst`` with ``size =
   round(D)`` (a compound-Poisson reading; the report suggests
   ``--arrivals trace`` for traffic whose rate drifts); under-dispersed
   (p < 0.01) with interarrival cv < 0.5: ``constant``; else ``poisson``.

``trace`` keeps the measured times themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from qsim import dists

__all__ = ["ArrivalFit", "fit_arrivals"]


@dataclass(frozen=True)
class ArrivalFit:
    """The arrival process chosen for one job type.

    Attributes:
        kind: poisson | burst | constant | trace.
        rate: Jobs per second over the window.  size: Jobs per burst.
        n: Arrivals in the window.  span: Window length (s).
        dispersion: Index of dispersion of the window counts (1 for Poisson).
        p_over, p_under: One-sided p-values of the dispersion test.
        windows, width: Number and width (s) of the windows counted.
        batch_mean: Mean jobs per batch of simultaneous arrivals.
        times: Arrival times from the window's start (for trace CSVs and plots).
    """

    kind: str
    rate: float
    n: int
    span: float
    size: int = 1
    dispersion: float = math.nan
    p_over: float = math.nan
    p_under: float = math.nan
    windows: int = 0
    width: float = math.nan
    batch_mean: float = 1.0
    p_batch: float = math.nan
    times: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    note: str = ""

    def process(self, path: Path | None = None) -> dists.Arrival:
        """The scenario's arrival process (``path`` names the trace CSV)."""
        if self.kind == "trace":
            return dists.TraceArrivals(path=path or Path("arrivals.csv"), at=tuple(float(t) for t in self.times))
        if self.kind == "burst":
            return dists.BurstArrivals(rate=self.rate, size=self.size)
        if self.kind == "constant":
            return dists.ConstantArrivals(rate=self.rate)
        return dists.PoissonArrivals(rate=self.rate)

    def as_dict(self) -> dict[str, Any]:
        """The fit for the JSON report."""
        arrival: dict[str, Any] = {"kind": self.kind, "rate": self.rate}
        if self.kind == "burst":
            arrival["size"] = self.size
        return {"arrival": arrival, "n": self.n, "span": self.span, "dispersion": self.dispersion,
                "p_over": self.p_over, "p_under": self.p_under, "windows": self.windows, "width": self.width,
                "batch_mean": self.batch_mean, "p_batch": self.p_batch, **({"note": self.note} if self.note else {})}


def _batches(t: np.ndarray, eps: float) -> np.ndarray:
    """Sizes of the groups of arrivals at most ``eps`` apart."""
    if t.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[True], np.diff(t) > eps])
    idx = np.flatnonzero(starts)
    return np.diff(np.concatenate([idx, [t.size]]))


def fit_arrivals(times: np.ndarray, start: float, end: float, *, resolution: float = 1e-6,
                 trace: bool = False) -> ArrivalFit:
    """Fit the arrivals of one job type seen in the window ``[start, end]``.

    Args:
        times: Arrival times (the window's clock).
        resolution: Arrivals closer than this are simultaneous (a batch).
        trace: Keep the measured times (``trace``) instead of choosing a process.
    """
    t = np.sort(np.asarray(times, dtype=float))
    t = t[np.isfinite(t)]
    n = int(t.size)
    span = float(end - start)
    if n == 0 or not span > 0:
        raise ValueError("no arrivals in a window of positive length")
    rate = n / span
    rel = t - start
    if trace:
        return ArrivalFit(kind="trace", rate=rate, n=n, span=span, times=rel, note="measured enqueue times")
    eps = 2 * max(resolution, 1e-9)  # one tick of the clock either way: a batch may straddle one
    sizes = _batches(t, eps)
    batch_mean = float(sizes.mean())
    gaps = np.diff(t)
    close = int(np.count_nonzero(gaps <= eps))
    p0 = -math.expm1(-rate * eps)
    p_batch = float(stats.binomtest(close, max(gaps.size, 1), min(max(p0, 1e-12), 1.0), alternative="greater").pvalue) \
        if gaps.size else 1.0
    k = int(min(2000, max(20, n // 10)))
    width = span / k
    counts = np.bincount(np.minimum((rel / width).astype(np.int64), k - 1), minlength=k)
    mean_c = float(counts.mean())
    disp = float(counts.var(ddof=1) / mean_c) if mean_c > 0 else math.nan
    chi = (k - 1) * disp
    p_over, p_under = float(stats.chi2.sf(chi, k - 1)), float(stats.chi2.cdf(chi, k - 1))
    common: dict[str, Any] = dict(rate=rate, n=n, span=span, dispersion=disp, p_over=p_over, p_under=p_under, windows=k,
                  width=width, batch_mean=batch_mean, p_batch=p_batch, times=rel)
    if p_batch < 1e-3 and batch_mean >= 1.5:
        size = max(2, int(round(batch_mean)))
        return ArrivalFit(kind="burst", size=size, note=f"batches of {batch_mean:.2f} simultaneous jobs on average",
                          **common)
    if p_over < 0.01:
        size = max(2, int(round(disp)))
        return ArrivalFit(kind="burst", size=size, note=(
            f"over-dispersed counts (D = {disp:.2f}, p = {p_over:.2g}) without simultaneous batches: burst size "
            f"from D; if the rate drifts over the window, --arrivals trace replays it instead"),
            **common)
    ia = np.diff(t)
    ia_cv = float(ia.std() / ia.mean()) if ia.size > 1 and ia.mean() > 0 else math.nan
    if p_under < 0.01 and ia_cv < 0.5:
        return ArrivalFit(kind="constant", note=f"under-dispersed (D = {disp:.2f}), interarrival cv {ia_cv:.2f}",
                          **common)
    return ArrivalFit(kind="poisson", **common)
