"""Arrival fits: the rate of a job type and which process its arrivals look like.

The rate is jobs per second over the calibration window. The kind, in this order:

1. **batches** — arrivals at the same instant far more often than a Poisson
   stream of this rate would put them there, and at least 1.5 jobs per batch
   on average: ``burst`` with ``size`` = the mean batch size, rounded.
   "The same instant" is within ``eps`` of the previous arrival:
   ``eps = min(10 ms, 0.05 / rate)`` (a Poisson stream puts about 5% of its
   gaps there), but at least two ticks of the source's clock. The test: the
   number of gaps ``<= eps`` against a binomial with ``p0 = 1 - exp(-rate
   eps)``, one-sided, ``p_batch < 0.001``. Batches found, the jobs are grouped
   again with the gap the *batches'* rate allows (``min(10 ms, 0.05 /
   batch rate)``), so a batch its producer wrote over a few milliseconds
   (a busy machine, a garbage collection) is not counted as two. When the batches themselves come at
   a changing rate (the test of step 2 on the batch instants), the burst
   follows a rate profile (``kind = "burst"`` with ``points``);
2. otherwise **the test of one constant rate** (:mod:`qsim.calibrate.drift`:
   Kolmogorov-Smirnov on the arrival times and the dispersion test of the
   counts in ``k`` windows, Bonferroni, ``p_change``). When it rejects
   (``p_change < 0.001``): ``profile``, the rate profile chosen by BIC
   (change points as ``shape = "step"``, a ramp as ``"linear"``, a ramp
   and a jump as ``"linear"`` with two points at the jump's time, an
   hour-of-day profile with ``period = 86400`` when the window spans two
   days), its fit checked by the dispersion of the counts within it
   (``p_fit``). Over-dispersed counts are *not* taken for bursts: bursts need
   arrivals that coincide (step 1). If no profile beats one rate by BIC:
   ``poisson`` at the mean rate, with a note;
3. otherwise under-dispersed counts (``p_under < 0.01``) with interarrival
   cv < 0.5: ``constant``; else ``poisson``.

``trace`` keeps the measured times themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from qsim.calibrate.drift import ConstancyTest, ProfileFit, constant_rate_test, fit_profile, window_counts
from qsim.spec import dists

__all__ = ["ArrivalFit", "fit_arrivals", "ALPHA_BATCH", "COINCIDENT_MAX"]

#: Arrivals coincide (a batch) when ``p_batch`` is below this (and batches hold 1.5 jobs on average).
ALPHA_BATCH = 1e-3
#: The widest gap (s) between two arrivals of one batch.
COINCIDENT_MAX = 0.01


@dataclass(frozen=True)
class ArrivalFit:
    """The arrival process chosen for one job type.

    Attributes:
        kind: poisson | profile | burst | constant | trace.
        rate: Jobs per second over the window (a profile's mean).  size: Jobs per burst.
        n: Arrivals in the window.  span: Window length (s).
        dispersion: Index of dispersion of the window counts (1 for Poisson).
        p_over, p_under: One-sided p-values of the dispersion test.
        p_ks: Kolmogorov-Smirnov test of the arrival times against one rate (uniform times).
        p_change: The test of one constant rate (``min(1, 2 min(p_ks, p_over))``; of the batch
            instants for ``burst``).
        windows, width: Number and width (s) of the windows counted.
        batch_mean: Mean jobs per batch of simultaneous arrivals.  p_batch: The batch test's p-value.
        eps: Arrivals at most this far apart (s) count as one batch.
        drift: The rate profile fitted when the rate changes (``profile``, a profiled ``burst``; also
            when no profile beat one rate), else None.
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
    p_ks: float = math.nan
    p_change: float = math.nan
    eps: float = math.nan
    drift: ProfileFit | None = field(default=None, repr=False, compare=False)
    times: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    note: str = ""

    @property
    def profile(self) -> dists.RateProfile | None:
        """The rate profile (jobs/s) a ``profile`` or profiled ``burst`` follows (None: one rate)."""
        if self.drift is None or self.drift.profile is None or self.kind not in ("profile", "burst"):
            return None
        return _times(self.drift.profile, self.size) if self.kind == "burst" else self.drift.profile

    @property
    def latest_rate(self) -> float:
        """The rate the queue gets now, at the window's end: a profile's latest (see
        :class:`~qsim.calibrate.drift.ProfileFit`), else :attr:`rate`."""
        drift = self.drift
        return drift.latest * self._per_instant if drift is not None and self.profile is not None else self.rate

    @property
    def peak_rate(self) -> float:
        """The highest rate of the profile, else :attr:`rate`."""
        drift = self.drift
        return drift.peak * self._per_instant if drift is not None and self.profile is not None else self.rate

    @property
    def _per_instant(self) -> float:
        return float(self.size) if self.kind == "burst" else 1.0

    def process(self, path: Path | None = None) -> dists.Arrival:
        """The scenario's arrival process (``path`` names the trace CSV)."""
        if self.kind == "trace":
            return dists.TraceArrivals(path=path or Path("arrivals.csv"), at=tuple(float(t) for t in self.times))
        profile = self.profile
        if self.kind == "profile" and profile is not None:
            return dists.ProfileArrivals(profile=profile)
        if self.kind == "burst":
            if profile is not None:
                return dists.BurstArrivals(size=self.size, profile=profile)
            return dists.BurstArrivals(rate=self.rate, size=self.size)
        if self.kind == "constant":
            return dists.ConstantArrivals(rate=self.rate)
        return dists.PoissonArrivals(rate=self.rate)

    def as_dict(self) -> dict[str, Any]:
        """The fit for the JSON report (``arrival``: the scenario's keys)."""
        arrival: dict[str, Any] = {"kind": self.kind, "rate": self.rate}
        if self.kind == "burst":
            arrival["size"] = self.size
        if self.profile is not None:
            process = self.process()  # a profile or a profiled burst
            if isinstance(process, (dists.ProfileArrivals, dists.BurstArrivals)):
                arrival = process.as_table()
        out = {"arrival": arrival, "rate": self.rate, "n": self.n, "span": self.span, "dispersion": self.dispersion,
               "p_over": self.p_over, "p_under": self.p_under, "p_ks": self.p_ks, "p_change": self.p_change,
               "windows": self.windows, "width": self.width, "batch_mean": self.batch_mean, "p_batch": self.p_batch,
               "eps": self.eps, "latest_rate": self.latest_rate, "peak_rate": self.peak_rate}
        if self.drift is not None:
            out["profile"] = self.drift.as_dict()
        if self.note:
            out["note"] = self.note
        return out


def _times(profile: dists.RateProfile, factor: float) -> dists.RateProfile:
    """``profile`` with its rates times ``factor`` (batches per second -> jobs per second)."""
    return dists.RateProfile(points=tuple((t, float(f"{r * factor:.6g}")) for t, r in profile.points),
                             shape=profile.shape, period=profile.period, scale=profile.scale)


def _batches(t: np.ndarray, eps: float) -> np.ndarray:
    """Sizes of the groups of arrivals at most ``eps`` apart."""
    if t.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[True], np.diff(t) > eps])
    idx = np.flatnonzero(starts)
    return np.diff(np.concatenate([idx, [t.size]]))


def _profile_note(test: ConstancyTest, fit: ProfileFit) -> str:
    prof = fit.profile
    assert prof is not None
    rates = [r for _, r in prof.points]
    jumps = prof.jumps
    linear = f"piecewise linear, {len(prof.points)} knots" + (
        f", jumping at {', '.join(f'{t:.6g}' for t in jumps)} s" if jumps else "")
    where = {"steps": f"{fit.segments} steps", "linear": linear, "daily": "hour of the day, period 86400 s"}[fit.model]
    note = (f"rate changes over the window (test of one rate: p = {test.p_change:.2g}, KS p {test.p_ks:.2g}, "
            f"dispersion p {test.p_over:.2g}): {where} by BIC, {min(rates):.4g} to {max(rates):.4g}/s; "
            f"counts within the profile: dispersion p {fit.p_fit:.2g}")
    if fit.p_fit < 0.01:
        note += " (they vary more than it explains: --arrivals trace replays the measured times)"
    return note


def fit_arrivals(times: np.ndarray, start: float, end: float, *, resolution: float = 1e-6,
                 trace: bool = False) -> ArrivalFit:
    """Fit the arrivals of one job type seen in the window ``[start, end]`` (see the module docstring).

    Args:
        times: Arrival times (the window's clock).
        resolution: The clock's resolution (s): arrivals two ticks apart may be one batch.
        trace: Keep the measured times (``trace``) instead of choosing a process.
    """
    t = np.sort(np.asarray(times, dtype=float))
    t = t[np.isfinite(t)]
    n = int(t.size)
    span = float(end - start)
    if n == 0 or not span > 0:
        raise ValueError("no arrivals in a window of positive length")
    rate = n / span
    rel = np.clip(t - start, 0.0, span)
    if trace:
        return ArrivalFit(kind="trace", rate=rate, n=n, span=span, times=rel, note="measured enqueue times")
    eps = max(2 * max(resolution, 1e-9), min(COINCIDENT_MAX, 0.05 / rate))
    sizes = _batches(t, eps)
    batch_mean = float(sizes.mean())
    gaps = np.diff(t)
    close = int(np.count_nonzero(gaps <= eps))
    p0 = -math.expm1(-rate * eps)
    p_batch = float(stats.binomtest(close, max(gaps.size, 1), min(max(p0, 1e-12), 1.0), alternative="greater").pvalue) \
        if gaps.size else 1.0
    counts, edges = window_counts(rel, span)
    test = constant_rate_test(rel, span, counts)
    common: dict[str, Any] = dict(rate=rate, n=n, span=span, dispersion=test.dispersion, p_over=test.p_over,
                                  p_under=test.p_under, p_ks=test.p_ks, p_change=test.p_change, windows=test.windows,
                                  width=test.width, batch_mean=batch_mean, p_batch=p_batch, eps=eps, times=rel)
    if p_batch < ALPHA_BATCH and batch_mean >= 1.5:
        eps = max(eps, min(COINCIDENT_MAX, 0.05 * span / sizes.size))
        sizes = _batches(t, eps)
        batch_mean = float(sizes.mean())
        common.update(batch_mean=batch_mean, eps=eps)
        size = max(2, int(round(batch_mean)))
        note = f"batches of {batch_mean:.2f} simultaneous jobs on average (within {eps * 1e3:.3g} ms)"
        instants = rel[np.concatenate([[0], np.cumsum(sizes)[:-1]])]
        bcounts, bedges = window_counts(instants, span)
        btest = constant_rate_test(instants, span, bcounts)
        common["p_change"] = btest.p_change
        if btest.changed:
            drift = fit_profile(instants, span, bcounts, bedges, origin=start)
            if drift.profile is not None:
                note += "; the batches' " + _profile_note(btest, drift)
                return ArrivalFit(kind="burst", size=size, note=note, drift=drift, **common)
        return ArrivalFit(kind="burst", size=size, note=note, **common)
    if test.changed:
        drift = fit_profile(rel, span, counts, edges, origin=start)
        if drift.profile is not None:
            return ArrivalFit(kind="profile", note=_profile_note(test, drift), drift=drift, **common)
        return ArrivalFit(kind="poisson", drift=drift, note=(
            f"the counts vary more than one rate explains (p = {test.p_change:.2g}) but no rate profile beats one "
            f"rate by BIC and no arrivals coincide: poisson at the mean rate; --arrivals trace replays the "
            f"measured times"), **common)
    ia = np.diff(t)
    ia_cv = float(ia.std() / ia.mean()) if ia.size > 1 and ia.mean() > 0 else math.nan
    if test.p_under < 0.01 and ia_cv < 0.5:
        return ArrivalFit(kind="constant", note=f"under-dispersed (D = {test.dispersion:.2f}), interarrival cv "
                                                f"{ia_cv:.2f}", **common)
    return ArrivalFit(kind="poisson", **common)
