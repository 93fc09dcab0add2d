"""Failure fits: per-attempt ``fail_prob`` and job-level ``poison_prob`` by maximum likelihood.

The scenario's failure model: a job is poison with probability ``p`` (every
attempt fails); otherwise each attempt fails with probability ``f``, and a job
allowed ``A`` attempts goes to the dead-letter queue once all ``A`` failed.
So a job completed after ``k`` failed attempts has likelihood
``(1 - p) f^k (1 - f)``, and a dead job ``p + (1 - p) f^A``. Both are
maximised together (scipy.optimize); each 95% confidence interval is the
profile-likelihood interval (the values whose log-likelihood, maximised over
the other parameter, is within ``chi2(1).ppf(0.95) / 2`` of the maximum).

With one attempt (``A = 1``) the two cannot be told apart (a failed attempt
is a dead job either way); the dead share then goes into ``fail_prob``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

__all__ = ["FailureFit", "fit_failures"]

_EPS = 1e-12
_LR = float(stats.chi2.ppf(0.95, 1)) / 2


@dataclass(frozen=True)
class FailureFit:
    """Failure probabilities of one job type, with 95% confidence intervals."""

    fail_prob: float
    fail_ci: tuple[float, float]
    poison_prob: float
    poison_ci: tuple[float, float]
    jobs: int
    dead: int
    failed_attempts: int
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The fit for the JSON report."""
        return {"fail_prob": self.fail_prob, "fail_ci": list(self.fail_ci), "poison_prob": self.poison_prob,
                "poison_ci": list(self.poison_ci), "jobs": self.jobs, "dead": self.dead,
                "failed_attempts": self.failed_attempts, **({"note": self.note} if self.note else {})}


class _Likelihood:
    """Log-likelihood of (p, f) from sufficient statistics."""

    def __init__(self, completed: int, failures: int, dead_by_attempts: dict[int, int]) -> None:
        self.c, self.k = completed, failures
        self.dead = [(a, n) for a, n in dead_by_attempts.items() if n]

    def __call__(self, p: float, f: float) -> float:
        p = min(max(p, 0.0), 1.0)
        f = min(max(f, 0.0), 1.0)
        ll = 0.0
        if self.c:
            ll += self.c * math.log(max(1 - p, _EPS)) + self.c * math.log(max(1 - f, _EPS))
        if self.k:
            ll += self.k * math.log(max(f, _EPS))
        for a, n in self.dead:
            ll += n * math.log(max(p + (1 - p) * f**a, _EPS))
        return ll

    def best_f(self, p: float) -> tuple[float, float]:
        r = optimize.minimize_scalar(lambda f: -self(p, f), bounds=(0.0, 1.0), method="bounded",
                                     options={"xatol": 1e-10})
        cands = [(float(r.x), -float(r.fun)), (0.0, self(p, 0.0)), (1.0, self(p, 1.0))]
        return max(cands, key=lambda c: c[1])

    def best_p(self, f: float) -> tuple[float, float]:
        r = optimize.minimize_scalar(lambda p: -self(p, f), bounds=(0.0, 1.0), method="bounded",
                                     options={"xatol": 1e-10})
        cands = [(float(r.x), -float(r.fun)), (0.0, self(0.0, f)), (1.0, self(1.0, f))]
        return max(cands, key=lambda c: c[1])


def _interval(profile: Any, best: float, top: float) -> tuple[float, float]:
    """Profile-likelihood interval around ``best`` (``profile(x)`` = max log-likelihood at x)."""
    def gap(x: float) -> float:
        return float(top - profile(x) - _LR)

    lo = 0.0 if gap(0.0) <= 0 else optimize.brentq(gap, 0.0, best, xtol=1e-10) if best > 0 else 0.0
    hi = 1.0 if gap(1.0) <= 0 else optimize.brentq(gap, best, 1.0, xtol=1e-10) if best < 1 else 1.0
    return float(lo), float(hi)


def fit_failures(outcomes: Sequence[str] | np.ndarray, failed: Sequence[int] | np.ndarray,
                 max_attempts: Sequence[int] | np.ndarray) -> FailureFit:
    """Fit ``fail_prob`` and ``poison_prob`` from finished jobs.

    Args:
        outcomes: ``completed`` or ``dead`` per job (others are ignored).
        failed: Failed attempts per completed job (``< 0``: not recorded; the
            job then counts only through its outcome).
        max_attempts: Attempts each job was allowed (``< 1`` counts as 1).
    """
    out = np.asarray(outcomes, dtype=object)
    k = np.asarray(failed, dtype=np.int64)
    a = np.maximum(np.asarray(max_attempts, dtype=np.int64), 1)
    done = out == "completed"
    dead = out == "dead"
    known = done & (k >= 0)
    completed, failures = int(known.sum()), int(k[known].clip(min=0).sum())
    dead_by: dict[int, int] = {}
    for value, count in zip(*np.unique(a[dead], return_counts=True)):
        dead_by[int(value)] = int(count)
    n_dead = int(dead.sum())
    jobs = completed + n_dead
    all_failed = failures + int((a[dead]).sum())
    if jobs == 0:
        return FailureFit(0.0, (0.0, 1.0), 0.0, (0.0, 1.0), 0, 0, 0, note="no finished jobs")
    if completed == 0 and n_dead:
        return FailureFit(1.0, (0.0, 1.0), 1.0, (0.0, 1.0), jobs, n_dead, all_failed,
                          note="every job went to the dead-letter queue: poison")
    single = bool(np.all(a[done | dead] == 1))
    if single:  # one attempt each: only the dead share is identifiable
        q = n_dead / jobs
        lik = _Likelihood(completed, 0, {1: n_dead})
        top = lik(0.0, q)
        ci = _interval(lambda x: lik(0.0, x), q, top)
        note = "one attempt per job: transient and poison failures cannot be told apart; all in fail_prob" \
            if n_dead else ""
        return FailureFit(q, ci, 0.0, (0.0, 0.0), jobs, n_dead, n_dead, note=note)
    lik = _Likelihood(completed, failures, dead_by)
    starts = [(0.0, failures / max(failures + completed, 1)), (n_dead / jobs, failures / max(failures + completed, 1)),
              (n_dead / jobs, 0.0)]
    best = max(((p, *lik.best_f(p)[:1]) for p, _ in starts), key=lambda pf: lik(pf[0], pf[1]))
    res = optimize.minimize(lambda v: -lik(v[0], v[1]), np.array(best), method="L-BFGS-B",
                            bounds=[(0.0, 1.0), (0.0, 1.0)])
    p, f = (float(res.x[0]), float(res.x[1])) if -res.fun >= lik(*best) else best
    top = lik(p, f)
    p_ci = _interval(lambda x: lik.best_f(x)[1], p, top)
    f_ci = _interval(lambda x: lik.best_p(x)[1], f, top)
    return FailureFit(f, f_ci, p, p_ci, jobs, n_dead, all_failed)
