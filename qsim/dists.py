"""Distributions of service times and arrival processes.

Every service distribution knows its analytic ``mean``, ``variance`` and squared
coefficient of variation ``scv`` (what the closed forms need) and draws samples
from an explicit :class:`numpy.random.Generator` (never a global seed).

Arrival processes produce the arrival times of one job type in ``[0, duration)``
and know their mean ``rate`` (jobs per second) and the ``scv`` of their
interarrival times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

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
]


# --------------------------------------------------------------------------- service


class Distribution:
    """A non-negative service-time distribution (seconds)."""

    kind: ClassVar[str] = ""
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
    def mean(self) -> float:  # type: ignore[override]
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
    def mean(self) -> float:  # type: ignore[override]
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
    rate: float

    @property
    def scv(self) -> float:
        """Squared coefficient of variation of the interarrival times."""
        raise NotImplementedError

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        """Sorted arrival times in ``[0, duration)``."""
        raise NotImplementedError


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
    arrives at time 0.
    """

    kind: ClassVar[str] = "burst"
    rate: float
    size: int

    @property
    def scv(self) -> float:
        # interarrival times are 0 (size-1 times) and size/rate (once)
        return float(self.size - 1)

    def times(self, rng: np.random.Generator, duration: float) -> np.ndarray:
        period = self.size / self.rate
        batches = np.arange(math.ceil(duration / period - 1e-9), dtype=float) * period
        return np.repeat(batches, self.size)


@dataclass(frozen=True, kw_only=True)
class TraceArrivals(Arrival):
    """Replays arrival times (seconds from the start) read from a CSV file."""

    kind: ClassVar[str] = "trace"
    path: Path
    at: tuple[float, ...] = field(repr=False)

    @property
    def rate(self) -> float:  # type: ignore[override]
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
