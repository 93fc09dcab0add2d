"""Service-time fits: exponential, gamma and lognormal by maximum likelihood, the
best kept by the Kolmogorov–Smirnov statistic (scipy.stats).

The sample is the run time of successful attempts. Each candidate is fitted
by scipy's maximum-likelihood ``fit`` with the location fixed at 0; its KS
statistic against the sample decides (the smallest wins; the one-parameter
exponential wins a near tie, within ``0.2 / sqrt(n)``). The KS p-value is
shown for orientation only: with fitted parameters it is optimistic
(Lilliefors). A sample whose coefficient of variation is below 0.01 is a
``constant``; fewer than ``min_fit`` runs, or ``empirical=True``, keep the
sample itself (``empirical``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from qsim import dists

__all__ = ["ServiceFit", "fit_service", "MIN_FIT", "CANDIDATES"]

#: Fewer successful runs than this: keep the sample (``empirical``) instead of fitting.
MIN_FIT = 100
CANDIDATES = ("exponential", "gamma", "lognormal")
_CONSTANT_CV = 0.01


@dataclass(frozen=True)
class ServiceFit:
    """The service distribution chosen for one job type.

    Attributes:
        kind: exponential | gamma | lognormal | constant | empirical.
        mean, cv: Of the chosen distribution (for empirical: of the sample).
        n: Runs in the sample.
        ks, ks_p: KS statistic and (optimistic) p-value of the chosen fit (NaN: none).
        candidates: Every fitted candidate: ``{kind: {"mean", "cv", "ks", "ks_p"}}``.
        shift: Seconds subtracted from every run before fitting (the engine's
            per-job overhead that the scenario's ``[engine]`` part models).
        sample: The sample fitted (after the shift), for empirical CSVs and plots.
        note: Why this choice, when it is not a plain fit.
    """

    kind: str
    mean: float
    cv: float
    n: int
    ks: float = math.nan
    ks_p: float = math.nan
    candidates: dict[str, dict[str, float]] = field(default_factory=dict)
    shift: float = 0.0
    sample: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    note: str = ""

    def distribution(self, path: Path | None = None) -> dists.Distribution:
        """The scenario's service distribution (``path`` names the empirical CSV)."""
        if self.kind == "empirical":
            return dists.Empirical(path=path or Path("service.csv"), values=tuple(float(x) for x in self.sample))
        if self.kind == "constant":
            return dists.Constant(mean=self.mean)
        if self.kind == "exponential":
            return dists.Exponential(mean=self.mean)
        if self.kind == "gamma":
            return dists.Gamma(mean=self.mean, cv=self.cv)
        return dists.Lognormal(mean=self.mean, cv=self.cv)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """The chosen distribution's CDF at ``x`` (the sample's ECDF for empirical)."""
        x = np.asarray(x, dtype=float)
        if self.kind == "empirical":
            s = np.sort(self.sample)
            return np.searchsorted(s, x, side="right") / max(s.size, 1)
        if self.kind == "constant":
            return (x >= self.mean).astype(float)
        return np.asarray(_frozen(self.kind, self.mean, self.cv).cdf(x), dtype=float)

    def as_dict(self) -> dict[str, Any]:
        """The fit for the JSON report."""
        service: dict[str, Any] = {"kind": self.kind, "mean": self.mean}
        if self.kind in ("gamma", "lognormal", "empirical"):
            service["cv"] = self.cv
        return {"service": service, "ks": self.ks, "ks_p": self.ks_p, "n": self.n, "shift": self.shift,
                "candidates": self.candidates, **({"note": self.note} if self.note else {})}


def _frozen(kind: str, mean: float, cv: float) -> Any:
    """The scipy distribution of a kind with this mean and cv."""
    if kind == "exponential":
        return stats.expon(scale=mean)
    if kind == "gamma":
        a = 1.0 / cv**2
        return stats.gamma(a, scale=mean / a)
    s2 = math.log1p(cv**2)
    return stats.lognorm(math.sqrt(s2), scale=mean / math.exp(s2 / 2))


def _fit(kind: str, x: np.ndarray) -> tuple[float, float]:
    """Maximum-likelihood (mean, cv) of one candidate, location fixed at 0."""
    if kind == "exponential":
        _, scale = stats.expon.fit(x, floc=0)
        return float(scale), 1.0
    if kind == "gamma":
        a, _, scale = stats.gamma.fit(x, floc=0)
        return float(a * scale), float(1.0 / math.sqrt(a))
    s, _, scale = stats.lognorm.fit(x, floc=0)
    return float(scale * math.exp(s**2 / 2)), float(math.sqrt(math.expm1(s**2)))


def _clean(x: np.ndarray, resolution: float) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    floor = max(resolution / 2, 1e-9)
    return np.asarray(np.maximum(x, floor), dtype=float)


def fit_service(runs: np.ndarray, *, shift: float = 0.0, empirical: bool = False, min_fit: int = MIN_FIT,
                resolution: float = 1e-6) -> ServiceFit:
    """Fit the service distribution of one job type.

    Args:
        runs: Durations (s) of successful attempts.
        shift: Subtracted from every run first (clipped at half the clock's resolution).
        empirical: Keep the sample instead of fitting.
        min_fit: Below this many runs the sample is kept (``empirical``), with a note.
        resolution: The clock's resolution: zero-length runs become half of it
            (gamma and lognormal need positive values).
    """
    raw = np.asarray(runs, dtype=float)
    raw = raw[np.isfinite(raw)]
    x = _clean(raw - shift, resolution)
    n = int(x.size)
    if n == 0:
        raise ValueError("no runs to fit")
    mean, sd = float(x.mean()), float(x.std(ddof=1)) if n > 1 else 0.0
    cv = sd / mean if mean > 0 else 0.0
    if empirical or n < min_fit:
        note = "kept as measured (--service empirical)" if empirical else \
            f"only {n} runs (< {min_fit}): kept as measured instead of a fitted distribution"
        return ServiceFit(kind="empirical", mean=mean, cv=cv, n=n, shift=shift, sample=x, note=note)
    if cv < _CONSTANT_CV:
        return ServiceFit(kind="constant", mean=mean, cv=0.0, n=n, shift=shift, sample=x,
                          note=f"cv {cv:.4f} < {_CONSTANT_CV}: constant")
    cands: dict[str, dict[str, float]] = {}
    for kind in CANDIDATES:
        try:
            m, c = _fit(kind, x)
        except (ValueError, RuntimeError, FloatingPointError, ZeroDivisionError):
            continue
        if not (math.isfinite(m) and math.isfinite(c) and m > 0 and c > 0):
            continue
        res = stats.kstest(x, _frozen(kind, m, c).cdf)
        cands[kind] = {"mean": m, "cv": c, "ks": float(res.statistic), "ks_p": float(res.pvalue)}
    if not cands:
        return ServiceFit(kind="empirical", mean=mean, cv=cv, n=n, shift=shift, sample=x,
                          note="no candidate could be fitted: kept as measured")
    best = min(cands, key=lambda k: cands[k]["ks"])
    expo = cands.get("exponential")
    if best != "exponential" and expo is not None and expo["ks"] <= cands[best]["ks"] + 0.2 / math.sqrt(n):
        best = "exponential"
    b = cands[best]
    return ServiceFit(kind=best, mean=b["mean"], cv=b["cv"], n=n, ks=b["ks"], ks_p=b["ks_p"], candidates=cands,
                      shift=shift, sample=x)
