"""Distributions of service times and arrival processes.

Every service distribution knows its analytic ``mean``, ``variance`` and squared
coefficient of variation ``scv`` (what the closed forms need) and draws samples
from an explicit :class:`numpy.random.Generator` (never a global seed).

Arrival processes produce the arrival times of one job type in ``[0, duration)``
and know their mean ``rate`` (jobs per second) and the ``scv`` of their
interarrival times. A :class:`RateProfile` makes the rate a function of time
(a day's ramp, a peak, a nightly batch): :class:`ProfileArrivals` is the
non-homogeneous Poisson process with that rate, and a :class:`BurstArrivals`
may follow one too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

__all__ = [
    "Distribution",
    "Constant",
    "Exponential",
    "Lognormal",
    "Gamma",
    "Uniform",
    "Empirical",
    "Arrival",
    "PoissonArrivals",
    "ConstantArrivals",
    "BurstArrivals",
    "TraceArrivals",
    "PROFILE_SHAPES",
    "RateProfile",
    "ProfileArrivals",
]


# --------------------------------------------------------------------------- service


class Distribution:
    """A non-negative service-time distribution (seconds)."""

    kind: ClassVar[str] = ""
    if TYPE_CHECKING:  # read-only for every kind: a field of some (Constant), a property of others (Uniform)
        @property
        def mean(self) -> float: ...
    else:
        mean: float

    @property
    def variance(self) -> float:
        raise NotImplementedError

    @property
    def scv(self) -> float:
        """Squared coefficient of variation, variance / mean**2."""
        return self.variance / self.mean**2 if self.mean > 0 else 0.0

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draw ``size`` samples as a float array."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Constant(Distribution):
    """Always ``mean`` seconds."""

    kind: ClassVar[str] = "constant"
    mean: float

    @property
    def variance(self) -> float:
        return 0.0

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return np.full(size, self.mean, dtype=float)


@dataclass(frozen=True, kw_only=True)
class Exponential(Distribution):
    """Exponential with the given mean."""

    kind: ClassVar[str] = "exponential"
    mean: float

    @property
    def variance(self) -> float:
        return self.mean**2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.exponential(self.mean, size)


@dataclass(frozen=True, kw_only=True)
class Lognormal(Distribution):
    """Lognormal parametrised by its own mean and coefficient of variation."""

    kind: ClassVar[str] = "lognormal"
    mean: float
    cv: float

    @property
    def variance(self) -> float:
        return (self.cv * self.mean) ** 2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        sigma2 = math.log1p(self.cv**2)
        mu = math.log(self.mean) - sigma2 / 2
        return rng.lognormal(mu, math.sqrt(sigma2), size)


@dataclass(frozen=True, kw_only=True)
class Gamma(Distribution):
    """Gamma parametrised by its mean and coefficient of variation."""

    kind: ClassVar[str] = "gamma"
    mean: float
    cv: float

    @property
    def variance(self) -> float:
        return (self.cv * self.mean) ** 2

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.cv == 0:
            return np.full(size, self.mean, dtype=float)
        shape = 1.0 / self.cv**2
        return rng.gamma(shape, self.mean / shape, size)


@dataclass(frozen=True, kw_only=True)
class Uniform(Distribution):
    """Uniform on ``[low, high]``."""

    kind: ClassVar[str] = "uniform"
    low: float
    high: float

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    @property
    def variance(self) -> float:
        return (self.high - self.low) ** 2 / 12

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.uniform(self.low, self.high, size)


@dataclass(frozen=True, kw_only=True)
class Empirical(Distribution):
    """Resamples (with replacement) the values read from a CSV file."""

    kind: ClassVar[str] = "empirical"
    path: Path
    values: tuple[float, ...] = field(repr=False)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def variance(self) -> float:
        return float(np.var(self.values))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.choice(np.asarray(self.values, dtype=float), size)


# --------------------------------------------------------------------------- arrivals


class Arrival:
    """An arrival process for one job type; ``rate`` is its mean jobs per second."""

    kind: ClassVar[str] = ""
    if TYPE_CHECKING:  # read-only for every kind: a field of some (Poisson), a property of others (a trace's)
        @property
        def rate(self) -> float: ...
    else:
        rate: float

    @property
    def scv(self) -> float:
        """Squared coefficient of variation of the interarrival times."""
        raise NotImplementedError

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        """Sorted arrival times in ``[0, duration)``."""
        raise NotImplementedError

    def expected_count(self, duration: float) -> float:
        """The expected number of arrivals in ``[0, duration)`` (what :meth:`times` draws), without drawing."""
        return self.rate * duration


@dataclass(frozen=True, kw_only=True)
class PoissonArrivals(Arrival):
    """Poisson process: exponential interarrival times with mean ``1/rate``."""

    kind: ClassVar[str] = "poisson"
    rate: float

    @property
    def scv(self) -> float:
        return 1.0

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        expected = self.rate * duration
        n = int(expected + 6 * math.sqrt(expected) + 16)
        t = np.cumsum(rng.exponential(1.0 / self.rate, n))
        while t[-1] < duration:  # rare: draw more
            more = t[-1] + np.cumsum(rng.exponential(1.0 / self.rate, n))
            t = np.concatenate([t, more])
        return t[t < duration]


@dataclass(frozen=True, kw_only=True)
class ConstantArrivals(Arrival):
    """One arrival every ``1/rate`` seconds, the first at time 0."""

    kind: ClassVar[str] = "constant"
    rate: float

    @property
    def scv(self) -> float:
        return 0.0

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        n = math.ceil(duration * self.rate - 1e-9)
        return np.arange(n, dtype=float) / self.rate


@dataclass(frozen=True, kw_only=True)
class BurstArrivals(Arrival):
    """Batches of ``size`` jobs at once, one batch every ``size/rate`` seconds.

    ``rate`` is the mean job rate, as for the other kinds; the first batch
    arrives at time 0. With a ``profile`` (:class:`RateProfile`) the job rate
    follows it instead: batch ``k`` arrives when ``k * size`` jobs are expected,
    at ``Λ⁻¹(k * size)`` (so batches come closer together at the peak), and
    ``rate`` is the profile's mean.
    """

    kind: ClassVar[str] = "burst"
    rate: float = math.nan
    size: int
    profile: RateProfile | None = None

    def __post_init__(self) -> None:
        if self.profile is not None:
            if not math.isnan(self.rate) and not math.isclose(self.rate, self.profile.mean):
                raise ValueError(f"rate must be left out when a profile gives it, got {self.rate}")
            object.__setattr__(self, "rate", self.profile.mean)
        elif math.isnan(self.rate):
            raise ValueError("a burst needs a rate or a profile")

    @property
    def scv(self) -> float:
        # interarrival times are 0 (size-1 times) and size/rate (once)
        return float(self.size - 1)

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        if self.profile is not None:
            count = math.ceil(float(self.profile.cumulative(duration)) / self.size - 1e-9)
            batches = self.profile.invert(np.arange(count, dtype=float) * self.size)
            return np.repeat(batches[batches < duration], self.size)
        period = self.size / self.rate
        batches = np.arange(math.ceil(duration / period - 1e-9), dtype=float) * period
        return np.repeat(batches, self.size)

    def expected_count(self, duration: float) -> float:
        return float(self.profile.cumulative(duration)) if self.profile is not None else self.rate * duration

    def as_table(self) -> dict[str, Any]:
        """The arrival's TOML keys (a profiled burst writes the profile's keys instead of ``rate``)."""
        if self.profile is None:
            return {"kind": self.kind, "rate": self.rate, "size": self.size}
        return {"kind": self.kind, "size": self.size, **self.profile.as_table()}


@dataclass(frozen=True, kw_only=True)
class TraceArrivals(Arrival):
    """Replays arrival times (seconds from the start) read from a CSV file."""

    kind: ClassVar[str] = "trace"
    path: Path
    at: tuple[float, ...] = field(repr=False)

    @property
    def rate(self) -> float:
        if len(self.at) < 2:
            return 0.0
        return (len(self.at) - 1) / (max(self.at) - min(self.at) or 1.0)

    @property
    def scv(self) -> float:
        gaps = np.diff(np.sort(self.at))
        return float(np.var(gaps) / np.mean(gaps) ** 2) if len(gaps) and np.mean(gaps) > 0 else 0.0

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        t = np.sort(np.asarray(self.at, dtype=float))
        return t[(t >= 0) & (t < duration)]

    def expected_count(self, duration: float) -> float:
        t = np.asarray(self.at, dtype=float)
        return float(np.count_nonzero((t >= 0) & (t < duration)))


# --------------------------------------------------------------------------- rate profiles

PROFILE_SHAPES = ("linear", "step")


@dataclass(frozen=True, kw_only=True)
class RateProfile:
    """A rate (jobs/s) that changes with time, given by points ``(time s, rate)``.

    ``shape = "step"`` holds a point's rate until the next point (two points at
    one time make a jump); ``"linear"`` interpolates between points. Before the
    first point the first rate holds, after the last point the last rate holds.
    With a ``period`` the profile repeats every ``period`` seconds; the segment
    from the last point wraps around to the first point one period later
    (interpolated, for ``linear``). ``scale`` multiplies every rate.

    Everything is exact (no binning): the cumulative rate ``Λ(t)`` is piecewise
    linear (step) or quadratic (linear), and :meth:`invert` solves ``Λ(t) = y``
    in closed form, which is how arrivals are drawn (``t_k = Λ⁻¹(E_k)`` for the
    event times ``E_k`` of a unit-rate Poisson process).

    Raises:
        ValueError: no points, times decreasing or negative, a negative or
            non-finite rate, an unknown shape, a period not longer than the
            span of the points, or a scale <= 0 (the message names the field).
    """

    points: tuple[tuple[float, float], ...]
    shape: str = "linear"
    period: float | None = None
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not self.points:
            raise ValueError("points must hold at least one [time, rate] pair")
        for i, (t, r) in enumerate(self.points):
            if not (math.isfinite(t) and math.isfinite(r)):
                raise ValueError(f"points[{i}] must be finite numbers, got [{t}, {r}]")
            if t < 0:
                raise ValueError(f"points[{i}] time must be >= 0, got {t}")
            if r < 0:
                raise ValueError(f"points[{i}] rate must be >= 0, got {r}")
            if i and t < self.points[i - 1][0]:
                raise ValueError(f"points[{i}] time must not be before the previous point's "
                                 f"({self.points[i - 1][0]}), got {t}")
        if self.shape not in PROFILE_SHAPES:
            raise ValueError(f"shape must be one of {', '.join(PROFILE_SHAPES)}, got {self.shape!r}")
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be > 0, got {self.scale}")
        if self.period is not None:
            last = self.points[-1][0]
            if not (math.isfinite(self.period) and self.period > 0 and self.period >= last):
                raise ValueError(f"period must be > 0 and not shorter than the last point's time ({last}), "
                                 f"got {self.period}")
        if not any(r > 0 for _, r in self.points):
            raise ValueError("points must give some rate > 0 (else nothing ever arrives)")

    # -- the knots: (x, rate at x from the right) over one period, or over the points' span

    @cached_property
    def _knots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Segment starts ``x``, left rates ``r0``, right rates ``r1`` (scaled) and ``Λ`` at each start.

        Segments cover ``[x[0], x[-1]]``; outside it the rate is held (no period)
        or the profile repeats (period: ``x[0] = 0``, ``x[-1] = period``).
        """
        t = np.array([p[0] for p in self.points], dtype=float)
        r = np.array([p[1] for p in self.points], dtype=float) * self.scale
        if self.period is not None:
            P = float(self.period)
            t = np.concatenate([[t[-1] - P], t, [t[0] + P]])  # wrap: last point one period back, first one on
            r = np.concatenate([[r[-1]], r, [r[0]]])
        x0, x1 = t[:-1], t[1:]
        r0 = r[:-1]
        r1 = r[1:] if self.shape == "linear" else r[:-1]
        keep = x1 > x0  # two points at one time: a jump, no segment
        x0, x1, r0, r1 = x0[keep], x1[keep], r0[keep], r1[keep]
        if self.period is not None:  # clip the wrapped segments to [0, period)
            lo, hi = np.maximum(x0, 0.0), np.minimum(x1, float(self.period))
            slope = np.where(x1 > x0, (r1 - r0) / np.where(x1 > x0, x1 - x0, 1.0), 0.0)
            r0, r1 = r0 + slope * (lo - x0), r0 + slope * (hi - x0)
            keep = hi > lo
            x0, x1, r0, r1 = lo[keep], hi[keep], r0[keep], r1[keep]
        if x0.size == 0:  # a single point (or all at one time), no period: a constant rate
            x0, x1 = np.array([t[0]]), np.array([t[0] + 1.0])
            r0 = r1 = np.array([r[-1]])
        area = (r0 + r1) / 2 * (x1 - x0)
        return np.append(x0, x1[-1]), r0, r1, np.concatenate([[0.0], np.cumsum(area)])

    def _held(self) -> tuple[float, float]:
        """Rates held before the first and after the last knot (no period)."""
        return self.points[0][1] * self.scale, self.points[-1][1] * self.scale

    def rate_at(self, t: Any) -> np.ndarray:
        """The rate at time(s) ``t`` (jobs/s; a step's jump belongs to the later rate)."""
        t = np.asarray(t, dtype=float)
        x, r0, r1, _ = self._knots
        if self.period is not None:
            t = np.mod(t, float(self.period))
        i = np.clip(np.searchsorted(x, t, side="right") - 1, 0, r0.size - 1)
        u = np.clip(t - x[i], 0.0, None)
        width = x[i + 1] - x[i]
        out = r0[i] + (r1[i] - r0[i]) * np.minimum(u / width, 1.0)
        if self.period is None:
            before, after = self._held()
            out = np.where(t < x[0], before, np.where(t >= x[-1], after, out))
        return np.asarray(out, dtype=float)

    def cumulative(self, t: Any) -> np.ndarray:
        """``Λ(t)``: the expected number of arrivals in ``[0, t)``."""
        t = np.asarray(t, dtype=float)
        x, r0, r1, lam = self._knots
        if self.period is not None:
            whole, t = np.divmod(t, float(self.period))
            return np.asarray(whole * lam[-1] + self._within(t), dtype=float)
        before, after = self._held()
        lead = x[0] * before  # [0, x[0]) at the first rate
        inside = lead + self._within(np.clip(t, x[0], x[-1]))
        return np.asarray(np.where(t < x[0], t * before, inside + np.clip(t - x[-1], 0, None) * after), dtype=float)

    def _within(self, t: np.ndarray) -> np.ndarray:
        x, r0, r1, lam = self._knots
        i = np.clip(np.searchsorted(x, t, side="right") - 1, 0, r0.size - 1)
        u = np.clip(t - x[i], 0.0, x[i + 1] - x[i])
        slope = (r1[i] - r0[i]) / (x[i + 1] - x[i])
        return np.asarray(lam[i] + r0[i] * u + slope * u * u / 2, dtype=float)

    def invert(self, y: Any) -> np.ndarray:
        """``Λ⁻¹(y)``: the earliest time by which ``y`` arrivals are expected (``y >= 0``)."""
        y = np.asarray(y, dtype=float)
        x, r0, r1, lam = self._knots
        if self.period is not None:
            whole, y = np.divmod(y, lam[-1])
            return np.asarray(whole * float(self.period) + self._invert_within(y), dtype=float)
        before, after = self._held()
        lead = x[0] * before
        total = lead + lam[-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            head = np.where(before > 0, y / before, x[0])
            tail = x[-1] + np.where(after > 0, (y - total) / after, np.inf)
        inside = self._invert_within(np.clip(y - lead, 0.0, lam[-1]))
        return np.asarray(np.where(y < lead, head, np.where(y >= total, tail, inside)), dtype=float)

    def _invert_within(self, y: np.ndarray) -> np.ndarray:
        x, r0, r1, lam = self._knots
        i = np.clip(np.searchsorted(lam, y, side="right") - 1, 0, r0.size - 1)
        d = y - lam[i]
        slope = (r1[i] - r0[i]) / (x[i + 1] - x[i])
        # s/2 u^2 + r0 u = d, in the form that is stable for s -> 0 and for r0 = 0
        with np.errstate(divide="ignore", invalid="ignore"):
            u = 2 * d / (r0[i] + np.sqrt(np.clip(r0[i] ** 2 + 2 * slope * d, 0.0, None)))
        return x[i] + np.where(d > 0, np.nan_to_num(u, nan=0.0, posinf=0.0), 0.0)

    @property
    def mean(self) -> float:
        """The mean rate over one period, or over the points' span (the rate itself if they share one time)."""
        x, _, _, lam = self._knots
        if self.period is not None:
            return float(lam[-1] / self.period)
        if len({p[0] for p in self.points}) == 1:
            return float(self.points[-1][1] * self.scale)
        return float(lam[-1] / (x[-1] - x[0]))

    @property
    def jumps(self) -> tuple[float, ...]:
        """The times where two points share one time: the rate jumps there."""
        return tuple(t for (t, _), (u, _) in zip(self.points, self.points[1:]) if t == u)

    @property
    def peak(self) -> float:
        """The highest rate the profile reaches (jobs/s)."""
        return float(max(r for _, r in self.points) * self.scale)

    def mean_between(self, start: float, end: float) -> float:
        """The mean rate over ``[start, end)``."""
        if end <= start:
            return float(self.rate_at(start))
        return float((self.cumulative(end) - self.cumulative(start)) / (end - start))

    def as_table(self) -> dict[str, Any]:
        """The profile's TOML keys (``points``, ``shape``, and ``period``/``scale`` when set)."""
        out: dict[str, Any] = {"points": [[_num_out(t), _num_out(r)] for t, r in self.points], "shape": self.shape}
        if self.period is not None:
            out["period"] = self.period
        if self.scale != 1.0:
            out["scale"] = self.scale
        return out


def _num_out(x: float) -> float | int:
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


@dataclass(frozen=True, kw_only=True)
class ProfileArrivals(Arrival):
    """A non-homogeneous Poisson process whose rate follows a :class:`RateProfile`.

    Drawn exactly, by inverting the cumulative rate: with ``E_k`` the event times
    of a unit-rate Poisson process, ``t_k = Λ⁻¹(E_k)``. ``rate`` is the profile's
    mean rate (over one period, or the points' span).
    """

    kind: ClassVar[str] = "profile"
    profile: RateProfile

    @property
    def rate(self) -> float:
        return self.profile.mean

    @property
    def scv(self) -> float:
        return 1.0  # Poisson at every moment; over a whole run the counts are over-dispersed by the profile

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        expected = float(self.profile.cumulative(duration))
        n = int(expected + 6 * math.sqrt(expected) + 16)
        e = np.cumsum(rng.exponential(1.0, n))
        while e[-1] < expected:  # rare: draw more
            e = np.concatenate([e, e[-1] + np.cumsum(rng.exponential(1.0, n))])
        t = self.profile.invert(e[e < expected])
        return np.sort(t[t < duration])

    def expected_count(self, duration: float) -> float:
        return float(self.profile.cumulative(duration))

    def as_table(self) -> dict[str, Any]:
        """The arrival's TOML keys."""
        return {"kind": self.kind, **self.profile.as_table()}
