"""Closed forms in qsim.analysis.theory: known values, identities, and predict()."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from qsim.analysis import theory
from qsim.analysis.theory import (
    TheoryResult,
    allen_cunneen_wait_mean,
    cobham_waits,
    erlang_b,
    erlang_c,
    mmc_latency_mean,
    mmc_wait_mean,
    mmc_wait_quantile,
    mmc_wait_sf,
    predict,
)
from qsim.errors import TheoryNotApplicable
from qsim.spec.scenario import Scenario


def erlang_c_direct(c: int, a: float) -> float:
    """Textbook Erlang C in log space (independent of the Erlang B recursion)."""
    rho = a / c
    terms = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)] if a > 0 else [0.0]
    top = c * math.log(a) - math.lgamma(c + 1) - math.log(1 - rho)
    m = max(max(terms), top)
    s = sum(math.exp(t - m) for t in terms)
    return math.exp(top - m) / (s + math.exp(top - m))


# --------------------------------------------------------------------------- Erlang B/C


@pytest.mark.parametrize(
    ("c", "a", "expected"),
    [
        (1, 0.5, 0.5),          # M/M/1: P(wait) = rho
        (2, 1.0, 1 / 3),        # by hand: B = 0.2, C = 0.2 / 0.6
        (5, 4.0, 0.5541),       # textbook table value
        (10, 8.0, 0.4092),      # textbook table value
    ],
)
def test_erlang_c_known_values(c: int, a: float, expected: float) -> None:
    assert erlang_c(c, a) == pytest.approx(expected, abs=1e-4)


def test_erlang_b_known_value() -> None:
    # Given B(2, 1) = (1/2) / (1 + 1 + 1/2)
    assert erlang_b(2, 1.0) == pytest.approx(0.2)
    assert erlang_b(3, 0.0) == 0.0


@pytest.mark.parametrize(("c", "a"), [(1, 0.9), (3, 2.5), (20, 15.0), (200, 190.0), (3000, 2950.0)])
def test_erlang_c_matches_direct_formula_up_to_thousands(c: int, a: float) -> None:
    got = erlang_c(c, a)
    assert 0.0 < got < 1.0
    assert got == pytest.approx(erlang_c_direct(c, a), rel=1e-9)


def test_erlang_c_is_one_when_unstable_and_zero_without_load() -> None:
    assert erlang_c(4, 4.0) == 1.0
    assert erlang_c(4, 9.0) == 1.0
    assert erlang_c(4, 0.0) == 0.0


# --------------------------------------------------------------------------- M/M/c


@pytest.mark.parametrize(("lam", "mu"), [(0.5, 1.0), (3.0, 4.0), (9.9, 10.0)])
def test_mm1_wait_and_latency(lam: float, mu: float) -> None:
    rho = lam / mu
    assert mmc_wait_mean(1, lam, mu) == pytest.approx(rho / (mu - lam))
    assert mmc_latency_mean(1, lam, mu) == pytest.approx(1 / (mu - lam))


def test_mmc_wait_mean_formula() -> None:
    # Given c = 10, a = 8 (mu = 2, lam = 16)
    assert mmc_wait_mean(10, 16.0, 2.0) == pytest.approx(erlang_c(10, 8.0) / (20.0 - 16.0))
    assert mmc_latency_mean(10, 16.0, 2.0) == pytest.approx(mmc_wait_mean(10, 16.0, 2.0) + 0.5)


def test_wait_tail_and_quantiles_are_consistent() -> None:
    c, lam, mu = 4, 3.5, 1.0
    p_wait = erlang_c(c, lam / mu)
    assert mmc_wait_sf(0.0, c, lam, mu) == pytest.approx(p_wait)
    for q in (0.5, 0.95, 0.99, 0.999):
        t = mmc_wait_quantile(q, c, lam, mu)
        if 1 - q < p_wait:
            assert t > 0
            assert mmc_wait_sf(t, c, lam, mu) == pytest.approx(1 - q)
        else:
            assert t == 0.0


def test_quantile_in_the_zero_wait_mass_is_zero() -> None:
    # Given a lightly loaded system where P(wait) < 5 %
    c, lam, mu = 8, 2.0, 1.0
    assert erlang_c(c, lam / mu) < 0.05
    assert mmc_wait_quantile(0.5, c, lam, mu) == 0.0
    assert mmc_wait_quantile(0.95, c, lam, mu) == 0.0
    assert mmc_wait_quantile(0.0, c, lam, mu) == 0.0


def test_mean_wait_is_the_integral_of_the_tail() -> None:
    c, lam, mu = 3, 2.4, 1.0
    theta = c * mu - lam
    assert mmc_wait_mean(c, lam, mu) == pytest.approx(mmc_wait_sf(0.0, c, lam, mu) / theta)


def test_unstable_waits_are_inf() -> None:
    assert mmc_wait_mean(2, 2.0, 1.0) == math.inf
    assert mmc_latency_mean(2, 3.0, 1.0) == math.inf
    assert mmc_wait_quantile(0.95, 2, 3.0, 1.0) == math.inf
    assert mmc_wait_sf(5.0, 2, 3.0, 1.0) == 1.0
    assert allen_cunneen_wait_mean(1, 2.0, 0.5, 1.0, 1.0) == math.inf


# --------------------------------------------------------------------------- Allen-Cunneen


@pytest.mark.parametrize(("c", "lam", "mean"), [(1, 0.7, 1.0), (5, 3.0, 1.2), (50, 40.0, 1.1)])
def test_allen_cunneen_with_poisson_and_exponential_is_erlang_c(c: int, lam: float, mean: float) -> None:
    assert allen_cunneen_wait_mean(c, lam, mean, 1.0, 1.0) == pytest.approx(mmc_wait_mean(c, lam, 1 / mean))


def test_allen_cunneen_single_server_is_pollaczek_khinchine() -> None:
    # M/D/1: Wq = rho * E[S] / (2 (1 - rho))
    lam, s = 0.8, 1.0
    rho = lam * s
    assert allen_cunneen_wait_mean(1, lam, s, 1.0, 0.0) == pytest.approx(rho * s / (2 * (1 - rho)))


# --------------------------------------------------------------------------- Cobham


def test_cobham_one_class_is_erlang_c() -> None:
    (w,) = cobham_waits(6, [4.5], 1.0)
    assert w == pytest.approx(mmc_wait_mean(6, 4.5, 1.0))


def test_cobham_orders_classes() -> None:
    waits = cobham_waits(3, [0.5, 1.0, 1.2], 1.0)
    assert waits[0] < waits[1] < waits[2]


@settings(max_examples=examples(60), deadline=None)
@given(
    c=st.integers(min_value=1, max_value=40),
    shares=st.lists(st.floats(min_value=0.0, max_value=1.0, allow_subnormal=False), min_size=1, max_size=5),
    rho=st.floats(min_value=0.01, max_value=0.98),
    mu=st.floats(min_value=0.1, max_value=50.0),
)
def test_cobham_conservation_law(c: int, shares: list[float], rho: float, mu: float) -> None:
    # Given classes sharing one exponential service: the rate-weighted mean of the
    # class waits is the FCFS M/M/c wait (Kleinrock's conservation law).
    total = sum(shares)
    if total == 0:
        shares, total = [1.0], 1.0
    lam = rho * c * mu
    lams = [lam * (s / total) for s in shares]
    waits = cobham_waits(c, lams, mu)
    mixed = sum(l * w for l, w in zip(lams, waits, strict=True)) / lam
    assert mixed == pytest.approx(mmc_wait_mean(c, lam, mu), rel=1e-9)


def test_cobham_overloaded_low_class_is_inf_high_class_finite() -> None:
    waits = cobham_waits(1, [0.5, 0.7], 1.0)
    assert math.isfinite(waits[0])
    assert waits[1] == math.inf


# --------------------------------------------------------------------------- invalid arguments


@pytest.mark.parametrize(
    ("call", "quoted"),
    [
        (lambda: erlang_c(0, 1.0), "0"),
        (lambda: erlang_c(2.5, 1.0), "2.5"),  # type: ignore[arg-type]
        (lambda: erlang_c(True, 1.0), "True"),  # type: ignore[arg-type]
        (lambda: erlang_c(2, -1.0), "-1.0"),
        (lambda: erlang_b(2, math.nan), "nan"),
        (lambda: mmc_wait_mean(2, 1.0, 0.0), "0.0"),
        (lambda: mmc_wait_mean(2, -3.0, 1.0), "-3.0"),
        (lambda: mmc_wait_sf(-1.0, 2, 1.0, 1.0), "-1.0"),
        (lambda: mmc_wait_quantile(1.5, 2, 1.0, 1.0), "1.5"),
        (lambda: allen_cunneen_wait_mean(2, 1.0, 0.0, 1.0, 1.0), "0.0"),
        (lambda: allen_cunneen_wait_mean(2, 1.0, 1.0, -2.0, 1.0), "-2.0"),
        (lambda: cobham_waits(2, [], 1.0), "[]"),
        (lambda: cobham_waits(2, [1.0, -0.5], 1.0), "-0.5"),
    ],
)
def test_invalid_arguments_raise_value_error_quoting_the_value(call: Any, quoted: str) -> None:
    with pytest.raises(ValueError, match="got") as info:
        call()
    assert quoted in str(info.value)


# --------------------------------------------------------------------------- predict


def scenario(**overrides: Any) -> Scenario:
    """A one-queue M/M/c scenario (c = 6, lambda = 8, mean service 0.5), edited by overrides."""
    raw: dict[str, Any] = {
        "name": "shop",
        "seed": 1,
        "duration": 100.0,
        "queues": [{"name": "orders"}],
        "jobs": [
            {"name": "cut", "queue": "orders",
             "arrival": {"kind": "poisson", "rate": 8.0},
             "service": {"kind": "exponential", "mean": 0.5}},
        ],
        "pools": [{"name": "crew", "queues": ["orders"], "workers": 3, "concurrency": 2}],
    }
    raw.update(overrides)
    return Scenario.from_dict(raw)


def job(name: str, rate: float | None = 1.0, *, queue: str = "orders", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "queue": queue,
                           "service": {"kind": "exponential", "mean": 0.5}}
    if rate is not None:
        out["arrival"] = {"kind": "poisson", "rate": rate}
    out.update(extra)
    return out


def test_predict_mmc() -> None:
    result = predict(scenario())
    assert isinstance(result, TheoryResult)
    assert result.model == "M/M/c"
    assert (result.c, result.lam, result.mu) == (6, 8.0, 2.0)
    assert result.rho == pytest.approx(8.0 / 12.0)
    assert result.utilization == result.rho and result.throughput == 8.0
    assert result.p_wait == pytest.approx(erlang_c(6, 4.0))
    assert result.wait["mean"] == pytest.approx(mmc_wait_mean(6, 8.0, 2.0))
    assert result.wait["p95"] == pytest.approx(mmc_wait_quantile(0.95, 6, 8.0, 2.0))
    assert result.latency["mean"] == pytest.approx(mmc_latency_mean(6, 8.0, 2.0))
    assert result.by_type["cut"]["wait"]["mean"] == result.wait["mean"]


def test_predict_to_dict_is_json_in_the_summary_vocabulary() -> None:
    d = predict(scenario()).to_dict()
    json.dumps(d, allow_nan=False)
    assert d["source"] == "theory"
    assert {"wait", "latency", "utilization", "throughput", "by_type", "model", "c",
            "lambda", "mu", "rho", "p_wait", "notes"} <= set(d)
    assert set(d["wait"]) == {"mean", "p50", "p95", "p99"}
    assert set(d["by_type"]["cut"]) >= {"wait", "latency"}


def test_predict_uses_a_smaller_concurrency_limit() -> None:
    result = predict(scenario(queues=[{"name": "orders", "concurrency_limit": 5}]))
    assert result.c == 5
    assert result.wait["mean"] == pytest.approx(mmc_wait_mean(5, 8.0, 2.0))


def test_predict_sums_slots_over_pools_serving_the_same_queues() -> None:
    pools = [{"name": "a", "queues": ["orders"], "workers": 2, "concurrency": 2},
             {"name": "b", "queues": ["orders"], "workers": 1, "concurrency": 3}]
    assert predict(scenario(pools=pools)).c == 7


def test_predict_ignores_job_types_without_arrivals() -> None:
    result = predict(scenario(jobs=[job("cut", 8.0), job("manual", None)]))
    assert result.model == "M/M/c" and set(result.by_type) == {"cut"}


def test_predict_allen_cunneen_for_a_service_mixture() -> None:
    # Given two job types: exponential mean 0.5 at 4/s and constant 1.0 at 2/s
    jobs = [job("cut", 4.0), job("glue", 2.0, service={"kind": "constant", "mean": 1.0})]
    result = predict(scenario(jobs=jobs))
    assert result.model == "G/G/c (Allen-Cunneen)"
    mean = (4 * 0.5 + 2 * 1.0) / 6
    second = (4 * (0.25 + 0.25) + 2 * (0.0 + 1.0)) / 6
    cs2 = second / mean**2 - 1
    assert result.mean_service == pytest.approx(mean)
    assert result.wait["mean"] == pytest.approx(allen_cunneen_wait_mean(6, 6.0, mean, 1.0, cs2))
    assert result.p_wait is None and result.wait["p95"] is None
    assert result.by_type["glue"]["latency"]["mean"] == pytest.approx(result.wait["mean"] + 1.0)


def test_predict_cobham_for_priorities() -> None:
    jobs = [job("urgent", 2.0, priority=0), job("normal", 4.0, priority=1), job("bulk", 2.0, priority=5)]
    result = predict(scenario(jobs=jobs))
    assert result.model == "M/M/c priority (Cobham)"
    waits = cobham_waits(6, [2.0, 4.0, 2.0], 2.0)
    assert [result.by_type[n]["wait"]["mean"] for n in ("urgent", "normal", "bulk")] == pytest.approx(waits)
    assert result.wait["mean"] == pytest.approx(mmc_wait_mean(6, 8.0, 2.0))
    assert result.p_wait == pytest.approx(erlang_c(6, 4.0))
    assert any("equal" in note for note in result.notes)


def test_predict_ordered_policy_classes_follow_queue_order() -> None:
    queues = [{"name": "bulk"}, {"name": "critical"}]
    jobs = [job("b", 4.0, queue="bulk"), job("k", 2.0, queue="critical")]
    pools = [{"name": "crew", "queues": ["critical", "bulk"], "policy": "ordered",
              "workers": 3, "concurrency": 2}]
    result = predict(scenario(queues=queues, jobs=jobs, pools=pools))
    assert result.model == "M/M/c priority (Cobham)"
    w_critical, w_bulk = cobham_waits(6, [2.0, 4.0], 2.0)
    assert result.by_type["k"]["wait"]["mean"] == pytest.approx(w_critical)
    assert result.by_type["b"]["wait"]["mean"] == pytest.approx(w_bulk)


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"jobs": [job("x", arrival={"kind": "constant", "rate": 8.0})]},
         "Poisson arrivals; job type 'x' has constant arrivals"),
        ({"queues": [{"name": "orders", "rate_limit": {"max": 5, "per": 1.0}}]}, "rate limits"),
        ({"jobs": [job("cut", 8.0, fail_prob=0.1, attempts=3)]}, "retries/fail_prob"),
        ({"jobs": [job("cut", 8.0, poison_prob=0.01)]}, "retries/fail_prob"),
        ({"jobs": [job("cut", 8.0, timeout=5.0)]}, "timeout"),
        ({"events": [{"at": 5.0, "kind": "sigkill", "pool": "crew"}]}, "events"),
        ({"jobs": [job("cut", 8.0, fan_out={"job": "part", "count": 2}), job("part", None)]},
         "flows/fan-out"),
        ({"jobs": [job("cut", 8.0)], "pools": [{"name": "crew", "queues": ["orders"], "workers": 1}]},
         "unstable: rho = 4 >= 1"),
        ({"jobs": [job("a", 2.0, priority=0),
                   job("b", 2.0, priority=1, service={"kind": "lognormal", "mean": 0.5, "cv": 2.0})]},
         "exponential service with equal means"),
        ({"jobs": [job("a", 2.0, priority=0),
                   job("b", 2.0, priority=1, service={"kind": "exponential", "mean": 0.4})]},
         "equal means"),
    ],
)
def test_predict_says_why_no_closed_form_applies(overrides: dict[str, Any], why: str) -> None:
    with pytest.raises(TheoryNotApplicable) as info:
        predict(scenario(**overrides))
    assert why in str(info.value)


def test_predict_refuses_pools_serving_different_queue_sets() -> None:
    queues = [{"name": "orders"}, {"name": "mail"}]
    jobs = [job("cut", 2.0), job("send", 1.0, queue="mail")]
    pools = [{"name": "a", "queues": ["orders"], "workers": 2},
             {"name": "b", "queues": ["orders", "mail"], "workers": 2}]
    with pytest.raises(TheoryNotApplicable, match="several pools serving different queue sets"):
        predict(scenario(queues=queues, jobs=jobs, pools=pools))


def test_predict_refuses_an_autoscaled_pool() -> None:
    # its static worker count is only where the autoscaler starts: a closed form for it answers another system
    scaled = scenario(autoscalers=[{"pool": "crew", "min": 1, "max": 1, "policy": "hpa", "target": 4}])
    with pytest.raises(TheoryNotApplicable, match="autoscaled pools \\(pool 'crew'"):
        predict(scaled)


def test_predict_refuses_wrr_across_queues_with_several_classes() -> None:
    queues = [{"name": "orders"}, {"name": "mail"}]
    jobs = [job("cut", 2.0), job("send", 1.0, queue="mail")]
    pools = [{"name": "a", "queues": ["orders", "mail"], "policy": "wrr",
              "weights": {"orders": 2, "mail": 1}, "workers": 4}]
    with pytest.raises(TheoryNotApplicable, match="round-robin"):
        predict(scenario(queues=queues, jobs=jobs, pools=pools))


def test_theory_all_is_exported() -> None:
    import qsim.analysis as analysis

    for name in theory.__all__:
        assert getattr(analysis, name) is getattr(theory, name)
