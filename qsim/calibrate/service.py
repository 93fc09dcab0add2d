"""Service-time fits: exponential, gamma and lognormal by maximum likelihood, the
best kept by the Kolmogorov–Smirnov statistic (scipy.stats).

The sample is the run time of successful attempts. Each candidate is fitted
by scipy's maximum-likelihood ``fit`` with the location fixed at 0; its KS
statistic against the sample decides (the smallest wins; the one-parameter
exponential wins a near tie, within ``0.2 / sqrt(n)``). A sample whose
coefficient of variation is below 0.01 is a ``constant``; fewer than
``min_fit`` runs, or ``empirical=True``, keep the sample itself (``empirical``).

The chosen fit's p-value is a **parametric bootstrap** (the Lilliefors
idea): the textbook KS p-value assumes the distribution was known in advance,
and with parameters fitted on the same data it is far too kind. Instead,
:data:`BOOTSTRAP_ROUNDS` samples of the sample's size are drawn from the
fitted distribution, each is refitted by the same maximum likelihood, and the
p-value is the share of their KS statistics at least as large as the
measured one, ``(1 + #{D_b >= D}) / (1 + B)``. Above :data:`BOOTSTRAP_MAX_N`
runs, statistic and bootstrap both use a random subsample of that size (the
report says so). Seeded: the same runs give the same p-value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special, stats

from qsim.spec import dists

__all__ = ["ServiceFit", "fit_service", "bootstrap_ks_p", "MIN_FIT", "CANDIDATES", "BOOTSTRAP_ROUNDS",
           "BOOTSTRAP_MAX_N"]

#: Fewer successful runs than this: keep the sample (``empirical``) instead of fitting.
MIN_FIT = 100
CANDIDATES = ("exponential", "gamma", "lognormal")
_CONSTANT_CV = 0.01
#: Refitted samples behind the KS p-value (p is then a multiple of 1/200).
BOOTSTRAP_ROUNDS = 199
#: Above this many runs the p-value is computed on a random subsample of this size.
BOOTSTRAP_MAX_N = 5000


@dataclass(frozen=True)
class ServiceFit:
    """The service distribution chosen for one job type.

    Attributes:
        kind: exponential | gamma | lognormal | constant | empirical.
        mean, cv: Of the chosen distribution (for empirical: of the sample).
        n: Runs in the sample.
        ks: KS statistic of the chosen fit against all the runs (NaN: none).
        ks_p: Its p-value by parametric bootstrap (see the module docstring; NaN: none).
        ks_p_n: The runs ``ks_p`` was computed on (all, or a subsample of :data:`BOOTSTRAP_MAX_N`).
        candidates: Every fitted candidate: ``{kind: {"mean", "cv", "ks"}}``.
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
    ks_p_n: int = 0
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
        return {"service": service, "ks": self.ks, "ks_p": self.ks_p, "ks_p_method": self.p_method, "n": self.n,
                "shift": self.shift, "candidates": self.candidates, **({"note": self.note} if self.note else {})}

    @property
    def p_method(self) -> str:
        """How :attr:`ks_p` was computed, in words (for the report)."""
        if math.isnan(self.ks_p):
            return "none"
        on = f"on all {self.n} runs" if self.ks_p_n >= self.n else f"on a random {self.ks_p_n} of the {self.n} runs"
        return f"parametric bootstrap, {BOOTSTRAP_ROUNDS} refitted samples of the fit (Lilliefors), {on}"


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


def _mle(kind: str, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Maximum-likelihood parameters (location 0) of every row of ``x`` at once: the bootstrap's refits.

    exponential: scale = mean; lognormal: mean and sd (ddof 0) of the logs; gamma: the shape solving
    ``log a - digamma(a) = log(mean) - mean(log x)`` (Minka's start, then Newton), scale = mean / a —
    the same estimates as scipy's ``fit(..., floc=0)``, for thousands of samples in one pass.
    """
    if kind == "exponential":
        return (x.mean(axis=1),)
    logs = np.log(x)
    if kind == "lognormal":
        return logs.mean(axis=1), logs.std(axis=1)
    m = x.mean(axis=1)
    gap = np.maximum(np.log(m) - logs.mean(axis=1), 1e-12)
    a = (3 - gap + np.sqrt((gap - 3) ** 2 + 24 * gap)) / (12 * gap)
    for _ in range(6):
        a = np.maximum(a - (np.log(a) - special.digamma(a) - gap) / (1 / a - special.polygamma(1, a)), 1e-6)
    return a, m / a


def _cdf(kind: str, x: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
    """The fitted CDF of each row of ``x`` (parameters per row, from :func:`_mle`)."""
    if kind == "exponential":
        return np.asarray(-np.expm1(-x / params[0][:, None]))
    if kind == "lognormal":
        mu, sd = params
        return np.asarray(special.ndtr((np.log(x) - mu[:, None]) / np.maximum(sd, 1e-300)[:, None]))
    a, scale = params
    return np.asarray(special.gammainc(a[:, None], x / scale[:, None]))


def _ks_rows(kind: str, x: np.ndarray) -> np.ndarray:
    """The KS statistic of each row of ``x`` against its own maximum-likelihood fit."""
    x = np.sort(x, axis=1)
    n = x.shape[1]
    f = _cdf(kind, x, _mle(kind, x))
    i = np.arange(1, n + 1)
    return np.asarray(np.maximum((i / n - f).max(axis=1), (f - (i - 1) / n).max(axis=1)))


def bootstrap_ks_p(kind: str, x: np.ndarray, *, rounds: int = BOOTSTRAP_ROUNDS, max_n: int = BOOTSTRAP_MAX_N,
                   seed: int = 0) -> tuple[float, int]:
    """``(p, n)``: the KS p-value of fitting ``kind`` to ``x`` by parametric bootstrap, and the runs it used.

    ``x`` (positive) is subsampled to ``max_n`` runs when larger; the statistic of that sample against
    its own fit is compared with those of ``rounds`` samples drawn from the fit and refitted.
    """
    rng = np.random.default_rng(seed)
    x = np.asarray(x, dtype=float)
    if x.size > max_n:
        x = rng.choice(x, size=max_n, replace=False)
    n = int(x.size)
    observed = float(_ks_rows(kind, x[None, :])[0])
    params = tuple(float(v[0]) for v in _mle(kind, x[None, :]))
    if kind == "exponential":
        draws = rng.exponential(params[0], size=(rounds, n))
    elif kind == "lognormal":
        draws = np.exp(rng.normal(params[0], params[1], size=(rounds, n)))
    else:
        draws = rng.gamma(params[0], params[1], size=(rounds, n))
    draws = np.maximum(draws, np.finfo(float).tiny)
    null = _ks_rows(kind, draws)
    return float((1 + np.count_nonzero(null >= observed - 1e-12)) / (1 + rounds)), n


def _clean(x: np.ndarray, resolution: float) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    floor = max(resolution / 2, 1e-9)
    return np.asarray(np.maximum(x, floor), dtype=float)


def fit_service(runs: np.ndarray, *, shift: float = 0.0, empirical: bool = False, min_fit: int = MIN_FIT,
                resolution: float = 1e-6, bootstrap: bool = True) -> ServiceFit:
    """Fit the service distribution of one job type.

    Args:
        runs: Durations (s) of successful attempts.
        shift: Subtracted from every run first (clipped at half the clock's resolution).
        empirical: Keep the sample instead of fitting.
        min_fit: Below this many runs the sample is kept (``empirical``), with a note.
        resolution: The clock's resolution: zero-length runs become half of it
            (gamma and lognormal need positive values).
        bootstrap: Compute the chosen fit's KS p-value by parametric bootstrap (else NaN).
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
        cands[kind] = {"mean": m, "cv": c, "ks": float(res.statistic)}
    if not cands:
        return ServiceFit(kind="empirical", mean=mean, cv=cv, n=n, shift=shift, sample=x,
                          note="no candidate could be fitted: kept as measured")
    best = min(cands, key=lambda k: cands[k]["ks"])
    expo = cands.get("exponential")
    if best != "exponential" and expo is not None and expo["ks"] <= cands[best]["ks"] + 0.2 / math.sqrt(n):
        best = "exponential"
    b = cands[best]
    p, p_n = bootstrap_ks_p(best, x) if bootstrap else (math.nan, 0)
    return ServiceFit(kind=best, mean=b["mean"], cv=b["cv"], n=n, ks=b["ks"], ks_p=p, ks_p_n=p_n, candidates=cands,
                      shift=shift, sample=x)
