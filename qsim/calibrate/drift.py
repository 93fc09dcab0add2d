"""Rate drift: does a job type's arrival rate change over the window, and how.

:func:`constant_rate_test` asks whether one rate explains the arrivals; when it
does not, :func:`fit_profile` finds the :class:`~qsim.spec.dists.RateProfile` that
does. Both work on arrival times measured from the window's start, and on
their counts in ``k`` equal windows (:func:`window_counts`).

**The test** (null: one constant rate, a homogeneous Poisson process). Two
tests, each exact or asymptotically exact under the null, combined by
Bonferroni, ``p_change = min(1, 2 min(p_ks, p_over))``:

- ``p_ks``: Kolmogorov-Smirnov test of the arrival times against the uniform
  distribution on the window (given their number, the times of a homogeneous
  Poisson process are independent and uniform): sees slow drift, a ramp, a
  type that stopped arriving;
- ``p_over``: the dispersion test of the window counts, ``(k - 1) D`` against
  chi-squared with ``k - 1`` degrees of freedom (``D = var / mean``): sees
  fast changes that leave the cumulative count close to a straight line.

The rate is taken to change when ``p_change <`` :data:`ALPHA_CHANGE`.

**The fit** (penalised likelihood, the Bayesian information criterion). The
candidates, each with its Poisson log-likelihood ``log L = sum(c log mu - mu)``
over the window counts ``c`` (``mu``: the counts the candidate expects) and
``p`` parameters, ``BIC = -2 log L + p ln n`` for ``n`` arrivals; the least
BIC is chosen:

- ``constant``: one rate (``p = 1``);
- ``steps``: a piecewise-constant rate. The change points are the optimal
  partition of the counts for the penalty ``ln n`` per segment (a rate and a
  change point each: BIC), found exactly by dynamic programming with PELT
  pruning; each change point is then moved, within one window either way, to
  the arrival time that maximises the likelihood of the two segments beside
  it; neighbours are merged again while that lowers the penalised likelihood.
  ``p = 2m - 1`` for ``m`` segments. Written as ``shape = "step"``;
- ``linear``: a piecewise-linear rate, the knots' rates by maximum likelihood:
  a trend (knots at the window's ends, ``p = 2``), or knots at the window's
  ends and the middle of each segment of ``steps``, inner knots dropped one
  at a time while BIC falls (``p = 2K - 2`` for ``K`` knots: a rate per knot,
  a place per inner knot). A ramp comes out so; ``shape = "linear"``;
- ``linear-jumps``: a piecewise-linear rate with jumps, for a ramp and a step
  together: a piece per segment of ``steps`` with jumps at its change points,
  each piece straight (two rates) or flat (one); from every piece straight,
  the one change that lowers BIC most is made while one does (a jump dropped,
  joining the pieces beside it, or a piece made flat). ``p`` = the rates plus
  one per jump. Not a candidate when every piece ends flat (that is ``steps``)
  or there is no jump left (that is ``linear``). Written as ``shape =
  "linear"`` with two points at each jump's time; its model is ``linear``;
- ``daily`` (only when the window spans at least two days): a rate per hour of
  the day of the source's clock (UTC for Unix seconds), repeated with
  ``period = 86400``, hour by hour (step, the hour's mean rate) or linear
  between the hours' middles (maximum likelihood); ``p = 24``.

The chosen profile's fit is checked with a **dispersion test within it**:
Pearson's ``X^2 = sum((c - mu)^2 / mu)`` over the windows, against
chi-squared with ``k - p`` degrees of freedom (``p_fit``; small: the counts
vary more than the profile explains, e.g. faster than the windows resolve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from qsim.spec.dists import RateProfile

__all__ = ["ALPHA_CHANGE", "DAY", "MAX_KNOTS", "ConstancyTest", "ProfileFit", "window_counts", "constant_rate_test",
           "fit_profile", "segment_counts"]

#: A rate is taken to change over the window when the test of a constant rate gives p below this.
ALPHA_CHANGE = 1e-3
#: The period of an hour-of-day profile (s); a window of at least two of them is tried for one.
DAY = 86400.0
#: Inner knots of a piecewise-linear fit are dropped one at a time (by BIC) only up to this many knots.
MAX_KNOTS = 24


@dataclass(frozen=True)
class ConstancyTest:
    """The test of a constant rate (see the module docstring): the p-values and the counts it used."""

    p_change: float
    p_ks: float
    p_over: float
    p_under: float
    dispersion: float
    windows: int
    width: float

    @property
    def changed(self) -> bool:
        """The rate changes over the window (``p_change <`` :data:`ALPHA_CHANGE`)."""
        return self.p_change < ALPHA_CHANGE


@dataclass(frozen=True)
class ProfileFit:
    """The rate profile chosen for arrivals that do not keep one rate.

    Attributes:
        profile: The profile (time 0 = the window's start), or None when ``model`` is ``constant``.
        model: ``constant`` | ``steps`` | ``linear`` (``linear-jumps`` too) | ``daily``.
        shape: The profile's shape (``step`` | ``linear``).
        change_points: ``steps``: where the rate jumps (s from the window's start); ``linear``: the change
            points of ``steps`` its knots started from, or (``linear-jumps``) where it jumps.
        bic: BIC of every candidate tried, by model name (``daily-step``, ``daily-linear`` apart).
        p_fit: Dispersion test of the window counts within the chosen profile (``X^2``, ``k - p`` df).
        latest: What the queue gets now: ``steps``, the mean rate of the last segment (from
            ``latest_from``); ``linear``, the rate at the window's end; ``daily``, the last hour's mean.
        peak: The highest rate the profile reaches.
    """

    profile: RateProfile | None
    model: str
    shape: str
    change_points: tuple[float, ...]
    params: int
    loglik: float
    bic: dict[str, float]
    p_fit: float
    chi2: float
    latest: float
    latest_from: float
    peak: float
    mean: float
    segments: int = 1
    expected: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The fit's figures for the JSON report."""
        return {"model": self.model, "shape": self.shape, "segments": self.segments,
                "change_points": list(self.change_points), "p_fit": self.p_fit, "bic": dict(self.bic),
                "latest_rate": self.latest, "latest_from": self.latest_from, "peak_rate": self.peak}


def window_counts(rel: np.ndarray, span: float, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Counts of the times ``rel`` (from the window's start) in ``k`` equal windows and the windows' edges:
    about ten arrivals per window, ``20 <= k <= 2000``."""
    n = int(rel.size if n is None else n)
    k = int(min(2000, max(20, n // 10)))
    edges = np.linspace(0.0, span, k + 1)
    width = span / k
    counts = np.bincount(np.clip((rel / width).astype(np.int64), 0, k - 1), minlength=k)
    return counts, edges


def constant_rate_test(rel: np.ndarray, span: float, counts: np.ndarray) -> ConstancyTest:
    """The test of one constant rate over the window (see the module docstring)."""
    k = counts.size
    mean_c = float(counts.mean())
    disp = float(counts.var(ddof=1) / mean_c) if mean_c > 0 and k > 1 else math.nan
    chi = (k - 1) * disp
    p_over, p_under = (float(stats.chi2.sf(chi, k - 1)), float(stats.chi2.cdf(chi, k - 1))) \
        if math.isfinite(disp) else (1.0, 1.0)
    p_ks = float(stats.kstest(np.clip(rel / span, 0.0, 1.0), "uniform").pvalue) if rel.size else 1.0
    return ConstancyTest(p_change=min(1.0, 2 * min(p_ks, p_over)), p_ks=p_ks, p_over=p_over, p_under=p_under,
                         dispersion=disp, windows=k, width=span / k)


# --------------------------------------------------------------------------- candidates


def _loglik(counts: np.ndarray, mu: np.ndarray) -> float:
    """Poisson log-likelihood of the counts (without the ``log c!`` terms every candidate shares)."""
    mu = np.maximum(mu, 0.0)
    if np.any((mu <= 0) & (counts > 0)):
        return -math.inf
    return float(np.sum(special.xlogy(counts, mu)) - mu.sum())


def _expected(profile: RateProfile, edges: np.ndarray) -> np.ndarray:
    return np.diff(profile.cumulative(edges))


def segment_counts(counts: np.ndarray, width: float, penalty: float) -> list[int]:
    """The change points (window indices, ascending) of the optimal partition of ``counts`` into
    segments of constant Poisson rate, each segment costing ``penalty`` (log-likelihood units).

    Optimal partitioning with PELT pruning (Killick, Fearnhead & Eckley 2012): exact.
    """
    k = counts.size
    csum = np.concatenate([[0.0], np.cumsum(counts, dtype=float)])
    best = np.full(k + 1, math.inf)
    best[0] = -penalty
    last = np.zeros(k + 1, dtype=np.int64)
    alive = np.array([0], dtype=np.int64)
    for b in range(1, k + 1):
        n = csum[b] - csum[alive]
        length = (b - alive) * width
        cost = -(special.xlogy(n, n / length) - n)  # minus the segment's log-likelihood at its MLE rate
        total = best[alive] + cost
        j = int(np.argmin(total))
        best[b] = total[j] + penalty
        last[b] = alive[j]
        alive = np.append(alive[total <= best[b]], b)  # PELT: a start that cannot win again is dropped
    cps = []
    b = k
    while b > 0:
        b = int(last[b])
        if b > 0:
            cps.append(b)
    return sorted(cps)


def _seg_loglik(n1: np.ndarray, l1: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n1 > 0, special.xlogy(n1, n1 / np.where(l1 > 0, l1, 1.0)) - n1, 0.0) \
            - np.where((n1 > 0) & (l1 <= 0), np.inf, 0.0)


def _refine(rel: np.ndarray, bounds: list[float], width: float) -> list[float]:
    """Move each inner boundary, within ``width`` either way, to the arrival time that maximises the
    likelihood of the two segments beside it (the ML change point of a Poisson process is at an arrival)."""
    out = list(bounds)
    for j in range(1, len(out) - 1):
        lo, hi, at = out[j - 1], out[j + 1], out[j]
        a, b = max(lo, at - width), min(hi, at + width)
        i0, i1 = np.searchsorted(rel, a, "left"), np.searchsorted(rel, b, "right")
        cand = rel[i0:i1]
        # tau = an arrival (it starts the right segment) or just after it (it ends the left one)
        taus = np.concatenate([[a, b], cand, np.nextafter(cand, np.inf)])
        taus = taus[(taus > lo) & (taus < hi)]
        if taus.size == 0:
            continue
        n_lo = np.searchsorted(rel, lo, "left")
        n_hi = np.searchsorted(rel, hi, "left")
        n1 = np.searchsorted(rel, taus, "left") - n_lo
        n2 = n_hi - n_lo - n1
        ll = _seg_loglik(n1.astype(float), taus - lo) + _seg_loglik(n2.astype(float), hi - taus)
        out[j] = float(taus[int(np.argmax(ll))])
    return out


def _merge(rel: np.ndarray, bounds: list[float], penalty: float) -> list[float]:
    """Merge neighbouring segments while that raises the penalised likelihood (after :func:`_refine`)."""
    out = list(bounds)
    while len(out) > 2:
        b = np.asarray(out)
        n = np.diff(np.append(np.searchsorted(rel, b[:-1], "left"), rel.size)).astype(float)
        length = np.diff(b)
        ll = _seg_loglik(n, length)
        gain = _seg_loglik(n[:-1] + n[1:], length[:-1] + length[1:]) - ll[:-1] - ll[1:] + penalty
        j = int(np.argmax(gain))
        if gain[j] <= 0:
            break
        del out[j + 1]
    return out


def _round_t(t: float) -> float:
    return float(round(t, 3))


def _round_r(r: float) -> float:
    return float(f"{r:.6g}") if r > 0 else 0.0


def _step_profile(rel: np.ndarray, bounds: list[float]) -> tuple[RateProfile, np.ndarray]:
    b = np.asarray(bounds)
    n = np.diff(np.append(np.searchsorted(rel, b[:-1], "left"), rel.size))
    rates = n / np.diff(b)
    pts = [(_round_t(t), _round_r(r)) for t, r in zip(b[:-1], rates)]
    pts.append((_round_t(b[-1]), _round_r(rates[-1])))  # the window's end: the profile's mean is the window's
    return RateProfile(points=tuple(pts), shape="step"), rates


def _nonnegative_poisson(basis: np.ndarray, counts: np.ndarray, start: np.ndarray, *,
                         iterations: int = 100) -> np.ndarray:
    """The rates ``r >= 0`` that maximise the Poisson likelihood of ``counts`` with means ``basis @ r``
    (a concave problem): projected Newton steps, halved until the likelihood rises."""
    col = basis.sum(axis=0)
    scale = max(float(np.max(start)), 1e-9)
    r = np.maximum(start, 1e-6 * scale)

    def nll(r: np.ndarray) -> float:
        mu = basis @ r
        if np.any((mu <= 0) & (counts > 0)):
            return math.inf
        return float(mu.sum() - np.sum(special.xlogy(counts, mu)))

    f = nll(r)
    for _ in range(iterations):
        mu = np.maximum(basis @ r, 1e-300)
        w = counts / mu
        g = col - basis.T @ w
        hess = (basis * (w / mu)[:, None]).T @ basis
        free = (r > 0) | (g < 0)  # a rate at 0 whose gradient pushes it below stays there
        if not free.any():
            break
        d = np.zeros_like(r)
        hf = hess[np.ix_(free, free)]
        d[free] = np.linalg.lstsq(hf + 1e-12 * np.trace(hf) * np.eye(hf.shape[0]), g[free], rcond=None)[0]
        flat = free & (np.diag(hess) <= 1e-12 * max(float(np.max(np.diag(hess))), 1e-300))
        d[flat] = r[flat]  # no counts under this knot: its rate goes to 0
        t, new, fn = 1.0, r, f
        while t > 1e-10:
            new = np.maximum(r - t * d, 0.0)
            fn = nll(new)
            if fn < f:
                break
            t /= 2
        if not fn < f:
            break
        done = f - fn <= 1e-10 * max(1.0, abs(f))
        r, f = new, fn
        if done:
            break
    return np.asarray(r, dtype=float)


def _hats(edges: np.ndarray, knots: np.ndarray, period: float | None) -> np.ndarray:
    """The counts each window expects of the piecewise-linear profile through ``knots`` at rate 1 at one
    knot and 0 at the others: a column per knot."""
    basis = np.empty((edges.size - 1, knots.size))
    for j in range(knots.size):
        unit = tuple((float(t), 1.0 if i == j else 0.0) for i, t in enumerate(knots))
        basis[:, j] = _expected(RateProfile(points=unit, shape="linear", period=period), edges)
    return basis


def _linear_ml(counts: np.ndarray, edges: np.ndarray, knots: np.ndarray, start: np.ndarray,
               period: float | None, tied: np.ndarray | None = None,
               basis: np.ndarray | None = None) -> tuple[RateProfile, float]:
    """The piecewise-linear profile through ``knots`` whose knot rates maximise the likelihood of the counts.

    ``tied``: per knot, the index of its rate (knots with one index share one rate: a flat piece); default
    a rate of its own each. ``basis``: :func:`_hats` of the knots, when already computed."""
    k = knots.size
    if basis is None:
        basis = _hats(edges, knots, period)
    start = np.asarray(start, dtype=float)
    if tied is not None:
        share = np.zeros((k, int(tied.max()) + 1))
        share[np.arange(k), tied] = 1.0
        rt = _nonnegative_poisson(basis @ share, counts.astype(float), (share.T @ start) / share.sum(axis=0))
        r = rt[tied]
    else:
        r = _nonnegative_poisson(basis, counts.astype(float), start)
    if not np.any(r > 0):
        r = np.maximum(start, 0.0)
    prof = RateProfile(points=tuple((_round_t(float(t)), _round_r(float(v))) for t, v in zip(knots, r)),
                       shape="linear", period=period)
    return prof, _loglik(counts, _expected(prof, edges))


def _hours(origin: float, span: float) -> tuple[np.ndarray, float]:
    """Seconds the window ``[origin, origin + span)`` spends in each hour of the day; the phase of its start."""
    phase = origin % DAY
    days = np.arange(-1, int(span // DAY) + 2)[:, None]
    starts = days * DAY + np.arange(24)[None, :] * 3600.0 - phase  # hour starts, relative to the window's start
    exposure = np.clip(np.minimum(starts + 3600.0, span) - np.maximum(starts, 0.0), 0.0, None).sum(axis=0)
    return exposure, phase


def _daily(rel: np.ndarray, counts: np.ndarray, edges: np.ndarray, span: float,
           origin: float) -> list[tuple[str, RateProfile, float, int]]:
    exposure, phase = _hours(origin, span)
    hour = (((rel + phase) % DAY) // 3600).astype(np.int64)
    per_hour = np.bincount(np.clip(hour, 0, 23), minlength=24)
    rates = np.where(exposure > 0, per_hour / np.where(exposure > 0, exposure, 1.0), 0.0)
    at = (np.arange(24) * 3600.0 - phase) % DAY  # where each hour starts, in the profile's time
    order = np.argsort(at, kind="stable")
    step = RateProfile(points=tuple((_round_t(float(at[h])), _round_r(float(rates[h]))) for h in order),
                       shape="step", period=DAY)
    out = [("daily-step", step, _loglik(counts, _expected(step, edges)), 24)]
    mids = (at + 1800.0) % DAY
    order = np.argsort(mids, kind="stable")
    lin, ll = _linear_ml(counts, edges, mids[order], rates[order], DAY)
    out.append(("daily-linear", lin, ll, 24))
    return out


def _linear_candidates(counts: np.ndarray, edges: np.ndarray, span: float, bounds: list[float], rates: np.ndarray,
                       ln_n: float, to_beat: float = math.inf) -> tuple[RateProfile, float, int]:
    """The best piecewise-linear profile by BIC: a trend (knots at the window's ends), or knots at the ends
    and the middles of the segments of ``steps``, inner knots dropped one at a time while BIC falls (not
    tried when even dropping every inner knot at no loss could not beat ``to_beat``, another candidate's BIC:
    fewer knots never fit better)."""
    n = float(counts.sum())
    trend, ll = _linear_ml(counts, edges, np.array([0.0, span]), np.full(2, n / span), None)
    best = (trend, ll, 2)
    m = len(bounds) - 1
    if m < 2:
        return best
    mids = np.array([(a + b) / 2 for a, b in zip(bounds[:-1], bounds[1:])])
    knots = np.unique(np.concatenate([[0.0], mids, [span]]))
    prof, ll = _linear_ml(counts, edges, knots, np.interp(knots, mids, rates), None)

    def bic(ll: float, k: int) -> float:
        return -2 * ll + (2 * k - 2) * ln_n

    cur = (prof, ll, knots)
    hopeless = bic(ll, knots.size) - (knots.size - 2) * 2 * ln_n >= min(to_beat, bic(best[1], 2))
    while not hopeless and cur[2].size > 2 and cur[2].size <= MAX_KNOTS:
        rates_at = cur[0].rate_at(cur[2])
        tries = []
        for j in range(1, cur[2].size - 1):
            kn = np.delete(cur[2], j)
            p2, l2 = _linear_ml(counts, edges, kn, np.delete(rates_at, j), None)
            tries.append((p2, l2, kn))
        nxt = max(tries, key=lambda c: c[1])
        if bic(nxt[1], nxt[2].size) >= bic(cur[1], cur[2].size):
            break
        cur = nxt
    if bic(cur[1], cur[2].size) < bic(best[1], 2):
        best = (cur[0], cur[1], 2 * cur[2].size - 2)
    return best


def _jump_knots(jumps: list[float], span: float) -> np.ndarray:
    """The knots of straight pieces between ``jumps``: ``0, j1, j1, j2, j2, ..., span`` (two knots at one time
    make a jump)."""
    return np.array([0.0, *[t for j in jumps for t in (j, j)], span])


def _jumps_candidate(counts: np.ndarray, edges: np.ndarray, span: float, bounds: list[float], rates: np.ndarray,
                     ln_n: float) -> tuple[RateProfile, float, int, list[float]] | None:
    """The best piecewise-linear profile with jumps by BIC: a piece per segment of ``steps``, jumps at its
    change points; each piece straight (its two end rates by maximum likelihood) or flat (one rate). From
    every piece straight, the one change that lowers BIC most is made while one does: a jump dropped (the
    pieces beside it joined into one straight piece) or a piece made flat. ``p`` = the rates plus a place per
    jump. None when ``steps`` has no change point, when it has more pieces than :data:`MAX_KNOTS` allows
    knots, or when every piece ends flat (that is ``steps``)."""
    if len(bounds) < 3 or 2 * (len(bounds) - 1) > MAX_KNOTS:
        return None
    mids = [(a + b) / 2 for a, b in zip(bounds[:-1], bounds[1:])]
    bases: dict[tuple[float, ...], np.ndarray] = {}

    def fit(js: tuple[float, ...], flat: frozenset[int]) -> tuple[RateProfile, float, int]:
        knots = _jump_knots(list(js), span)
        if js not in bases:
            bases[js] = _hats(edges, knots, None)
        tied, rate = [], 0
        for piece in range(len(js) + 1):  # knots 2i and 2i + 1 bound piece i
            tied += [rate, rate] if piece in flat else [rate, rate + 1]
            rate += 1 if piece in flat else 2
        prof, ll = _linear_ml(counts, edges, knots, np.interp(knots, mids, rates), None, np.array(tied), bases[js])
        return prof, ll, rate + len(js)

    def bic(ll: float, p: int) -> float:
        return -2 * ll + p * ln_n

    jumps, flat = tuple(bounds[1:-1]), frozenset[int]()
    prof, ll, p = fit(jumps, flat)
    while True:
        # drop jump i: pieces i and i + 1 become one straight piece, the pieces after it move down one
        moves = [(tuple(t for t in jumps if t != j),
                  frozenset(f if f < i else f - 1 for f in flat if f not in (i, i + 1))) for i, j in enumerate(jumps)]
        moves += [(jumps, flat | {i}) for i in range(len(jumps) + 1) if i not in flat]
        tries = [(js, fl, *fit(js, fl)) for js, fl in moves]
        if not tries:
            break
        js, fl, p2, l2, k2 = min(tries, key=lambda c: bic(c[3], c[4]))
        if bic(l2, k2) >= bic(ll, p):
            break
        jumps, flat, prof, ll, p = js, fl, p2, l2, k2
    if not jumps or len(flat) == len(jumps) + 1:
        return None
    return prof, ll, p, list(jumps)


def fit_profile(rel: np.ndarray, span: float, counts: np.ndarray, edges: np.ndarray, *,
                origin: float = 0.0) -> ProfileFit:
    """The rate profile of arrivals at ``rel`` (sorted, seconds from the window's start) over ``[0, span]``,
    chosen by BIC among the candidates of the module docstring.

    Args:
        counts, edges: Their counts in equal windows (:func:`window_counts`).
        origin: The window's start on the source's clock (the hours of ``daily`` are that clock's:
            UTC for Unix seconds).
    """
    n = max(int(rel.size), 1)
    ln_n = math.log(n)
    width = float(edges[1] - edges[0])
    cands: list[tuple[str, RateProfile | None, float, int, list[float]]] = []
    const_mu = np.full(counts.size, n / span * width)
    cands.append(("constant", None, _loglik(counts, const_mu), 1, []))
    cps = segment_counts(counts, width, ln_n)
    bounds = _merge(rel, _refine(rel, [0.0] + [float(edges[i]) for i in cps] + [span], width), ln_n)
    m = len(bounds) - 1
    rates = np.array([n / span])
    if m > 1:
        step, rates = _step_profile(rel, bounds)
        cands.append(("steps", step, _loglik(counts, _expected(step, edges)), 2 * m - 1, bounds[1:-1]))
    lin, ll, p = _linear_candidates(counts, edges, span, bounds, rates, ln_n,
                                    to_beat=-2 * cands[-1][2] + cands[-1][3] * ln_n)
    cands.append(("linear", lin, ll, p, bounds[1:-1]))
    jumpy = _jumps_candidate(counts, edges, span, bounds, rates, ln_n) if m > 1 else None
    if jumpy is not None:
        cands.append(("linear-jumps", jumpy[0], jumpy[1], jumpy[2], jumpy[3]))
    if span >= 2 * DAY:
        cands.extend((name, prof, ll, p, []) for name, prof, ll, p in _daily(rel, counts, edges, span, origin))
    bic = {name: -2 * ll + p * ln_n for name, _, ll, p, _ in cands}
    name, prof, ll, p, cp = min(cands, key=lambda c: bic[c[0]])
    mu = const_mu if prof is None else _expected(prof, edges)
    used = mu > 0
    chi2 = float(np.sum((counts[used] - mu[used]) ** 2 / mu[used]))
    df = max(int(used.sum()) - p, 1)
    p_fit = float(stats.chi2.sf(chi2, df))
    mean = n / span
    if prof is None:
        return ProfileFit(profile=None, model="constant", shape="", change_points=(), params=p, loglik=ll, bic=bic,
                          p_fit=p_fit, chi2=chi2, latest=mean, latest_from=0.0, peak=mean, mean=mean,
                          expected=mu)
    if name.startswith("daily"):
        latest_from = max(0.0, span - 3600.0)
        peak = float(np.max(prof.rate_at(np.linspace(0.0, DAY, 24 * 60, endpoint=False))))
        latest = prof.mean_between(latest_from, span)
        segments = 24
    elif name == "linear":
        latest_from, peak = span, prof.peak
        latest = float(prof.rate_at(span))
        segments = len(prof.points) - 1
    elif name == "linear-jumps":
        cp = [t for t, _ in prof.points[1:-1:2]]  # each jump's time, as written
        latest_from, peak = span, prof.peak
        latest = float(prof.rate_at(span))
        segments = len(cp) + 1
    else:
        cp = [t for t, _ in prof.points[1:-1]]  # as written (rounded to the millisecond)
        latest_from, peak = cp[-1], prof.peak
        latest = prof.mean_between(latest_from, span)
        segments = m
    return ProfileFit(profile=prof, model=name.split("-")[0], shape=prof.shape, change_points=tuple(cp), params=p,
                      loglik=ll, bic=bic, p_fit=p_fit, chi2=chi2, latest=latest, latest_from=latest_from, peak=peak,
                      mean=mean, segments=segments, expected=mu)
