"""Calibration fits recover known parameters from samples with known distributions."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from qsim.calibrate.arrivals import fit_arrivals
from qsim.calibrate.failures import fit_failures
from qsim.calibrate.measured import data_window, parse_when
from qsim.calibrate.overhead import idle_pickups
from qsim.calibrate.pools import ROUND_TRIP, fit_pools, max_overlap
from qsim.calibrate.service import fit_service
from qsim.errors import CalibrationError
from qsim.spec import dists

N = 5000


# cv <= 1: the mean of 5,000 runs has a standard error of cv / sqrt(5000) <= 1.4%, so 3% is >= 2 standard
# errors (with cv = 2 no estimator could promise 3% at this n)
@pytest.mark.parametrize("truth", [
    dists.Exponential(mean=0.2),
    dists.Gamma(mean=0.5, cv=0.5),
    dists.Gamma(mean=3.0, cv=0.25),
    dists.Lognormal(mean=0.08, cv=0.8),
    dists.Lognormal(mean=2.0, cv=1.0),
])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_service_fit_recovers_mean_and_cv(truth: dists.Distribution, seed: int) -> None:
    # Given n = 5,000 runs drawn from a known distribution
    x = truth.sample(np.random.default_rng(seed), N)
    # When fitted
    fit = fit_service(x)
    # Then the chosen fit has the mean within 3% and the cv within 10%
    true_cv = math.sqrt(truth.scv)
    assert fit.n == N
    assert abs(fit.mean / truth.mean - 1) < 0.03, fit
    assert abs(fit.cv / true_cv - 1) < 0.10, fit
    assert fit.ks < 0.03
    # and the true family (exponential is gamma with cv 1) fits at least as well as the others but for noise
    family = "gamma" if truth.kind == "exponential" else truth.kind
    others = [v["ks"] for k, v in fit.candidates.items() if k != family and not (family == "gamma" and k == "exponential")]
    assert fit.candidates[family]["ks"] <= min(others) + 0.01


def test_service_fit_tells_lognormal_from_gamma() -> None:
    x = dists.Lognormal(mean=1.0, cv=1.5).sample(np.random.default_rng(3), N)
    assert fit_service(x).kind == "lognormal"
    y = dists.Gamma(mean=1.0, cv=0.4).sample(np.random.default_rng(3), N)
    assert fit_service(y).kind == "gamma"


def test_service_shift_and_small_samples_and_constants() -> None:
    rng = np.random.default_rng(4)
    x = dists.Exponential(mean=0.1).sample(rng, N) + 0.004
    shifted = fit_service(x, shift=0.004)
    assert shifted.shift == 0.004 and abs(shifted.mean / 0.1 - 1) < 0.03
    few = fit_service(x[:40])
    assert few.kind == "empirical" and few.n == 40 and "40 runs" in few.note
    assert few.distribution().kind == "empirical" and len(few.distribution().values) == 40  # type: ignore[attr-defined]
    assert fit_service(x, empirical=True).kind == "empirical"
    flat = fit_service(np.full(500, 0.25) + rng.normal(0, 1e-4, 500))
    assert flat.kind == "constant" and abs(flat.mean - 0.25) < 1e-3
    ms = fit_service(np.r_[np.zeros(50), dists.Exponential(mean=0.01).sample(rng, 500)], resolution=1e-3)
    assert ms.sample.min() == pytest.approx(5e-4)  # zero-length runs (ms clocks) become half the resolution
    with pytest.raises(ValueError):
        fit_service(np.array([np.nan]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_dispersion_test_picks_poisson(seed: int) -> None:
    t = dists.PoissonArrivals(rate=20.0).times(np.random.default_rng(seed), 300.0)
    fit = fit_arrivals(t, 0.0, 300.0)
    assert fit.kind == "poisson", fit
    assert abs(fit.rate / 20.0 - 1) < 3 / math.sqrt(fit.n)
    assert 0.8 < fit.dispersion < 1.2


@pytest.mark.parametrize("size", [3, 8, 25])
def test_dispersion_test_picks_burst_and_its_size(size: int) -> None:
    t = dists.BurstArrivals(rate=12.0, size=size).times(np.random.default_rng(0), 200.0)
    fit = fit_arrivals(t, 0.0, 200.0)
    assert (fit.kind, fit.size) == ("burst", size)
    assert fit.rate == pytest.approx(12.0, rel=0.02)
    proc = fit.process()
    assert isinstance(proc, dists.BurstArrivals) and proc.size == size


def test_a_batch_written_over_a_few_milliseconds_is_one_batch() -> None:
    # Given twelve batches of 10 at 20 jobs/s on a 1 ms clock, one of them split by a 4 ms pause of its
    # producer (more than the 2.5 ms a 20 jobs/s stream allows, far less than the 10 ms two batches at 2/s do)
    t = np.concatenate([at + np.arange(10) * 2e-4 + np.where(np.arange(10) >= 5, 0.004 * (k == 3), 0.0)
                        for k, at in enumerate(np.arange(0.0, 6.0, 0.5))]).round(3)
    fit = fit_arrivals(t, 0.0, 6.0, resolution=1e-3)
    # Then the split batch is still one: bursts of 10, grouped at the batches' rate
    assert (fit.kind, fit.size, fit.batch_mean) == ("burst", 10, 10.0)
    assert fit.eps == pytest.approx(0.01)


def test_over_dispersed_traffic_without_batches_is_a_profile_and_constant_traffic_is_constant() -> None:
    rng = np.random.default_rng(5)
    # a rate that switches between 2/s and 30/s every 20 s: counts are over-dispersed, no two arrivals coincide
    parts = [start + dists.PoissonArrivals(rate=r).times(rng, 20.0) for start, r in
             zip(np.arange(0, 400, 20.0), [2.0, 30.0] * 10)]
    drift = fit_arrivals(np.concatenate(parts), 0.0, 400.0)
    assert drift.kind == "profile" and drift.size == 1 and drift.p_change < 1e-3
    assert drift.profile is not None and drift.profile.shape == "step" and len(drift.profile.points) == 21
    steady = fit_arrivals(dists.ConstantArrivals(rate=5.0).times(rng, 100.0), 0.0, 100.0)
    assert steady.kind == "constant" and steady.rate == pytest.approx(5.0)
    trace = fit_arrivals(np.array([1.0, 2.0, 4.0]), 0.5, 5.0, trace=True)
    assert trace.kind == "trace" and list(trace.times) == [0.5, 1.5, 3.5]


def _jobs(rng: np.random.Generator, n: int, poison: float, fail: float, attempts: int) -> tuple[list[str], list[int]]:
    outcomes, failed = [], []
    for _ in range(n):
        if rng.random() < poison:
            outcomes.append("dead")
            failed.append(attempts)
            continue
        k = 0
        while k < attempts and rng.random() < fail:
            k += 1
        outcomes.append("dead" if k == attempts else "completed")
        failed.append(k)
    return outcomes, failed


@pytest.mark.parametrize("poison,fail,attempts", [(0.03, 0.1, 3), (0.0, 0.25, 4), (0.08, 0.0, 2), (0.02, 0.3, 2)])
def test_fail_and_poison_rates_within_their_confidence_intervals(poison: float, fail: float, attempts: int) -> None:
    # Given 20 samples of 2,000 jobs each with known rates, the 95% intervals cover the truth about 95% of the time
    rng = np.random.default_rng(11)
    cover_f = cover_p = 0
    for _ in range(20):
        outcomes, failed = _jobs(rng, 2000, poison, fail, attempts)
        fit = fit_failures(outcomes, failed, [attempts] * len(outcomes))
        assert fit.jobs == 2000
        cover_f += fit.fail_ci[0] <= fail <= fit.fail_ci[1]
        cover_p += fit.poison_ci[0] <= poison <= fit.poison_ci[1]
        assert fit.fail_ci[0] <= fit.fail_prob <= fit.fail_ci[1]
        assert fit.poison_ci[0] <= fit.poison_prob <= fit.poison_ci[1]
        assert abs(fit.fail_prob - fail) < 0.05 and abs(fit.poison_prob - poison) < 0.03
    assert cover_f >= 16 and cover_p >= 16, (cover_f, cover_p)


def test_failures_with_one_attempt_and_without_failures() -> None:
    one = fit_failures(["completed"] * 90 + ["dead"] * 10, [0] * 90 + [1] * 10, [1] * 100)
    assert one.fail_prob == pytest.approx(0.1) and one.poison_prob == 0 and "cannot be told apart" in one.note
    assert one.fail_ci[0] < 0.1 < one.fail_ci[1]
    clean = fit_failures(["completed"] * 1000, [0] * 1000, [3] * 1000)
    assert clean.fail_prob == 0 and clean.poison_prob == 0
    assert 0 < clean.fail_ci[1] < 0.005 and 0 < clean.poison_ci[1] < 0.005
    poison = fit_failures(["dead"] * 50, [3] * 50, [3] * 50)
    assert poison.poison_prob == 1.0
    unknown = fit_failures(["completed", "completed", "dead"], [-1, -1, 2], [2, 2, 2])
    assert unknown.jobs == 1 and unknown.dead == 1


def test_max_overlap_and_pools() -> None:
    assert max_overlap(np.array([0.0, 1.0, 1.0, 5.0]), np.array([1.0, 2.0, 3.0, 6.0])) == 2  # an end before a start
    runs = pd.DataFrame({"worker": ["shop-0"] * 3 + ["shop-1"] * 2 + [""] * 3,
                         "queue": ["a"] * 5 + ["b"] * 3,
                         "start": [0.0, 0.5, 0.6, 0.0, 2.0, 0.0, 0.1, 0.2],
                         "end": [1.0, 1.5, 0.9, 3.0, 2.5, 1.0, 1.0, 1.0]})
    pools = fit_pools(runs, ["a", "b", "c"])
    shop = pools[0]
    assert (shop.name, shop.queues, shop.workers, shop.concurrency, shop.worker_ids) == ("shop", ("a",), 2, 3, 2)
    rest = pools[1]
    assert rest.queues == ("b", "c") and rest.workers == 1 and rest.concurrency == 3 and "no worker ids" in rest.note


def test_a_hand_over_shorter_than_a_round_trip_is_not_one_slot_more() -> None:
    # Given a worker of concurrency 2 whose first slot hands over from a job to the next, the next recorded as
    # started 3 ms before the first one's result reached Redis (a job fetched ahead), while the other slot runs
    runs = pd.DataFrame({"worker": ["shop-0"] * 3, "queue": ["a"] * 3,
                         "start": [0.0, 0.997, 0.5], "end": [1.0, 2.0, 1.5]})
    assert max_overlap(runs["start"].to_numpy(), runs["end"].to_numpy()) == 3  # counted at every instant
    # When its pool is fitted
    (shop,) = fit_pools(runs, ["a"])
    # Then the 3 ms overlap is no third slot
    assert shop.concurrency == 2 and shop.workers == 1
    # and an overlap of a round trip or more still is one: a third job 20 ms into the hand-over
    third = pd.concat([runs, pd.DataFrame({"worker": ["shop-0"], "queue": ["a"], "start": [0.98], "end": [1.2]})])
    assert fit_pools(third, ["a"])[0].concurrency == 3
    # and short runs at once still count: three of 4 ms, 0.5 ms apart, at once for 3 ms (more than half a run)
    short = np.array([0.0, 0.0005, 0.001])
    assert max_overlap(short, short + 0.004, ignore=ROUND_TRIP) == 3
    # and a worker replaced by another 3 ms before its last run ended is no second worker
    spans = pd.DataFrame({"worker": ["shop-0", "shop-1"], "queue": ["a", "a"], "start": [0.0, 0.997],
                          "end": [1.0, 2.0]})
    assert fit_pools(spans, ["a"])[0].workers == 1


def test_idle_pickups_only_count_jobs_that_found_a_free_slot() -> None:
    jobs = pd.DataFrame({"enqueued": [0.0, 0.1, 0.2, 5.0], "started": [0.001, 1.0, 2.0, 5.002]})
    runs = pd.DataFrame({"start": [0.001, 1.0, 2.0, 5.002], "end": [1.0, 2.0, 3.0, 6.0]})
    waits = idle_pickups(jobs, runs, slots=1)
    assert waits == pytest.approx([0.001, 0.002])


def test_parse_when_and_windows() -> None:
    assert parse_when("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_when("1h30m", now=10_000.0) == 10_000.0 - 5400
    assert parse_when("15m", now=1000.0) == 100.0
    assert parse_when("123.5", now=0.0) == 123.5
    assert parse_when("2024-01-01T00:00:00", now=0.0) == 1704067200.0
    assert parse_when("2024-01-01T01:00:00+01:00", now=0.0) == 1704067200.0
    assert parse_when(None, now=0.0) is None
    with pytest.raises(CalibrationError, match="--since must be"):
        parse_when("yesterday", now=0.0)
    # the data's own window reaches half a mean gap beyond its first and last arrival instants
    assert data_window(np.array([0.0, 1.0, 1.0, 2.0]), None, None) == (-0.5, 2.5)
    assert data_window(np.array([0.0, 1.0, 2.0]), 0.2, 1.5) == (0.2, 1.5)
