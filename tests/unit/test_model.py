"""The SimPy model core: API, reproducibility, records, limits, an exact FCFS reference.

The statistical checks against closed forms are in test_model_theory.py.
"""

from __future__ import annotations

import heapq
import math
import pickle
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from qsim.errors import NotSupportedError
from qsim.model import JobDraws, Model, ModelResult, draw_jobs, simulate, stream
from qsim.model.dispatch import make_picker
from qsim.model.limits import ConcurrencyLimit
from qsim.model.queues import Queues
from qsim.model.schedule import exact_delay
from qsim.model.state import COMPLETED, JobTable
from qsim.model.timeseries import ChangeLog, timeseries_frame
from qsim.results.records import JOB_COLUMNS
from qsim.spec.scenario import Scenario


def scenario(*, jobs: list[dict[str, Any]] | None = None, pools: list[dict[str, Any]] | None = None,
             queues: list[dict[str, Any]] | None = None, **top: Any) -> Scenario:
    """A small scenario: by default M/M/2 at rho = 0.75 on one queue."""
    raw: dict[str, Any] = {
        "name": "t", "seed": 3, "duration": 200.0,
        "queues": queues or [{"name": "q"}],
        "jobs": jobs or [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0},
                          "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": pools or [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 1}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


def fcfs_reference(arrivals: np.ndarray, services: np.ndarray, servers: int) -> tuple[np.ndarray, np.ndarray]:
    """FCFS G/G/c by hand: a heap of the times the servers become free."""
    free = [0.0] * servers
    starts, ends = np.empty(arrivals.size), np.empty(arrivals.size)
    for i, (a, s) in enumerate(zip(arrivals.tolist(), services.tolist())):
        start = max(a, heapq.heappop(free))
        starts[i], ends[i] = start, start + s
        heapq.heappush(free, start + s)
    return starts, ends


# --------------------------------------------------------------------------- API and records


def test_result_has_records_timeseries_and_summary() -> None:
    # Given a plain M/M/2 scenario / When it is simulated
    r = simulate(scenario())
    # Then the result carries the jobs table, the time series and the Summary
    assert isinstance(r, ModelResult)
    assert list(r.jobs.columns) == list(JOB_COLUMNS)
    assert r.jobs is r.records.jobs
    assert list(r.timeseries.columns) == ["time", "queue", "waiting", "active"]
    assert r.records.slots == ((0.0, 2),)
    assert r.summary["source"] == "model" and r.summary["seed"] == 3 and r.summary["scenario"] == "t"
    # every job drained after the arrivals stopped
    assert (r.jobs["outcome"] == "completed").all()
    assert r.summary["jobs"]["unfinished"] == 0 and r.summary["jobs"]["lost"] == 0
    assert r.jobs["enqueued"].max() < 200.0 < r.jobs["finished"].max() + 50
    assert (r.jobs["started"] >= r.jobs["enqueued"]).all()
    assert (r.jobs["finished"] >= r.jobs["started"]).all()
    assert set(r.jobs["worker"]) == {"p-0", "p-1"}
    assert r.jobs["job_id"].is_unique
    assert (r.jobs["attempts"] == 1).all()


def test_same_seed_same_records_other_seed_other_records() -> None:
    s = scenario()
    a, b = simulate(s), simulate(s)
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)
    assert a.summary == b.summary
    c = simulate(s, seed=4)
    assert c.seed == 4 and c.summary["seed"] == 4
    assert len(c.jobs) != len(a.jobs) or not np.array_equal(c.jobs["enqueued"], a.jobs["enqueued"])
    # seed=None means the scenario's seed
    pd.testing.assert_frame_equal(simulate(s, seed=3).jobs, a.jobs)


def test_adding_a_job_type_does_not_reshuffle_the_others() -> None:
    # Given a scenario, and the same with one more job type listed first on its own queue and pool
    one = scenario()
    two = scenario(
        queues=[{"name": "other"}, {"name": "q"}],
        jobs=[{"name": "new", "queue": "other", "arrival": {"kind": "poisson", "rate": 1.0},
               "service": {"kind": "constant", "mean": 0.1}},
              {"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0},
               "service": {"kind": "exponential", "mean": 0.5}}],
        pools=[{"name": "o", "queues": ["other"]}, {"name": "p", "queues": ["q"], "workers": 2}],
    )
    # Then job type "a" gets the same arrivals and service times, so the same waits
    ja = simulate(one).jobs
    jb = simulate(two).jobs
    jb = jb[jb["type"] == "a"].reset_index(drop=True)
    for col in ("enqueued", "started", "finished", "worker"):
        assert ja[col].tolist() == jb[col].tolist()


def test_draws_come_from_the_documented_streams() -> None:
    s = scenario()
    d = draw_jobs(s, seed=9)
    t = s.job("a").arrival.times(stream(9, "a", "arrival"), s.duration)  # type: ignore[union-attr]
    sv = s.job("a").service.sample(stream(9, "a", "service"), t.size)
    assert np.array_equal(d.time, t) and np.array_equal(d.service, sv)
    with pytest.raises(ValueError, match="purpose"):
        stream(1, "a", "nope")


def test_max_jobs_keeps_the_earliest_arrivals_over_all_types() -> None:
    s = scenario(jobs=[
        {"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0}, "service": {"kind": "constant", "mean": 0.1}},
        {"name": "b", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0}, "service": {"kind": "constant", "mean": 0.1}},
    ])
    full = simulate(s).jobs
    r = simulate(s, max_jobs=50)
    assert len(r.jobs) == 50 and r.summary["jobs"]["arrived"] == 50
    assert sorted(r.jobs["enqueued"]) == sorted(full["enqueued"])[:50]
    assert set(r.jobs["type"]) == {"a", "b"}
    assert len(simulate(s, max_jobs=10**9).jobs) == len(full)
    empty = simulate(s, max_jobs=0)
    assert len(empty.jobs) == 0 and empty.summary["jobs"]["arrived"] == 0
    with pytest.raises(ValueError, match="max_jobs"):
        simulate(s, max_jobs=-1)
    with pytest.raises(ValueError, match="seed"):
        simulate(s, seed=-1)


def test_warmup_leaves_early_jobs_out_of_the_summary() -> None:
    s = scenario(warmup=50.0)
    r = simulate(s)
    late = r.jobs[r.jobs["enqueued"] >= 50.0]
    assert r.summary["jobs"]["arrived"] == len(late) < len(r.jobs)
    assert r.summary["wait"]["mean"] == pytest.approx((late["started"] - late["enqueued"]).mean())


def test_progress_is_reported_up_to_one() -> None:
    seen: list[float] = []
    simulate(scenario(), progress=seen.append)
    assert len(seen) >= 50 and seen[-1] == 1.0
    assert all(0 <= x <= 1 for x in seen) and seen == sorted(seen)


# --------------------------------------------------------------------------- exact FCFS reference


@pytest.mark.parametrize("service", [
    {"kind": "exponential", "mean": 1.0},
    {"kind": "lognormal", "mean": 1.0, "cv": 2.0},
    {"kind": "constant", "mean": 0.9},
])
def test_fcfs_agrees_job_by_job_with_a_heap_reference(service: dict[str, Any]) -> None:
    # Given an FCFS M/G/c run (one queue, one priority) and the samples it draws
    s = scenario(duration=2000.0, seed=11,
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.5}, "service": service}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 5, "concurrency": 2}])
    d = draw_jobs(s)
    # When the model runs and the reference is fed the same samples
    jobs = simulate(s).jobs
    arrived = jobs["enqueued"].to_numpy()
    starts, ends = fcfs_reference(arrived, d.service, servers=10)
    # Then jobs arrived at the drawn times (at most one ulp later, where floats cannot add up exactly) ...
    assert len(jobs) == len(d) > 15000
    assert np.all((arrived >= d.time) & (arrived <= np.nextafter(d.time, np.inf)))
    # ... and every job starts and finishes at exactly the same time as in the reference
    assert np.array_equal(jobs["started"].to_numpy(), starts)
    assert np.array_equal(jobs["finished"].to_numpy(), ends)
    assert (jobs["started"] > jobs["enqueued"]).mean() > 0.2  # queueing happened


@settings(max_examples=examples(25), deadline=None)
@given(workers=st.integers(1, 4), concurrency=st.integers(1, 3), rho=st.floats(0.3, 1.3),
       seed=st.integers(0, 2**32), burst=st.integers(1, 4))
def test_fcfs_matches_reference_over_parameters(workers: int, concurrency: int, rho: float, seed: int,
                                                burst: int) -> None:
    c = workers * concurrency
    s = scenario(duration=60.0, seed=seed,
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "burst", "rate": rho * c, "size": burst}
                        if burst > 1 else {"kind": "poisson", "rate": rho * c},
                        "service": {"kind": "gamma", "mean": 1.0, "cv": 1.5}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": workers, "concurrency": concurrency}])
    d = draw_jobs(s)
    jobs = simulate(s).jobs
    starts, ends = fcfs_reference(jobs["enqueued"].to_numpy(), d.service, servers=c)
    assert np.array_equal(jobs["started"].to_numpy(), starts)
    assert np.array_equal(jobs["finished"].to_numpy(), ends)


# --------------------------------------------------------------------------- priorities, policies, limits


def test_priority_is_lower_first_and_fifo_within_a_level() -> None:
    # Given one slot, a bulk of 3 "lo" (priority 2) and 3 "hi" (priority 1) jobs at time 0,
    # and an "urgent" one (priority 0) arriving at 1.5, each running 1 s
    s = scenario(jobs=[{"name": n, "queue": "q", "priority": p, "arrival": {"kind": "poisson", "rate": 1.0},
                        "service": {"kind": "constant", "mean": 1.0}} for n, p in (("lo", 2), ("hi", 1), ("urgent", 0))],
                 pools=[{"name": "p", "queues": ["q"], "workers": 1}])
    draws = JobDraws(time=np.array([0.0] * 6 + [1.5]), type=np.array([0, 0, 0, 1, 1, 1, 2]),
                     service=np.ones(7))
    jobs = Model(s, draws, seed=0).run().jobs.sort_values("started")
    # Then the whole bulk is queued before anything starts, the best priority runs first,
    # and "urgent" overtakes the last "hi" when the slot frees at 2
    assert jobs["type"].tolist() == ["hi", "hi", "urgent", "hi", "lo", "lo", "lo"]
    assert jobs["started"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    for _, group in jobs.groupby("type"):
        ids = group["job_id"].str[1:].astype(int).tolist()
        assert ids == sorted(ids)  # FIFO within a level


def _two_queue_backlog(policy: str) -> pd.DataFrame:
    """Queues a (priority 1) and b (priority 0) both backlogged at time 0 on one slot."""
    s = scenario(
        duration=1.0, queues=[{"name": "a"}, {"name": "b"}],
        jobs=[{"name": "ja", "queue": "a", "priority": 1, "arrival": {"kind": "burst", "rate": 4.0, "size": 4},
               "service": {"kind": "constant", "mean": 1.0}},
              {"name": "jb", "queue": "b", "priority": 0, "arrival": {"kind": "burst", "rate": 4.0, "size": 4},
               "service": {"kind": "constant", "mean": 1.0}}],
        pools=[{"name": "p", "queues": ["a", "b"], "policy": policy, "weights": {"a": 1, "b": 1}}],
    )
    return simulate(s).jobs.sort_values("started")


def test_policies_choose_between_queues() -> None:
    # ordered: first listed queue first, whatever the priorities
    assert _two_queue_backlog("ordered")["queue"].tolist() == ["a"] * 4 + ["b"] * 4
    # priority: the better priority (b) across queues
    assert _two_queue_backlog("priority")["queue"].tolist() == ["b"] * 4 + ["a"] * 4
    # wrr with equal weights: nginx's smooth WRR alternates, ties going to the first listed queue
    assert _two_queue_backlog("wrr")["queue"].tolist() == ["a", "b"] * 4


def test_concurrency_limit_is_never_exceeded_and_binds() -> None:
    # Given two pools (8 slots) on queue "q" limited to 3 active jobs, and an unlimited queue "u"
    s = scenario(
        duration=300.0,
        queues=[{"name": "q", "concurrency_limit": 3}, {"name": "u"}],
        jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.5},
               "service": {"kind": "exponential", "mean": 1.0}},
              {"name": "b", "queue": "u", "arrival": {"kind": "poisson", "rate": 2.0},
               "service": {"kind": "exponential", "mean": 1.0}}],
        pools=[{"name": "p1", "queues": ["q", "u"], "workers": 2, "concurrency": 2},
               {"name": "p2", "queues": ["u", "q"], "policy": "ordered", "workers": 4}],
    )
    r = simulate(s)
    ts = r.timeseries
    q = ts[ts["queue"] == "q"]
    # Then on the time series "q" never has more than 3 active jobs, and often has exactly 3
    assert q["active"].max() == 3
    assert q["waiting"].max() > 10  # the limit, not the slots, held jobs back
    assert (q["active"] >= 0).all() and (q["waiting"] >= 0).all()
    # and both pools ran jobs of q
    assert {w.split("-")[0] for w in r.jobs.loc[r.jobs["queue"] == "q", "worker"]} == {"p1", "p2"}
    # the records agree: at no start time were more than 3 jobs of q running
    jq = r.jobs[r.jobs["queue"] == "q"]
    starts, ends = np.sort(jq["started"].to_numpy()), np.sort(jq["finished"].to_numpy())
    running = np.arange(1, starts.size + 1) - np.searchsorted(ends, starts, side="right")
    assert running.max() == 3
    # all slots together never run more than 8 jobs
    assert _max_total_active(ts) <= 8


def _max_total_active(ts: pd.DataFrame) -> int:
    wide = ts.pivot_table(index="time", columns="queue", values="active", aggfunc="last").ffill().fillna(0)
    return int(wide.sum(axis=1).max())


def test_timeseries_matches_the_records() -> None:
    r = simulate(scenario(duration=100.0))
    ts, jobs = r.timeseries, r.jobs
    # at each recorded instant, waiting and active equal what the job table says
    for t, w, a in ts[["time", "waiting", "active"]].sample(200, random_state=1).itertuples(index=False):
        enq = (jobs["enqueued"] <= t).sum()
        started = (jobs["started"] <= t).sum()
        finished = (jobs["finished"] <= t).sum()
        assert (w, a) == (enq - started, started - finished)
    assert ts["time"].is_monotonic_increasing
    assert ts.iloc[0].tolist() == [0.0, "q", 0, 0]


def test_every_arrival_and_service_kind_runs(tmp_path: Any) -> None:
    trace = tmp_path / "arrivals.csv"
    trace.write_text("t\n0.5\n1.0\n1.0\n7.25\n")
    emp = tmp_path / "service.csv"
    emp.write_text("0.1\n0.2\n0.4\n")
    arrivals = [{"kind": "poisson", "rate": 2.0}, {"kind": "constant", "rate": 2.0},
                {"kind": "burst", "rate": 2.0, "size": 3}, {"kind": "trace", "path": str(trace)}]
    services = [{"kind": "constant", "mean": 0.2}, {"kind": "exponential", "mean": 0.2},
                {"kind": "lognormal", "mean": 0.2, "cv": 1.0}, {"kind": "gamma", "mean": 0.2, "cv": 0.5},
                {"kind": "uniform", "low": 0.1, "high": 0.3}, {"kind": "empirical", "path": str(emp)}]
    jobs = [{"name": f"j{i}-{k}", "queue": "q", "arrival": a, "service": sv}
            for i, a in enumerate(arrivals) for k, sv in enumerate(services)]
    r = simulate(scenario(duration=20.0, jobs=jobs, pools=[{"name": "p", "queues": ["q"], "workers": 8}]))
    assert (r.jobs["outcome"] == "completed").all()
    assert set(r.jobs["type"]) == {j["name"] for j in jobs}
    assert (r.jobs[r.jobs["type"].str.startswith("j3-")]["enqueued"].sort_values().tolist()
            == [0.5, 0.5, 0.5, 0.5, 0.5, 0.5] + [1.0] * 12 + [7.25] * 6)


def test_a_pool_without_workers_leaves_jobs_unfinished() -> None:
    s = scenario(duration=10.0, pools=[{"name": "p", "queues": ["q"], "workers": 0}])
    r = simulate(s)
    assert len(r.jobs) > 0 and (r.jobs["outcome"] == "unfinished").all()
    assert r.summary["jobs"]["unfinished"] == len(r.jobs)


# --------------------------------------------------------------------------- not supported yet


def test_nested_children_are_refused_by_key() -> None:
    raw: dict[str, Any] = {
        "name": "later", "duration": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
                  "service": {"kind": "constant", "mean": 0.1}, "fan_out": {"job": "kid", "count": 2}},
                 {"name": "kid", "queue": "q", "service": {"kind": "constant", "mean": 0.1},
                  "flow": {"children": ["leaf"]}},
                 {"name": "leaf", "queue": "q", "service": {"kind": "constant", "mean": 0.1}}],
        "pools": [{"name": "p", "queues": ["q"]}],
    }
    with pytest.raises(NotSupportedError, match=r"^later: not supported yet: jobs\[0\] \(child type 'kid'"):
        simulate(Scenario.from_dict(raw))


def test_retry_settings_without_failures_are_fine() -> None:
    s = scenario(jobs=[{"name": "a", "queue": "q", "attempts": 5, "backoff": {"kind": "fixed", "delay": 2.0},
                        "arrival": {"kind": "poisson", "rate": 1.0}, "service": {"kind": "constant", "mean": 0.1}}])
    r = simulate(s)
    assert (r.jobs["attempts"] == 1).all() and (r.jobs["outcome"] == "completed").all()


# --------------------------------------------------------------------------- dispatch invariants


@st.composite
def systems(draw: st.DrawFn) -> Scenario:
    """Random small systems: 1-3 queues (some limited), 1-3 pools with any policy, 1-4 job types."""
    nq = draw(st.integers(1, 3))
    queues = [{"name": f"q{i}"} | ({"concurrency_limit": draw(st.integers(1, 3))} if draw(st.booleans()) else {})
              for i in range(nq)]
    pools = []
    for i in range(draw(st.integers(1, 3))):
        served = draw(st.lists(st.sampled_from([q["name"] for q in queues]), min_size=1, max_size=nq, unique=True))
        pools.append({"name": f"p{i}", "queues": served, "policy": draw(st.sampled_from(["priority", "ordered", "wrr"])),
                      "weights": {q: draw(st.sampled_from([1, 2, 5])) for q in served},
                      "workers": draw(st.integers(1, 3)), "concurrency": draw(st.integers(1, 3))})
    unserved = {q["name"] for q in queues} - {q for p in pools for q in p["queues"]}
    if unserved:
        pools[0]["queues"] += sorted(unserved)
        pools[0]["weights"] |= {q: 1 for q in unserved}
    jobs = [{"name": f"j{i}", "queue": draw(st.sampled_from([q["name"] for q in queues])),
             "priority": draw(st.integers(0, 2)),
             "arrival": {"kind": "poisson", "rate": draw(st.floats(0.2, 4.0))},
             "service": draw(st.sampled_from([{"kind": "exponential", "mean": 0.7}, {"kind": "constant", "mean": 0.5}]))}
            for i in range(draw(st.integers(1, 4)))]
    return Scenario.from_dict({"name": "h", "seed": draw(st.integers(0, 1000)), "duration": 25.0,
                               "queues": queues, "jobs": jobs, "pools": pools})


def _running_at(jobs: pd.DataFrame, t: float) -> pd.DataFrame:
    return jobs[(jobs["started"] <= t) & (jobs["finished"] > t)]


@settings(max_examples=examples(40), deadline=None)
@given(s=systems())
def test_dispatch_is_work_conserving_and_respects_every_limit(s: Scenario) -> None:
    jobs = simulate(s).jobs
    assert (jobs["outcome"] == "completed").all()
    assert (jobs["started"] >= jobs["enqueued"]).all()
    pool_of_worker = {f"{p.name}-{w}": p for p in s.pools for w in range(p.workers)}
    # at every start, no worker runs more than its concurrency and no queue exceeds its limit
    for t in jobs["started"].unique():
        running = _running_at(jobs, t)
        per_worker = running["worker"].value_counts()
        assert all(per_worker[w] <= pool_of_worker[w].concurrency for w in per_worker.index)
        for q in s.queues:
            if q.concurrency_limit is not None:
                assert (running["queue"] == q.name).sum() <= q.concurrency_limit
    # a job that waited had no idle slot available: at the middle of its wait, every pool serving
    # its queue was full, or its queue was at its concurrency limit
    waited = jobs[jobs["started"] > jobs["enqueued"]]
    for job in waited.itertuples(index=False):
        t = (job.enqueued + job.started) / 2
        running = _running_at(jobs, t)
        limit = s.queue(job.queue).concurrency_limit
        if limit is not None and (running["queue"] == job.queue).sum() >= limit:
            continue
        busy = running["worker"].map(lambda w: pool_of_worker[w].name).value_counts()
        for p in s.pools:
            if job.queue in p.queues:
                assert busy.get(p.name, 0) == p.slots, (job, p.name)


def test_a_reopened_queue_is_offered_to_every_pool() -> None:
    # Given q limited to 1 active job, pool "p" taking r before q, and pool "p2" serving only q
    s = scenario(
        duration=1.0,
        queues=[{"name": "q", "concurrency_limit": 1}, {"name": "r"}],
        jobs=[{"name": "jq", "queue": "q", "arrival": {"kind": "burst", "rate": 3.0, "size": 3},
               "service": {"kind": "constant", "mean": 1.0}},
              {"name": "jr", "queue": "r", "arrival": {"kind": "constant", "rate": 2.0},
               "service": {"kind": "constant", "mean": 1.0}}],
        pools=[{"name": "p", "queues": ["r", "q"], "policy": "ordered"}, {"name": "p2", "queues": ["q"]}],
    )
    jobs = simulate(s).jobs
    q = jobs[jobs["queue"] == "q"].sort_values("started")
    # When p's q-job ends at t=1, p takes the r-job it prefers, and q (open again) goes to p2 at once
    assert q["started"].tolist() == [0.0, 1.0, 2.0]
    assert q["worker"].tolist()[1] == "p2-0"


def test_the_model_runs_precomputed_draws() -> None:
    # Given hand-made arrivals and service times (the documented way to feed a reference)
    s = scenario(pools=[{"name": "p", "queues": ["q"], "workers": 2}])
    draws = JobDraws(time=np.array([0.0, 0.0, 0.0, 0.5, 4.0]), type=np.zeros(5, dtype=np.int64),
                     service=np.array([1.0, 2.0, 1.0, 1.0, 0.25]))
    # When the model runs them
    jobs = Model(s, draws, seed=0).run().jobs
    # Then two slots serve them first come, first served
    assert jobs["started"].tolist() == [0.0, 0.0, 1.0, 2.0, 4.0]
    assert jobs["finished"].tolist() == [1.0, 2.0, 2.0, 3.0, 4.25]


def test_the_slot_idle_longest_takes_the_next_job_across_pools() -> None:
    # Given two one-worker pools on the same queue, jobs at 0, 0.1, 3 and 3.5, services 2, 0.5, 1, 1
    s = scenario(pools=[{"name": "p1", "queues": ["q"]}, {"name": "p2", "queues": ["q"]}])
    draws = JobDraws(time=np.array([0.0, 0.1, 3.0, 3.5]), type=np.zeros(4, dtype=np.int64),
                     service=np.array([2.0, 0.5, 1.0, 1.0]))
    jobs = Model(s, draws, seed=0).run().jobs
    # Then p1 takes the first (a tie: the pool listed first), p2 the second (p1 busy); at 3.0 p2
    # (free since 0.6) has been idle longer than p1 (free since 2.0); at 3.5 only p1 is free
    assert jobs["worker"].tolist() == ["p1-0", "p2-0", "p2-0", "p1-0"]


def test_timeseries_frame_keeps_the_state_after_each_instant_per_queue() -> None:
    log = ChangeLog()
    for now, q, w, a in [(1.0, 1, 1, 0), (1.0, 0, 1, 0), (1.0, 0, -1, 1), (2.0, 1, 1, 0), (3.0, 1, -1, 1),
                         (3.0, 0, 0, -1), (4.0, 1, 0, -1)]:
        log.add(now, q, w, a)
    ts = timeseries_frame(["a", "b"], [log.changes()])
    assert ts.values.tolist() == [
        [0.0, "a", 0, 0], [0.0, "b", 0, 0],
        [1.0, "a", 0, 1], [1.0, "b", 1, 0],  # a: arrived and started at once, no blip
        [2.0, "b", 2, 0],
        [3.0, "a", 0, 0], [3.0, "b", 1, 1],
        [4.0, "b", 1, 0],
    ]


def priority_reference(arrivals: np.ndarray, services: np.ndarray, priorities: np.ndarray,
                       servers: int) -> np.ndarray:
    """Non-preemptive priority G/G/c by hand, instant by instant: at each arrival or end time,
    free servers take the lowest priority number among the jobs arrived by then, FIFO within a level."""
    n = arrivals.size
    busy: list[float] = []  # end times of the running jobs
    waiting: list[tuple[int, int]] = []
    starts = np.full(n, np.nan)
    i, idle, started = 0, servers, 0
    while started < n:
        t = min(float(arrivals[i]) if i < n else np.inf, busy[0] if busy else np.inf)
        while busy and busy[0] == t:
            heapq.heappop(busy)
            idle += 1
        while i < n and arrivals[i] == t:
            heapq.heappush(waiting, (int(priorities[i]), i))
            i += 1
        while idle and waiting:
            _, j = heapq.heappop(waiting)
            starts[j] = t
            heapq.heappush(busy, t + float(services[j]))
            idle -= 1
            started += 1
    return starts


@settings(max_examples=examples(30), deadline=None)
@given(data=st.data(), servers=st.integers(1, 6), n_types=st.integers(1, 3), n_queues=st.integers(1, 3),
       rho=st.floats(0.5, 1.2), seed=st.integers(0, 2**32))
def test_priority_matches_a_reference_job_by_job(data: st.DataObject, servers: int, n_types: int,
                                                 n_queues: int, rho: float, seed: int) -> None:
    # Given job types with random priorities on the queues of one "priority" pool
    queues = [f"q{k}" for k in range(n_queues)]
    jobs = []
    for k in range(n_types):
        burst = data.draw(st.integers(1, 4))
        rate = rho * servers / n_types
        jobs.append({"name": f"t{k}", "queue": data.draw(st.sampled_from(queues)), "priority": data.draw(st.integers(0, 2)),
                     "arrival": {"kind": "burst", "rate": rate, "size": burst} if burst > 1 else {"kind": "poisson", "rate": rate},
                     "service": {"kind": "exponential", "mean": 1.0}})
    s = scenario(duration=200.0, seed=seed, queues=[{"name": q} for q in queues], jobs=jobs,
                 pools=[{"name": "p", "queues": queues, "policy": "priority", "workers": servers}])
    # When the model runs, and the reference gets the same arrivals, services and priorities
    d = draw_jobs(s)
    out = simulate(s).jobs
    starts = priority_reference(out["enqueued"].to_numpy(), d.service, out["priority"].to_numpy(), servers)
    # Then every job starts at exactly the same time
    assert np.array_equal(out["started"].to_numpy(), starts)


def test_an_overloaded_system_drains_after_the_arrivals_stop() -> None:
    # Given rho = 2 on two slots for 100 s
    s = scenario(duration=100.0, jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 4.0},
                                        "service": {"kind": "exponential", "mean": 1.0}}])
    r = simulate(s)
    # Then every job still completes; the backlog drains at the pool's speed after t = 100
    assert r.summary["jobs"]["unfinished"] == 0 and (r.jobs["outcome"] == "completed").all()
    work = float((r.jobs["finished"] - r.jobs["started"]).sum())
    assert r.jobs["finished"].max() == pytest.approx(work / 2, rel=0.02)
    m = Model(s, draw_jobs(s), seed=3)
    m.run()
    with pytest.raises(RuntimeError, match="once"):
        m.run()


# --------------------------------------------------------------------------- equivalent systems, job by job


def _starts(s: Scenario) -> pd.Series:
    jobs = simulate(s).jobs
    return jobs.set_index(["type", "enqueued"])["started"].sort_index()


def test_a_concurrency_limit_acts_like_that_many_servers() -> None:
    # A queue limited to 3 active jobs on a pool of 10 slots is an M/M/3 queue, job by job
    job = [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.6},
            "service": {"kind": "exponential", "mean": 1.0}}]
    limited = scenario(duration=500.0, jobs=job, queues=[{"name": "q", "concurrency_limit": 3}],
                       pools=[{"name": "p", "queues": ["q"], "workers": 5, "concurrency": 2}])
    three = scenario(duration=500.0, jobs=job, pools=[{"name": "p", "queues": ["q"], "workers": 3}])
    a, b = _starts(limited), _starts(three)
    assert len(a) > 1000 and (a > a.index.get_level_values("enqueued")).mean() > 0.3
    pd.testing.assert_series_equal(a, b)


@pytest.mark.parametrize("policy", ["ordered", "priority"])
def test_queues_in_order_act_like_priorities(policy: str) -> None:
    # Two queues on one pool taken in order (ordered), or by priority across queues, schedule
    # exactly like one queue whose job types have those priorities
    def job(name: str, queue: str, priority: int) -> dict[str, Any]:
        return {"name": name, "queue": queue, "priority": priority, "arrival": {"kind": "poisson", "rate": 1.2},
                "service": {"kind": "exponential", "mean": 1.0}}
    two = scenario(duration=500.0, queues=[{"name": "first"}, {"name": "second"}],
                   jobs=[job("hi", "first", 0 if policy == "priority" else 5), job("lo", "second", 1 if policy == "priority" else 5)],
                   pools=[{"name": "p", "queues": ["first", "second"], "policy": policy, "workers": 3}])
    one = scenario(duration=500.0, jobs=[job("hi", "q", 0), job("lo", "q", 1)],
                   pools=[{"name": "p", "queues": ["q"], "workers": 3}])
    pd.testing.assert_series_equal(_starts(two), _starts(one))


def test_a_result_pickles_with_its_time_series() -> None:
    # results travel back from process pools (parameter sweeps)
    r = simulate(scenario(duration=50.0))
    back = pickle.loads(pickle.dumps(r))
    pd.testing.assert_frame_equal(back.jobs, r.jobs)
    pd.testing.assert_frame_equal(back.timeseries, r.timeseries)
    assert back.summary == r.summary and dict(back.records.extra).keys() == {"timeseries"}


# --------------------------------------------------------------------------- floating point, job table


@settings(max_examples=examples(500), deadline=None)
@given(now=st.floats(0, 1e7), gap=st.floats(0, 1e7))
def test_exact_delay_reaches_the_time_or_the_next_float(now: float, gap: float) -> None:
    at = now + gap
    d = exact_delay(now, at)
    assert d >= 0 and now + d in (at, math.nextafter(at, math.inf))


def test_exact_delay_mostly_hits_the_time_exactly() -> None:
    rng = np.random.default_rng(0)
    pairs = np.sort(rng.uniform(0, 10, (20000, 2)), axis=1).tolist()
    late = sum(now + exact_delay(now, at) != at for now, at in pairs)
    assert late < 0.05 * len(pairs)


def test_an_arrival_floats_cannot_reach_fires_one_ulp_later_and_says_so() -> None:
    # Given two arrivals whose gap, added to the first, rounds below the second
    t0, t1 = 0.13598378895752822, 0.8838741688167039
    assert t0 + (t1 - t0) != t1
    s = scenario(pools=[{"name": "p", "queues": ["q"], "workers": 2}])
    jobs = Model(s, JobDraws(time=np.array([t0, t1]), type=np.zeros(2, dtype=np.int64),
                             service=np.ones(2)), seed=0).run().jobs
    # Then the second job is enqueued and starts one ulp after its drawn time, never before
    assert jobs["enqueued"].tolist() == [t0, math.nextafter(t1, math.inf)]
    assert (jobs["started"] == jobs["enqueued"]).all()


def test_job_table_appends_children_with_their_parent() -> None:
    table = JobTable(type_=[0], queue=[0], priority=[0], enqueued=[0.0], service=[1.0])
    child = table.add(type_=1, queue=0, priority=3, enqueued=2.0, service=0.5, parent=0)
    table.started[child], table.finished[child], table.outcome[child] = 2.5, 3.0, COMPLETED
    frame = table.frame(type_names=["a", "b"], queue_names=["q"], worker_names=[])
    assert frame["job_id"].tolist() == ["j0", "j1"] and frame["parent"].tolist() == ["", "j0"]
    assert frame["outcome"].tolist() == ["unfinished", "completed"]
    assert frame.loc[1, ["type", "priority", "started", "finished"]].tolist() == ["b", 3, 2.5, 3.0]


def test_unknown_policy_and_bad_limit_are_refused() -> None:
    with pytest.raises(ValueError, match="policy"):
        make_picker("random", [0, 1], [1.0, 1.0], Queues(2, [[], []]))
    with pytest.raises(ValueError, match="limit"):
        ConcurrencyLimit(0)


def test_pools_sharing_a_queue_act_like_one_pool_of_all_their_slots() -> None:
    job = [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 4.2},
            "service": {"kind": "exponential", "mean": 1.0}}]
    split = scenario(duration=500.0, jobs=job, pools=[{"name": "p1", "queues": ["q"], "workers": 3},
                                                      {"name": "p2", "queues": ["q"], "workers": 1, "concurrency": 2}])
    whole = scenario(duration=500.0, jobs=job, pools=[{"name": "p", "queues": ["q"], "workers": 5}])
    pd.testing.assert_series_equal(_starts(split), _starts(whole))
    assert simulate(split).jobs["worker"].str.startswith("p2").mean() > 0.2


# --------------------------------------------------------------------------- the built-in workshop


def test_the_workshop_tells_the_seed_story() -> None:
    from qsim.scenarios import builtin

    r = simulate(builtin("workshop"))
    att = r.records.attempts
    # at most four in the back room although six hands are free to work
    ev = pd.concat([pd.DataFrame({"t": att["start"], "d": 1}), pd.DataFrame({"t": att["end"], "d": -1})])
    assert ev.sort_values(["t", "d"])["d"].cumsum().max() == 4 and r.records.slots == ((0.0, 6),)
    # the bent slips fail every try and go to the problem tray after three; the tally shows one
    bent = r.jobs[r.jobs["type"] == "bent-slip"]
    assert (bent["outcome"] == "dead").all() and (bent["attempts"] == 3).all() and len(bent) == 2
    assert r.summary["jobs"]["dead"] == 1 and r.summary["by_type"]["bent-slip"]["dead"] == 1
    assert r.summary["jobs"]["completed"] == r.summary["by_type"]["cut"]["completed"] > 500
    assert r.summary["jobs"]["lost"] == 0
