"""``simulate(..., records=False)``: the same Summary from streamed statistics, no records kept."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from qsim.model import Model, draw_jobs, simulate
from qsim.model.result import RecordsNotKept
from qsim.results.summary import STREAM_LOW, STREAM_REL_ERROR, StreamStat, stats
from qsim.spec.scenario import Scenario

QUANTILES = {"p50", "p95", "p99"}


def scenario(*, jobs: list[dict[str, Any]] | None = None, pools: list[dict[str, Any]] | None = None,
             queues: list[dict[str, Any]] | None = None, **top: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "s", "seed": 5, "duration": 300.0,
        "queues": queues or [{"name": "q"}],
        "jobs": jobs or [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                          "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": pools or [{"name": "p", "queues": ["q"], "workers": 10}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


def assert_close(streamed: Any, exact: Any, path: str = "") -> None:
    """Quantiles within the bin resolution, other floats to rounding, everything else equal."""
    if isinstance(exact, dict):
        assert list(streamed) == list(exact), path
        for key in exact:
            assert_close(streamed[key], exact[key], f"{path}.{key}")
    elif isinstance(exact, list):  # the windows
        assert len(streamed) == len(exact), path
        for i, (a, b) in enumerate(zip(streamed, exact)):
            assert_close(a, b, f"{path}[{i}]")
    elif isinstance(exact, float):
        assert isinstance(streamed, float), path
        key = path.rsplit(".", 1)[-1]
        tol = STREAM_REL_ERROR * abs(exact) + STREAM_LOW if key in QUANTILES else 1e-9 * abs(exact) + 1e-12
        assert abs(streamed - exact) <= tol, f"{path}: {streamed} vs {exact}"
    else:
        assert streamed == exact, path


def both(s: Scenario, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return simulate(s, records=True, **kw).summary, simulate(s, records=False, **kw).summary


CASES = {
    "mmc": scenario(),
    "warmup": scenario(warmup=60.0),
    "classes-limits-policies": scenario(
        warmup=20.0,
        queues=[{"name": "q", "concurrency_limit": 3}, {"name": "u"}, {"name": "v"}],
        jobs=[{"name": "a", "queue": "q", "priority": 1, "arrival": {"kind": "poisson", "rate": 3.0},
               "service": {"kind": "lognormal", "mean": 0.8, "cv": 1.5}},
              {"name": "b", "queue": "q", "priority": 0, "arrival": {"kind": "poisson", "rate": 1.0},
               "service": {"kind": "exponential", "mean": 0.5}},
              {"name": "c", "queue": "u", "arrival": {"kind": "burst", "rate": 2.0, "size": 4},
               "service": {"kind": "constant", "mean": 1.0}},
              {"name": "d", "queue": "v", "arrival": {"kind": "constant", "rate": 1.0},
               "service": {"kind": "constant", "mean": 2.0}}],
        pools=[{"name": "p1", "queues": ["q", "u"], "workers": 2, "concurrency": 2},
               {"name": "p2", "queues": ["u", "q", "v"], "policy": "wrr", "workers": 2},
               {"name": "p3", "queues": ["v"], "workers": 1}]),
    "constant-ties": scenario(
        jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "burst", "rate": 4.0, "size": 4},
               "service": {"kind": "constant", "mean": 1.0}}],
        pools=[{"name": "p", "queues": ["q"], "workers": 3}], warmup=10.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_records_false_gives_the_same_summary_within_the_bin_resolution(name: str) -> None:
    # Given a core scenario run twice on the same seed, with and without records
    exact, streamed = both(CASES[name])
    # Then every count, mean, max, max_depth and utilization agree; the quantiles within a half bin
    assert exact["jobs"]["completed"] > 0
    assert_close(streamed, exact)


def test_records_false_without_completions_and_with_overload() -> None:
    # a pool without workers: nothing starts, everything is unfinished
    exact, streamed = both(scenario(duration=20.0, pools=[{"name": "p", "queues": ["q"], "workers": 0}]))
    assert_close(streamed, exact)
    # rho = 1.2 with max_jobs: a long backlog (a large max_depth)
    exact, streamed = both(scenario(jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 12.0},
                                           "service": {"kind": "exponential", "mean": 1.0}}]), max_jobs=2000)
    assert exact["by_queue"]["q"]["max_depth"] > 100
    assert_close(streamed, exact)


def test_records_false_on_a_full_run_keeps_the_exact_summary() -> None:
    # Given a scenario with retries (the full path), records=False computes the Summary exactly
    s = scenario(duration=60.0, jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 4.0},
                                       "service": {"kind": "exponential", "mean": 1.0}, "fail_prob": 0.2}])
    exact, streamed = both(s)
    assert exact["jobs"]["failed_attempts"] > 0
    assert streamed == exact


def test_records_are_not_available_with_records_false() -> None:
    r = simulate(scenario(duration=10.0), records=False)
    assert r.records is None
    with pytest.raises(RecordsNotKept, match="records=False"):
        r.jobs  # noqa: B018
    with pytest.raises(RecordsNotKept, match="records=False"):
        r.timeseries  # noqa: B018


def test_progress_still_reported_with_records_false() -> None:
    seen: list[float] = []
    simulate(scenario(duration=30.0), records=False, progress=seen.append)
    assert seen[-1] == 1.0 and len(seen) > 10 and seen == sorted(seen)


def test_stream_stat_matches_numpy_percentiles() -> None:
    # Given zeros, sub-microsecond values and a heavy tail, added in chunks
    rng = np.random.default_rng(7)
    x = np.concatenate([np.zeros(3000), rng.uniform(0, 1e-7, 50), rng.lognormal(0, 2, 20000)])
    rng.shuffle(x)
    hist = StreamStat()
    for chunk in np.array_split(x, 7):
        hist.add(chunk)
    exact, streamed = stats(x), hist.stats()
    # Then count-based figures are exact and quantiles within the stated resolution
    assert streamed["max"] == exact["max"] and math.isclose(streamed["mean"], exact["mean"], rel_tol=1e-12)
    for q in range(1, 100):
        e = float(np.percentile(x, q))
        assert abs(hist.quantile(q / 100) - e) <= STREAM_REL_ERROR * e + STREAM_LOW, q
    assert StreamStat().stats()["p50"] is None


def test_a_record_less_model_allocates_no_record_columns() -> None:
    s = scenario(duration=50.0)
    m = Model(s, draw_jobs(s), seed=0, records=False)
    assert m.jobs.n > 0 and len(m.jobs.started) == len(m.jobs.finished) == len(m.jobs.worker) == 0
    assert m.core._feed.times is m.jobs.enqueued  # the arrival feed reads the job table's column
    assert m.run().summary["jobs"]["completed"] == m.jobs.n


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**31), burst=st.integers(1, 5), workers=st.integers(1, 4),
       constant=st.booleans(), warmup=st.sampled_from([0.0, 3.0, 17.5]),
       policy=st.sampled_from(["priority", "ordered", "wrr"]), limit=st.sampled_from([None, 1, 2]))
def test_records_false_agrees_on_random_core_scenarios(seed: int, burst: int, workers: int, constant: bool,
                                                       warmup: float, policy: str, limit: int | None) -> None:
    # Given small core scenarios with ties (bursts, constant times), warmup, policies and a concurrency limit
    service = {"kind": "constant", "mean": 0.5} if constant else {"kind": "exponential", "mean": 0.5}
    arrival = {"kind": "burst", "rate": 1.5 * workers, "size": burst} if burst > 1 else \
        {"kind": "constant" if constant else "poisson", "rate": 1.5 * workers}
    s = scenario(
        seed=seed, duration=40.0, warmup=warmup,
        queues=[{"name": "q", **({"concurrency_limit": limit} if limit else {})}, {"name": "u"}],
        jobs=[{"name": "a", "queue": "q", "priority": 1, "arrival": arrival, "service": service},
              {"name": "b", "queue": "u", "arrival": {"kind": "poisson", "rate": 1.0}, "service": service}],
        pools=[{"name": "p", "queues": ["q", "u"], "policy": policy, "workers": workers},
               {"name": "r", "queues": ["u"], "workers": 1}])
    exact, streamed = both(s)
    # Then the record-less Summary agrees (max_depth exactly)
    assert_close(streamed, exact)
