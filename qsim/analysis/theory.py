"""Closed forms from queueing theory, and :func:`predict` for a whole Scenario.

The pure functions take numbers and return numbers:

* Erlang B / Erlang C for M/M/c (:func:`erlang_b`, :func:`erlang_c`), the M/M/c
  mean wait, wait-time tail and quantiles, and mean latency (sojourn time);
* the Allen–Cunneen approximation for G/G/c (:func:`allen_cunneen_wait_mean`);
* Cobham's formula for non-preemptive priority M/M/c (:func:`cobham_waits`).

Arguments are validated (``ValueError`` quoting the bad value).

Unstable systems (``rho = lam / (c * mu) >= 1``) never raise in the pure
functions: they return the limiting value, so a sweep can cross the boundary.
:func:`erlang_c` returns ``1.0`` (every job waits) and every waiting time,
latency and wait quantile is ``math.inf`` (for Cobham: each class ``k`` with
``sigma_k >= 1``). :func:`predict`, which answers for a scenario, raises
:class:`~qsim.errors.TheoryNotApplicable` instead (``"unstable: rho = 1.2 >= 1"``).

Times are seconds, rates per second.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

from qsim.errors import TheoryNotApplicable

if TYPE_CHECKING:  # pragma: no cover
    from qsim.spec.scenario import JobType, Scenario

__all__ = [
    "erlang_b",
    "erlang_c",
    "mmc_wait_mean",
    "mmc_wait_sf",
    "mmc_wait_quantile",
    "mmc_latency_mean",
    "allen_cunneen_wait_mean",
    "cobham_waits",
    "TheoryResult",
    "predict",
    "MODEL_MMC",
    "MODEL_GGC",
    "MODEL_PRIORITY",
]

MODEL_MMC = "M/M/c"
MODEL_GGC = "G/G/c (Allen-Cunneen)"
MODEL_PRIORITY = "M/M/c priority (Cobham)"

_QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))

# --------------------------------------------------------------------------- validation


def _servers(c: object) -> int:
    if isinstance(c, bool) or not isinstance(c, Integral) or int(c) < 1:
        raise ValueError(f"c (servers) must be an integer >= 1, got {c!r}")
    return int(c)


def _nonneg(name: str, x: object) -> float:
    if isinstance(x, bool) or not isinstance(x, Real) or not math.isfinite(float(x)) or x < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    return float(x)


def _positive(name: str, x: object) -> float:
    if isinstance(x, bool) or not isinstance(x, Real) or not math.isfinite(float(x)) or x <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


# --------------------------------------------------------------------------- M/M/c


def erlang_b(c: int, a: float) -> float:
    """Erlang B blocking probability of M/M/c/c with offered load ``a = lam/mu``.

    Computed with the stable recursion ``B(0) = 1``,
    ``B(k) = a B(k-1) / (k + a B(k-1))`` (O(c), no factorials; fine for c in
    the thousands and beyond).
    """
    c = _servers(c)
    a = _nonneg("a (offered load)", a)
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(c: int, a: float) -> float:
    """Erlang C: probability that an arrival waits, P(W > 0), in M/M/c.

    ``a = lam/mu`` is the offered load and ``rho = a/c``. Computed from Erlang B:
    ``C = B / (1 - rho (1 - B))``. Returns ``1.0`` when ``rho >= 1``.
    """
    c = _servers(c)
    a = _nonneg("a (offered load)", a)
    rho = a / c
    if rho >= 1.0:
        return 1.0
    b = erlang_b(c, a)
    return b / (1.0 - rho * (1.0 - b))


def _mmc_args(c: int, lam: float, mu: float) -> tuple[int, float, float]:
    return _servers(c), _nonneg("lam (arrival rate)", lam), _positive("mu (service rate)", mu)


def mmc_wait_mean(c: int, lam: float, mu: float) -> float:
    """Mean wait in queue of M/M/c: ``Wq = C(c, lam/mu) / (c mu - lam)``.

    Returns ``inf`` when ``lam >= c mu``.
    """
    c, lam, mu = _mmc_args(c, lam, mu)
    if lam >= c * mu:
        return math.inf
    return erlang_c(c, lam / mu) / (c * mu - lam)


def mmc_wait_sf(t: float, c: int, lam: float, mu: float) -> float:
    """Wait-time tail of M/M/c (FCFS): ``P(W > t) = C(c, lam/mu) exp(-(c mu - lam) t)``.

    Returns ``1.0`` for every ``t`` when ``lam >= c mu``.
    """
    t = _nonneg("t", t)
    c, lam, mu = _mmc_args(c, lam, mu)
    if lam >= c * mu:
        return 1.0
    return erlang_c(c, lam / mu) * math.exp(-(c * mu - lam) * t)


def mmc_wait_quantile(q: float, c: int, lam: float, mu: float) -> float:
    """The ``q``-quantile of the M/M/c (FCFS) wait, inverting :func:`mmc_wait_sf`.

    ``t_q = ln(C / (1 - q)) / (c mu - lam)`` when ``1 - q < C``, else ``0``
    (the quantile falls in the probability mass ``P(W = 0) = 1 - C``).
    ``q = 1`` gives ``inf`` unless ``C = 0``; ``inf`` for every ``q > 0`` when
    ``lam >= c mu``.
    """
    if isinstance(q, bool) or not isinstance(q, Real) or not 0.0 <= q <= 1.0:
        raise ValueError(f"q (quantile) must be in [0, 1], got {q!r}")
    c, lam, mu = _mmc_args(c, lam, mu)
    q = float(q)
    if lam >= c * mu:
        return math.inf if q > 0.0 else 0.0
    p_wait = erlang_c(c, lam / mu)
    tail = 1.0 - q
    if tail >= p_wait:
        return 0.0
    if tail == 0.0:
        return math.inf
    return math.log(p_wait / tail) / (c * mu - lam)


def mmc_latency_mean(c: int, lam: float, mu: float) -> float:
    """Mean latency (sojourn: wait + service) of M/M/c: ``W = Wq + 1/mu``."""
    return mmc_wait_mean(c, lam, mu) + 1.0 / _positive("mu (service rate)", mu)


# --------------------------------------------------------------------------- G/G/c


def allen_cunneen_wait_mean(c: int, lam: float, mean_service: float, ca2: float, cs2: float) -> float:
    """Allen–Cunneen approximation of the G/G/c mean wait in queue.

    ``Wq ~= Wq(M/M/c) * (ca2 + cs2) / 2`` with ``mu = 1/mean_service`` and
    ``ca2``, ``cs2`` the squared coefficients of variation of the interarrival
    and service times. Exact for M/M/c (``ca2 = cs2 = 1``) and for M/G/1
    (Pollaczek–Khinchine). Returns ``inf`` when ``lam * mean_service >= c``.
    """
    c = _servers(c)
    lam = _nonneg("lam (arrival rate)", lam)
    mean_service = _positive("mean_service", mean_service)
    ca2 = _nonneg("ca2", ca2)
    cs2 = _nonneg("cs2", cs2)
    return mmc_wait_mean(c, lam, 1.0 / mean_service) * (ca2 + cs2) / 2.0


# --------------------------------------------------------------------------- priorities


def cobham_waits(c: int, lams: Sequence[float], mu: float) -> tuple[float, ...]:
    """Mean wait of each class in non-preemptive priority M/M/c (Cobham, 1954).

    ``W_k = C(c, lam/mu) / (c mu) / ((1 - sigma_{k-1}) (1 - sigma_k))`` with
    ``sigma_k = sum_{i <= k} lam_i / (c mu)``; ``lams`` is ordered high
    priority first and ``lam = sum(lams)``. Assumes every class has the same
    exponential service rate ``mu`` (equal service means across classes).
    A class with ``sigma_k >= 1`` gets ``inf``; the classes above it keep
    their (finite) limit.
    """
    c = _servers(c)
    mu = _positive("mu (service rate)", mu)
    if isinstance(lams, (str, bytes)) or not isinstance(lams, Sequence) or len(lams) == 0:
        raise ValueError(f"lams must be a non-empty sequence of arrival rates, got {lams!r}")
    rates = [_nonneg(f"lams[{i}]", x) for i, x in enumerate(lams)]
    lam = sum(rates)
    w0 = erlang_c(c, lam / mu) / (c * mu)
    waits: list[float] = []
    sigma_prev = 0.0
    for rate in rates:
        sigma = sigma_prev + rate / (c * mu)
        if sigma >= 1.0:
            waits.append(math.inf)
        else:
            waits.append(w0 / ((1.0 - sigma_prev) * (1.0 - sigma)))
        sigma_prev = sigma
    return tuple(waits)


# --------------------------------------------------------------------------- result


def _stats(mean: float, quantiles: Mapping[str, float] | None = None) -> dict[str, float | None]:
    out: dict[str, float | None] = {"mean": mean}
    for key, _ in _QUANTILES:
        out[key] = None if quantiles is None else quantiles[key]
    return out


@dataclass(frozen=True, kw_only=True)
class TheoryResult:
    """What a closed form predicts for a scenario, in the Summary's vocabulary.

    Attributes:
        scenario: the scenario's name.
        model: ``"M/M/c"``, ``"G/G/c (Allen-Cunneen)"`` or ``"M/M/c priority (Cobham)"``.
        c: servers (slots) serving the queues.
        lam: total arrival rate (jobs/s).
        mu: service rate, ``1 / mean_service``.
        mean_service: mean service time (s); a mixture over job types for G/G/c.
        rho: ``lam / (c mu)``.
        p_wait: ``P(wait > 0)`` where exact (M/M/c, Cobham), else ``None``.
        wait: ``{"mean", "p50", "p95", "p99"}`` of enqueue -> start; quantiles
            only for exact M/M/c, else ``None``.
        latency: ``{"mean", "p50", "p95", "p99"}`` of enqueue -> completion;
            quantiles are ``None``.
        utilization: ``rho`` (busy slot fraction).
        throughput: ``lam`` (completed per second in steady state).
        by_type: per job type: ``{"arrival_rate", "priority_class", "wait", "latency"}``.
        notes: assumptions and approximations behind the numbers.
    """

    scenario: str
    model: str
    c: int
    lam: float
    mu: float
    mean_service: float
    rho: float
    p_wait: float | None
    wait: dict[str, float | None]
    latency: dict[str, float | None]
    utilization: float
    throughput: float
    by_type: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (keys as in the Summary: wait, latency, utilization, throughput, by_type)."""
        return {
            "scenario": self.scenario,
            "source": "theory",
            "model": self.model,
            "c": self.c,
            "lambda": self.lam,
            "mu": self.mu,
            "mean_service": self.mean_service,
            "rho": self.rho,
            "p_wait": self.p_wait,
            "throughput": self.throughput,
            "utilization": self.utilization,
            "wait": dict(self.wait),
            "latency": dict(self.latency),
            "by_type": {
                name: {k: (dict(v) if isinstance(v, dict) else v) for k, v in row.items()}
                for name, row in self.by_type.items()
            },
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------- predict


def _check_structure(scenario: Scenario) -> list[Any]:
    """Raise TheoryNotApplicable for what no closed form here covers; return the arriving job types."""
    if tuple(getattr(scenario, "events", ()) or ()):
        raise TheoryNotApplicable("events (sigkill/sigterm/start) are not covered by closed forms")
    scaled = [a.pool for a in getattr(scenario, "autoscalers", ()) or ()]
    if scaled:
        raise TheoryNotApplicable(f"autoscaled pools (pool {scaled[0]!r}: its worker count changes during the run) "
                                  "are not covered by closed forms")
    for job in scenario.jobs:
        if getattr(job, "fan_out", None) is not None or getattr(job, "flow", None) is not None:
            raise TheoryNotApplicable(
                f"flows/fan-out are not covered by closed forms (job type {job.name!r})"
            )
    arriving = [job for job in scenario.jobs if job.arrival is not None]
    if not arriving:
        raise TheoryNotApplicable("no job type has arrivals")
    for job in arriving:
        kind = job.arrival.kind if job.arrival is not None else "no"
        if getattr(job.arrival, "profile", None) is not None:
            raise TheoryNotApplicable(
                f"job type {job.name!r} arrives by a rate profile (time-varying load), which closed forms do "
                "not cover (they assume one steady rate): simulate it (qsim simulate SCENARIO --windows) or "
                "plan it over its windows (qsim plan SCENARIO --slo 'p95_wait<=2 in 95% of windows' ...)"
            )
        if kind != "poisson":
            raise TheoryNotApplicable(
                f"theory needs Poisson arrivals; job type {job.name!r} has {kind} arrivals"
            )
        if job.fail_prob or job.poison_prob:
            raise TheoryNotApplicable(
                f"retries/fail_prob are not covered (job type {job.name!r} has "
                f"fail_prob={job.fail_prob}, poison_prob={job.poison_prob})"
            )
        if job.timeout:
            raise TheoryNotApplicable(
                f"timeouts are not covered (job type {job.name!r} has timeout={job.timeout})"
            )
        if not job.service.mean > 0:
            raise TheoryNotApplicable(
                f"job type {job.name!r} has service mean {job.service.mean}; theory needs > 0"
            )
    return arriving


def _servers_for(scenario: Scenario, used: list[str], notes: list[str]) -> int:
    pools = tuple(scenario.pools)
    if not pools:
        raise TheoryNotApplicable("no pool serves the queues")
    sets = {frozenset(p.queues) for p in pools}
    if len(sets) > 1:
        raise TheoryNotApplicable(
            "several pools serving different queue sets are not covered: "
            + ", ".join(f"{p.name!r} -> {list(p.queues)}" for p in pools)
        )
    served = next(iter(sets))
    for q in used:
        if q not in served:
            raise TheoryNotApplicable(f"queue {q!r} has arrivals but no pool serves it")
    c = sum(int(p.slots) for p in pools)
    if c < 1:
        raise TheoryNotApplicable(f"the pools have {c} slots in all")
    limits = {q.name: q.concurrency_limit for q in scenario.queues if q.name in used}
    binding = {name: lim for name, lim in limits.items() if lim is not None and lim < c}
    if binding:
        if len(used) > 1:
            raise TheoryNotApplicable(
                f"a concurrency_limit below the {c} slots on one of several busy queues "
                f"is not covered ({binding})"
            )
        ((name, lim),) = binding.items()
        notes.append(f"c = concurrency_limit {lim} of queue {name!r} (the pools have {c} slots)")
        c = int(lim)
        if c < 1:
            raise TheoryNotApplicable(f"queue {name!r} has concurrency_limit {lim}")
    return c


def _class_keys(scenario: Scenario, arriving: list[Any], used: list[str]) -> dict[str, tuple[int, ...]]:
    """Priority class key of each arriving job type (smaller runs first)."""
    pools = tuple(scenario.pools)

    def keys_for(pool: Any) -> dict[str, tuple[int, ...]]:
        if pool.policy == "ordered":
            order = list(pool.queues)
            return {j.name: (order.index(j.queue), int(j.priority)) for j in arriving}
        if pool.policy == "wrr" and len(used) > 1:
            return {j.name: (-1, i) for i, j in enumerate(arriving)}  # marker, checked below
        return {j.name: (int(j.priority),) for j in arriving}

    per_pool = [keys_for(p) for p in pools]
    keys = per_pool[0]
    if all(len(set(k.values())) <= 1 for k in per_pool):
        return keys
    if any(p.policy == "wrr" for p in pools) and len(used) > 1:
        raise TheoryNotApplicable(
            f"weighted round-robin across several queues ({used}) is not covered"
        )
    if any(k != keys for k in per_pool[1:]):
        raise TheoryNotApplicable("pools that order the queues differently are not covered")
    for q in scenario.queues:
        if q.name in used and q.aging:
            raise TheoryNotApplicable(
                f"priority aging is not covered (queue {q.name!r} has aging={q.aging})"
            )
    return keys


def predict(scenario: Scenario) -> TheoryResult:
    """The closed form that fits ``scenario``, evaluated in steady state.

    One class (a single priority level): M/M/c (Erlang C) when every service is
    exponential with one mean, else Allen–Cunneen with the λ-weighted mixture
    of service times and ``ca2 = 1``. Several priority levels (job priorities
    under policy ``priority``; queue order, then priority, under ``ordered``):
    Cobham's formula, which needs exponential service with equal means.

    Raises:
        TheoryNotApplicable: no closed form here covers the scenario (the
            message says why), or the system is unstable (``rho >= 1``).
    """
    notes: list[str] = []
    arriving = _check_structure(scenario)
    ignored = [j.name for j in scenario.jobs if j.arrival is None]
    if ignored:
        notes.append(f"job types without arrivals ignored: {ignored}")
    used = list(dict.fromkeys(j.queue for j in arriving))
    for q in scenario.queues:
        if q.name in used and q.rate_limit is not None:
            raise TheoryNotApplicable(
                f"rate limits are not covered by closed forms (queue {q.name!r})"
            )
    c = _servers_for(scenario, used, notes)
    load = _Load.of(arriving, c)
    notes += _engine_notes(scenario)
    notes.append("steady state: duration, warmup and seed play no part")
    keys = _class_keys(scenario, arriving, used)
    common = functools.partial(TheoryResult, scenario=str(scenario.name), c=c, lam=load.lam, mu=load.mu,
                               mean_service=load.mean_service, rho=load.rho, utilization=load.rho,
                               throughput=load.lam)
    if len(set(keys.values())) > 1:
        return _priority_classes(common, load, arriving, keys, notes)
    if len(used) > 1:
        notes.append(f"one priority level over queues {used}: treated as one FIFO queue")
    return _one_class(common, load, notes)


@dataclass(frozen=True)
class _Load:
    """The arriving job types' rates and service moments, and the load they put on ``c`` servers."""

    c: int
    rates: dict[str, float]
    means: dict[str, float]
    variances: dict[str, float]
    kinds: dict[str, str]
    lam: float
    mean_service: float
    rho: float

    @property
    def mu(self) -> float:
        return 1.0 / self.mean_service

    @property
    def exponential_equal_means(self) -> bool:
        """Every service exponential with one mean (M/M/c, Cobham)."""
        first = next(iter(self.means.values()))
        return all(k == "exponential" for k in self.kinds.values()) and \
            all(math.isclose(m, first, rel_tol=1e-9) for m in self.means.values())

    @classmethod
    def of(cls, arriving: list[JobType], c: int) -> _Load:
        """Raises TheoryNotApplicable when nothing arrives or the system is unstable (``rho >= 1``)."""
        rates = {j.name: float(j.arrival.rate) for j in arriving if j.arrival is not None}
        lam = sum(rates.values())
        if not lam > 0:
            raise TheoryNotApplicable(f"total arrival rate is {lam}; theory needs > 0")
        means = {j.name: float(j.service.mean) for j in arriving}
        mean_service = sum(rates[n] * means[n] for n in rates) / lam
        rho = lam * mean_service / c
        if rho >= 1.0:
            raise TheoryNotApplicable(
                f"unstable: rho = {rho:.4g} >= 1 (lambda = {lam:g}/s, mean service = "
                f"{mean_service:g} s, c = {c})"
            )
        return cls(c=c, rates=rates, means=means, variances={j.name: float(j.service.variance) for j in arriving},
                   kinds={j.name: j.service.kind for j in arriving}, lam=lam, mean_service=mean_service, rho=rho)


def _engine_notes(scenario: Scenario) -> list[str]:
    """What of the scenario's ``[engine]`` table the closed forms leave out."""
    notes = []
    engine = getattr(scenario, "engine", None)
    fetch = float(getattr(engine, "fetch_overhead", 0.0) or 0.0)
    if fetch:
        notes.append(f"engine.fetch_overhead = {fetch} s is not included")
    ack = float(getattr(engine, "ack_overhead", 0.0) or 0.0)
    if ack:
        notes.append(f"engine.ack_overhead = {ack} s is not included")
    if getattr(engine, "overhead_by_load", None):
        notes.append("engine.overhead_by_load is not included")
    pickup = float(getattr(engine, "pickup_latency", 0.0) or 0.0)
    if pickup:
        notes.append(f"engine.pickup_latency = {pickup} s is not included (it adds exactly that to every wait "
                     "and latency: a constant delay before every job changes no queueing)")
    return notes


def _priority_classes(common: Callable[..., TheoryResult], load: _Load, arriving: list[JobType],
                      keys: dict[str, Any], notes: list[str]) -> TheoryResult:
    """Several priority classes: Cobham's formula (exponential service with equal means, else not applicable)."""
    rates, means, lam, mu, c = load.rates, load.means, load.lam, load.mu, load.c
    if not load.exponential_equal_means:
        bad = next(
            (j for j in arriving if j.service.kind != "exponential"), None
        )
        why = (
            f"job type {bad.name!r} has {bad.service.kind} service"
            if bad is not None
            else f"service means differ: {means}"
        )
        raise TheoryNotApplicable(
            "several priority classes need exponential service with equal means "
            f"(Cobham's formula); {why}"
        )
    order = sorted(set(keys.values()))
    class_rates = [sum(rates[n] for n in rates if keys[n] == k) for k in order]
    waits = cobham_waits(c, class_rates, mu)
    wait_by_class = dict(zip(order, waits, strict=True))
    wait_mean = sum(r * w for r, w in zip(class_rates, waits, strict=True)) / lam
    notes.append("Cobham's formula assumes equal exponential service means across classes")
    notes.append("non-preemptive priority; class waits are means only (no quantiles)")
    by_type = {
        n: {
            "arrival_rate": rates[n],
            "priority_class": order.index(keys[n]),
            "wait": _stats(wait_by_class[keys[n]]),
            "latency": _stats(wait_by_class[keys[n]] + means[n]),
        }
        for n in rates
    }
    return common(
        model=MODEL_PRIORITY, p_wait=erlang_c(c, lam / mu),
        wait=_stats(wait_mean), latency=_stats(wait_mean + load.mean_service),
        by_type=by_type, notes=tuple(notes),
    )


def _one_class(common: Callable[..., TheoryResult], load: _Load, notes: list[str]) -> TheoryResult:
    """One priority level: M/M/c (Erlang C) for exponential service with one mean, else Allen-Cunneen."""
    rates, means, lam, mu, c, mean_service = load.rates, load.means, load.lam, load.mu, load.c, load.mean_service
    if load.exponential_equal_means:
        wait_mean = mmc_wait_mean(c, lam, mu)
        quantiles = {key: mmc_wait_quantile(q, c, lam, mu) for key, q in _QUANTILES}
        wait = _stats(wait_mean, quantiles)
        model, p_wait = MODEL_MMC, erlang_c(c, lam / mu)
    else:
        second = sum(rates[n] * (load.variances[n] + means[n] ** 2) for n in rates) / lam
        cs2 = max(second / mean_service**2 - 1.0, 0.0)
        wait_mean = allen_cunneen_wait_mean(c, lam, mean_service, 1.0, cs2)
        wait = _stats(wait_mean)
        model, p_wait = MODEL_GGC, None
        notes.append(
            f"Allen-Cunneen approximation with ca2 = 1 (Poisson) and cs2 = {cs2:.4g} "
            "(mixture of the job types' service times)"
        )
    by_type = {
        n: {
            "arrival_rate": rates[n],
            "priority_class": 0,
            "wait": dict(wait),
            "latency": _stats(wait_mean + means[n]),
        }
        for n in rates
    }
    return common(
        model=model, p_wait=p_wait, wait=wait, latency=_stats(wait_mean + mean_service),
        by_type=by_type, notes=tuple(notes),
    )
