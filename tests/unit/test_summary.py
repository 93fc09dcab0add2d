"""The Summary: one function, the definitions of docs/reference/summary.md, checked on hand-made records."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from qsim.results.records import Records, attempts_frame, jobs_frame
from qsim.results.summary import STAT_KEYS, stats, summarize

NAN = float("nan")


def make_jobs(rows: list[tuple[Any, ...]]) -> Any:
    """rows: (type, queue, enqueued, started, finished, outcome)."""
    n = len(rows)
    cols = list(zip(*rows))
    return jobs_frame({
        "job_id": [f"j{i}" for i in range(n)], "type": cols[0], "queue": cols[1], "priority": [0] * n,
        "enqueued": cols[2], "started": cols[3], "finished": cols[4],
        "attempts": [0 if np.isnan(s) else 1 for s in cols[3]], "failed_attempts": [0] * n, "stalled": [0] * n,
        "worker": ["w"] * n, "outcome": cols[5], "parent": [""] * n,
    })


def test_stats_of_nothing_are_null_and_numbers_are_numpy_percentiles() -> None:
    assert stats(np.array([])) == {k: None for k in STAT_KEYS}
    x = np.arange(101.0)
    s = stats(x)
    assert s == {"mean": 50.0, "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}


def test_definitions_on_a_small_run() -> None:
    # Given two jobs before warmup and four after, one of them dead and one unfinished
    jobs = make_jobs([
        ("a", "q", 0.0, 0.0, 2.0, "completed"),      # before warmup: not counted
        ("a", "q", 0.5, 2.0, 3.0, "completed"),      # before warmup: not counted
        ("a", "q", 1.0, 3.0, 4.0, "completed"),
        ("b", "r", 1.0, 1.0, 1.5, "dead"),
        ("b", "r", 2.0, NAN, NAN, "unfinished"),
        ("a", "q", 3.0, 4.0, 6.0, "completed"),
    ])
    summary = summarize(Records(jobs=jobs, slots=((0.0, 2),)), scenario="s", source="model", seed=3, warmup=1.0)
    # Then counts cover jobs enqueued at or after warmup
    assert summary["jobs"] == {"arrived": 4, "completed": 2, "dead": 1, "failed_attempts": 0,
                               "stalled": 0, "unfinished": 1, "lost": 0}
    # wait: enqueue -> first start, jobs that started (2, 0, 1)
    assert summary["wait"]["mean"] == pytest.approx(1.0) and summary["wait"]["max"] == 2.0
    # latency: completed jobs only (3, 3)
    assert summary["latency"]["mean"] == pytest.approx(3.0)
    # window: warmup (1) to last completion (6) = 5 s; 2 completions
    assert summary["throughput"] == pytest.approx(2 / 5)
    # busy inside [1, 6]: 1 + 1 + 1 + 0.5 + 2 = 5.5 over 2 slots x 5 s
    assert summary["utilization"] == pytest.approx(5.5 / 10)
    assert summary["by_type"]["b"] == {"completed": 0, "dead": 1, "wait": stats(np.array([0.0])),
                                       "latency": stats(np.array([]))}
    assert summary["by_queue"]["q"]["completed"] == 2
    # queue q: at t=1 jobs enqueued 0.5 and 1.0 are waiting (0.0 started at 0)
    assert summary["by_queue"]["q"]["max_depth"] == 2
    assert summary["by_queue"]["r"]["max_depth"] == 1
    json.dumps(summary, allow_nan=False)  # the contract is plain JSON


def test_lost_is_what_is_neither_completed_dead_nor_unfinished() -> None:
    jobs = make_jobs([("a", "q", 0.0, 0.0, 1.0, "completed"), ("a", "q", 0.0, 0.5, NAN, "lost")])
    summary = summarize(Records(jobs=jobs, slots=((0.0, 1),)), scenario="s", source="engine", seed=0)
    j = summary["jobs"]
    assert j["lost"] == 1 == j["arrived"] - j["completed"] - j["dead"] - j["unfinished"]


def test_utilization_follows_slot_changes_and_attempts() -> None:
    jobs = make_jobs([("a", "q", 0.0, 0.0, 10.0, "completed")])
    attempts = attempts_frame({"job_id": ["j0", "j0"], "attempt": [1, 2], "worker": ["w", "w"],
                               "start": [0.0, 6.0], "end": [4.0, 10.0], "result": ["failed", "ok"]})
    # 4 slots for 5 s, then 1 slot: 25 slot-seconds; busy 8 s
    records = Records(jobs=jobs, attempts=attempts, slots=((0.0, 4), (5.0, 1)))
    assert records.slot_seconds(0, 10) == 25
    assert summarize(records, scenario="s", source="model", seed=0)["utilization"] == pytest.approx(8 / 25)


def test_an_attempt_that_outlives_its_process_keeps_its_slot_in_the_utilization() -> None:
    # Given 1 slot that leaves at 2 s (its process killed) while its attempt holds the job's lock until a
    # stalled check at 8 s, and a new process's slot from 8 s on running the retry until 10 s
    jobs = make_jobs([("a", "q", 0.0, 0.0, 10.0, "completed")])
    attempts = attempts_frame({"job_id": ["j0", "j0"], "attempt": [1, 2], "worker": ["w1", "w2"],
                               "start": [0.0, 8.0], "end": [8.0, 10.0], "result": ["stalled", "ok"]})
    records = Records(jobs=jobs, attempts=attempts, slots=((0.0, 1), (2.0, 0), (8.0, 1)))
    # Then the held slot counts while the attempt holds it (0..8 s) beside the live one (8..10 s): 10 s busy
    # of 10 slot-seconds, not 10 of the live slots' 4 (utilization 2.5, outside the documented 0..1)
    assert records.slot_seconds(0, 10) == 4
    assert summarize(records, scenario="s", source="engine", seed=0)["utilization"] == pytest.approx(1.0)


@pytest.mark.parametrize("kind", ["sigkill", "sigterm"])
def test_utilization_stays_within_0_and_1_when_a_signal_leaves_a_pool_without_live_processes(kind: str) -> None:
    from qsim.api import simulate
    from qsim.spec.scenario import Scenario

    # Given one process, signalled at 10 s, and the next started only at 100 s: the signalled one's
    # attempt (draining, or locked until the new process's stalled check) outlives its slot
    s = Scenario.from_dict({
        "name": "gap", "duration": 60.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
                  "service": {"kind": "constant", "mean": 0.5}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1}],
        "events": [{"at": 10.0, "kind": kind, "pool": "p"}, {"at": 100.0, "kind": "start", "pool": "p"}]})
    u = simulate(s).summary["utilization"]
    # Then the share of the slots running attempts is a share (it was 3.2 after the kill)
    assert 0.0 < u <= 1.0


def test_nothing_completed_gives_zero_rates_and_null_stats() -> None:
    jobs = make_jobs([("a", "q", 0.0, NAN, NAN, "unfinished")])
    summary = summarize(Records(jobs=jobs, slots=((0.0, 1),)), scenario="s", source="model", seed=0)
    assert summary["throughput"] == 0.0 and summary["utilization"] == 0.0
    assert summary["latency"] == {k: None for k in STAT_KEYS}


def test_jobs_frame_rejects_bad_columns_and_outcomes() -> None:
    with pytest.raises(ValueError, match="missing"):
        jobs_frame({"job_id": ["x"]})
    with pytest.raises(ValueError, match="outcome must be one of"):
        make_jobs([("a", "q", 0.0, 0.0, 1.0, "vanished")])
