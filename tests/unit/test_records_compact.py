"""Friendly, compact records: plain dtypes (assign, concatenate) with the name columns sharing their strings."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from qsim.model import JobDraws, Model, simulate
from qsim.results.records import ATTEMPT_COLUMNS, JOB_COLUMNS, Records, categorical, jobs_frame, name_column, small_ints
from qsim.results.summary import _codes, _max_depth, summarize
from qsim.scenarios import load
from qsim.spec.scenario import Scenario

NAMES = ("type", "queue", "worker", "outcome", "parent")
COUNTS = ("priority", "attempts", "failed_attempts", "stalled")


def two_priorities() -> Scenario:
    return Scenario.from_dict({
        "name": "compact", "seed": 0, "duration": 1.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "b", "queue": "q", "priority": 0, "service": {"kind": "constant", "mean": 1.0},
                  "arrival": {"kind": "poisson", "rate": 1.0}},
                 {"name": "a", "queue": "q", "priority": 1, "service": {"kind": "constant", "mean": 1.0},
                  "arrival": {"kind": "poisson", "rate": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 1}],
    })


def test_a_small_runs_jobs_table_has_plain_dtypes_and_the_expected_values() -> None:
    # Given three jobs on one worker: b at 0, a (lower priority) at 0.1, b at 0.2
    draws = JobDraws(time=np.array([0.0, 0.1, 0.2]), type=np.array([0, 1, 0]), service=np.ones(3))
    # When they run
    jobs = Model(two_priorities(), draws, seed=0).run().jobs
    # Then every column has the records' plain dtype (the engine's too)
    assert dict(jobs.dtypes.astype(str)) == dict(JOB_COLUMNS)
    # and the values are what the run did: the second b overtakes a
    expected = pd.DataFrame({
        "job_id": ["j0", "j1", "j2"], "type": ["b", "a", "b"], "queue": ["q"] * 3, "priority": [0, 1, 0],
        "enqueued": [0.0, 0.1, 0.2], "started": [0.0, 2.0, 1.0], "finished": [1.0, 3.0, 2.0],
        "attempts": [1] * 3, "failed_attempts": [0] * 3, "stalled": [0] * 3, "worker": ["p-0"] * 3,
        "outcome": ["completed"] * 3, "parent": [""] * 3}).astype(dict(JOB_COLUMNS))
    pd.testing.assert_frame_equal(jobs, expected)


@pytest.mark.parametrize("name", ["workshop", "flows-fanout", "sigterm-grace", "steady"])
def test_record_frames_behave_like_plain_frames(name: str) -> None:
    # Given a built-in scenario's records (retries, DLQ, flows with parents, a shutdown, a core run)
    r = simulate(load(name), max_jobs=400)
    assert r.records is not None
    jobs, att = r.records.jobs, r.records.attempts
    assert dict(att.dtypes.astype(str)) == dict(ATTEMPT_COLUMNS)
    # Then a new value can be written into any column, as into any pandas frame
    edited = jobs.copy()
    edited.loc[0, "type"] = "a type the scenario never had"
    edited.loc[1, "priority"] = 1000
    edited["queue"] = edited["queue"].replace({jobs["queue"].iloc[0]: "renamed"})
    assert edited.loc[0, "type"] == "a type the scenario never had" and edited.loc[1, "priority"] == 1000
    assert (edited["queue"] == "renamed").any()
    # and the run's own frames did not change (copy-on-write: the attempts share the jobs' arrays)
    assert jobs.loc[0, "type"] != "a type the scenario never had" and not (jobs["queue"] == "renamed").any()
    att.loc[0, "start"] = -1.0
    assert jobs["started"].min() >= 0 and r.records.attempts.loc[0, "start"] == -1.0
    # and frames of two sources concatenate with their dtypes kept (an engine-like frame: built from lists)
    engine = jobs_frame({c: jobs[c].tolist() for c in JOB_COLUMNS})
    both = pd.concat([jobs.assign(source="model"), engine.assign(source="engine")], ignore_index=True)
    assert {c: str(t) for c, t in both.dtypes.items() if c in JOB_COLUMNS} == dict(JOB_COLUMNS)
    assert both.groupby("source")["type"].value_counts().loc["model"].equals(
        both.groupby("source")["type"].value_counts().loc["engine"])


@pytest.mark.parametrize("name", ["workshop", "flows-fanout", "sigterm-grace", "steady"])
def test_record_frames_stay_compact(name: str) -> None:
    # Given a built-in scenario's records
    r = simulate(load(name), max_jobs=400)
    assert r.records is not None
    jobs, att = r.records.jobs, r.records.attempts
    # Then each name column holds one str object per name, every row pointing to it
    for frame, cols in ((jobs, NAMES), (att, ("worker", "result"))):
        for c in cols:
            assert len({id(v) for v in frame[c]}) == frame[c].nunique(), c
    # and each attempt's job id is the jobs table's very string (no second copy of the ids)
    ids = dict(zip(jobs["job_id"], jobs["job_id"]))
    assert all(a is ids[a] for a in att["job_id"])
    # and the Summary from categories and narrow ints (what another source may give) is the same
    coded = {c: (categorical(*pd.factorize(jobs[c], sort=True)[0:2]) if c in NAMES else jobs[c]) for c in JOB_COLUMNS}
    coded.update({c: small_ints(jobs[c].to_numpy()) for c in COUNTS})
    flat = Records(jobs=jobs_frame(coded), attempts=att, slots=r.records.slots, workers=r.records.workers)
    assert jobs_frame(coded).to_csv(index=False) == jobs.to_csv(index=False)
    assert summarize(flat, scenario=r.scenario.name, source="model", seed=r.seed, warmup=r.scenario.warmup,
                     window=r.scenario.window_length) == r.summary


def test_a_core_runs_attempts_share_the_jobs_arrays() -> None:
    # Given a core run (one attempt per job: no mechanism beyond pools) in which every job started
    r = simulate(mmc(duration=100.0))
    assert r.records is not None
    jobs, att = r.records.jobs, r.records.attempts
    # Then its attempts table holds no copy of the jobs' times, ids or workers
    for a, j in (("start", "started"), ("end", "finished"), ("job_id", "job_id"), ("worker", "worker")):
        assert np.shares_memory(att[a].to_numpy(), jobs[j].to_numpy()), a


def mmc(duration: float) -> Scenario:
    """M/M/10 at rho = 0.8 (the model speed benchmark's)."""
    return Scenario.from_dict({
        "name": "mmc", "seed": 1, "duration": duration, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                  "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 10}]})


def test_memory_per_job_with_records_stays_small() -> None:
    # Given an M/M/10 run of 200,000 jobs with records on (the README's budget: 300 MB at 10^6 jobs)
    s = mmc(duration=25_000.0)
    n = 200_000
    gc.collect()
    tracemalloc.start()
    try:
        summary = simulate(s, max_jobs=n).summary
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Then the peak (draws, run, frames, Summary) is under 300 bytes a job (285 measured, here and at 10^6;
    # pandas' factorize of the name columns in the Summary alone would add some 60)
    assert summary["jobs"]["arrived"] == n
    assert peak / n < 300, f"{peak / n:.0f} bytes a job"


def test_name_columns_and_codes() -> None:
    col = name_column(np.array([2, 0, 2], dtype=np.int8), ["z", "unused", "a"])
    assert col.dtype == object and list(col) == ["a", "z", "a"] and col[0] is col[2]
    assert name_column(np.zeros(0, dtype=np.int64), []).shape == (0,)
    codes, names = _codes(pd.Series(col))
    assert list(names) == ["a", "z"] and codes.tolist() == [0, 1, 0]
    many = pd.Series([f"t{i}" for i in range(100)] + [None])  # many names, a missing one: pandas' factorize
    codes, names = _codes(many)
    assert codes[-1] == -1 and len(names) == 100


def test_categorical_and_small_ints() -> None:
    col = categorical(np.array([2, 0, 2], dtype=np.int8), ["z", "unused", "a"])
    assert list(col.categories) == ["a", "z"] and list(col) == ["a", "z", "a"]
    dup = categorical(np.array([0, 1]), ["x", "x"])  # names that repeat: plain strings
    assert isinstance(dup, np.ndarray) and dup.dtype == object and list(dup) == ["x", "x"]
    assert small_ints([0, 127]).dtype == np.int8 and small_ints([-1, 128]).dtype == np.int16
    assert small_ints([0, 2**31]).dtype == np.int64 and list(small_ints([-(2**20), 5])) == [-(2**20), 5]
    bad = categorical(np.array([0]), ["vanished"])
    with pytest.raises(ValueError, match="outcome must be one of"):
        jobs_frame({"job_id": ["j0"], "type": ["a"], "queue": ["q"], "priority": [0], "enqueued": [0.0],
                    "started": [0.0], "finished": [1.0], "attempts": [1], "failed_attempts": [0], "stalled": [0],
                    "worker": ["w"], "outcome": bad, "parent": [""]})


def _max_depth_by_sorting(enq: np.ndarray, started: np.ndarray, warmup: float, end: float) -> int:
    """The definition: sort every arrival (+1) and start (-1), starts first at equal times."""
    if enq.size == 0:
        return 0
    times = np.concatenate([enq, started[~np.isnan(started)]])
    steps = np.concatenate([np.ones(enq.size), -np.ones(int((~np.isnan(started)).sum()))])
    order = np.lexsort((steps, times))
    depth, t = np.cumsum(steps[order]), times[order]
    inside, before = (t >= warmup) & (t <= end), t < warmup
    at_warmup = depth[before][-1] if before.any() else 0.0
    return int(max(at_warmup, depth[inside].max() if inside.any() else 0.0))


def test_max_depth_by_counting_equals_the_definition() -> None:
    rng = np.random.default_rng(7)
    for _ in range(3000):  # small integer times: many ties; some unstarted; some clocks skewed
        n = int(rng.integers(0, 10))
        enq = rng.integers(0, 8, n).astype(float)
        if rng.random() < 0.5:
            enq.sort()
        started = enq + rng.integers(0, 4, n)
        started[rng.random(n) < 0.3] = np.nan
        if rng.random() < 0.1:
            started -= 2
        warmup, end = float(rng.integers(0, 6)), float(rng.integers(0, 12))
        assert _max_depth(enq, started, warmup, end) == _max_depth_by_sorting(enq, started, warmup, end)
