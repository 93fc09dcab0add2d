"""Compact records: the model's jobs and attempts tables hold categories and narrow ints, same values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qsim.model import JobDraws, Model, simulate
from qsim.records import ATTEMPT_COLUMNS, JOB_COLUMNS, Records, categorical, jobs_frame, small_ints
from qsim.scenario import Scenario
from qsim.scenarios import load
from qsim.summary import _max_depth, summarize

NAMES = ("type", "queue", "worker", "outcome", "parent")
COUNTS = ("priority", "attempts", "failed_attempts", "stalled")


def plain(frame: pd.DataFrame, schema: dict[str, str]) -> pd.DataFrame:
    """The frame with the records' plain dtypes (object strings, int64), as before compact columns."""
    return frame.astype(schema)


def two_priorities() -> Scenario:
    return Scenario.from_dict({
        "name": "compact", "seed": 0, "duration": 1.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "b", "queue": "q", "priority": 0, "service": {"kind": "constant", "mean": 1.0},
                  "arrival": {"kind": "poisson", "rate": 1.0}},
                 {"name": "a", "queue": "q", "priority": 1, "service": {"kind": "constant", "mean": 1.0},
                  "arrival": {"kind": "poisson", "rate": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 1}],
    })


def test_a_small_runs_jobs_table_is_compact_and_holds_the_expected_values() -> None:
    # Given three jobs on one worker: b at 0, a (lower priority) at 0.1, b at 0.2
    draws = JobDraws(time=np.array([0.0, 0.1, 0.2]), type=np.array([0, 1, 0]), service=np.ones(3))
    # When they run
    jobs = Model(two_priorities(), draws, seed=0).run().jobs
    # Then the names are categories (sorted, only those in use), the counts int8, ids and times as before
    assert all(isinstance(jobs[c].dtype, pd.CategoricalDtype) for c in NAMES)
    assert all(jobs[c].dtype == np.int8 for c in COUNTS)
    assert jobs["job_id"].dtype == object
    assert all(jobs[c].dtype == np.float64 for c in ("enqueued", "started", "finished"))
    assert list(jobs["type"].cat.categories) == ["a", "b"] and list(jobs["worker"].cat.categories) == ["p-0"]
    # and the values are what the run did: the second b overtakes a
    expected = pd.DataFrame({
        "job_id": ["j0", "j1", "j2"], "type": ["b", "a", "b"], "queue": ["q"] * 3, "priority": [0, 1, 0],
        "enqueued": [0.0, 0.1, 0.2], "started": [0.0, 2.0, 1.0], "finished": [1.0, 3.0, 2.0],
        "attempts": [1] * 3, "failed_attempts": [0] * 3, "stalled": [0] * 3, "worker": ["p-0"] * 3,
        "outcome": ["completed"] * 3, "parent": [""] * 3}).astype(dict(JOB_COLUMNS))
    pd.testing.assert_frame_equal(plain(jobs, dict(JOB_COLUMNS)), expected)


@pytest.mark.parametrize("name", ["workshop", "flows-fanout", "sigterm-grace", "steady"])
def test_compact_tables_write_the_same_csv_and_summary_as_plain_ones(name: str) -> None:
    # Given a built-in scenario's records (retries, DLQ, flows with parents, a shutdown, a core run)
    r = simulate(load(name), max_jobs=400)
    assert r.records is not None
    jobs, att = r.records.jobs, r.records.attempts
    assert isinstance(att["result"].dtype, pd.CategoricalDtype) and isinstance(att["worker"].dtype, pd.CategoricalDtype)
    flat_jobs, flat_att = plain(jobs, dict(JOB_COLUMNS)), plain(att, dict(ATTEMPT_COLUMNS))
    # Then the CSV (what `qsim simulate --out` writes) is the same byte for byte
    assert jobs.to_csv(index=False) == flat_jobs.to_csv(index=False)
    assert att.to_csv(index=False) == flat_att.to_csv(index=False)
    # and so is the Summary computed from plain columns
    flat = Records(jobs=flat_jobs, attempts=flat_att, slots=r.records.slots, workers=r.records.workers)
    assert summarize(flat, scenario=r.scenario.name, source="model", seed=r.seed, warmup=r.scenario.warmup) \
        == r.summary
    # and each attempt's job id is the jobs table's very string (no second copy of the ids)
    ids = dict(zip(jobs["job_id"], jobs["job_id"]))
    assert all(a is ids[a] for a in att["job_id"])


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
