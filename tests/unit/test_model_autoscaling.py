"""Autoscalers in the model (qsim/model/autoscaling.py): the checks of the autoscaling issue.

The load: 2 jobs/s of constant 1 s jobs, then 8/s for 10 minutes (a step x4 at
t = 600 s), then 2/s again; a step policy on the oldest job's age (up when
above 2 s, down below 0.5 s, 3 workers a step, polls every 15 s, at least 4
workers). SLO: p95 wait <= 2 s per 60 s window (jobs by their enqueue time).
The checks hold at every seed from 1 to 40 (tried); the tests run seed 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from qsim import Scenario
from qsim.model import simulate

STEP_AT, STEP_END, POLL, SLO = 600.0, 1200.0, 15.0, 2.0


def step_scenario(*, start_delay: float = 0.0, down_delay: float = 600.0, grace: float = 30.0, seed: int = 1,
                  **policy: Any) -> Scenario:
    scaler = {"pool": "p", "min": 4, "max": 20, "policy": "step", "up_when": 2.0, "down_when": 0.5, "step": 3,
              "up_delay": POLL, "down_delay": down_delay, "poll": POLL, "grace": grace,
              "start_delay": {"kind": "constant", "mean": start_delay}, **policy}
    return Scenario.from_dict({
        "name": "step-x4", "duration": 1800.0, "seed": seed, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "constant", "mean": 1.0},
                  "arrival": {"kind": "profile", "shape": "step",
                              "points": [[0, 2.0], [STEP_AT, 2.0], [STEP_AT, 8.0], [STEP_END, 8.0], [STEP_END, 2.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4}],
        "autoscalers": [scaler]})


def window_p95(result: Any, width: float = 60.0) -> dict[float, float]:
    """p95 wait of the jobs enqueued in each window, by the window's start."""
    jobs = result.records.jobs
    enq, start = jobs["enqueued"].to_numpy(), jobs["started"].to_numpy()
    out = {}
    for a in np.arange(0.0, result.scenario.duration, width):
        m = (enq >= a) & (enq < a + width)
        out[float(a)] = float(np.percentile(start[m] - enq[m], 95))
    return out


def ups(result: Any) -> list[float]:
    traj = result.summary["autoscaling"]["p"]["trajectory"]
    return [t for (t, asked, _), (_, before, _) in zip(traj[1:], traj) if asked > before]


def test_step_policy_with_no_cold_start_recovers_after_the_expected_polls() -> None:
    # Given 4 workers (4 jobs/s short of 8/s from t = 600) and start_delay 0
    r = simulate(step_scenario())
    # Then the polls add 3 workers each while the oldest job is older than 2 s: the first at 615 (15 s of
    # backlog, about 60 jobs), and 2 polls (615, 630) bring capacity to 10 > 8 jobs/s; the backlog (about
    # 75 jobs at 630) then drains at 2/s or faster: gone by about 670
    first = [t for t in ups(r) if t >= STEP_AT]
    assert first[:2] == [615.0, 630.0]
    # And p95 is back within the SLO from the first window after the drain: [720, 780) on
    p95 = window_p95(r)
    assert p95[600.0] > SLO
    assert all(p95[a] <= SLO for a in np.arange(720.0, STEP_END, 60.0)), p95
    assert r.summary["jobs"]["lost"] == 0


def test_a_long_cold_start_predicts_the_miss() -> None:
    # Given the same policy but new workers taking work only 240 s after they are asked for
    r = simulate(step_scenario(start_delay=240.0))
    p95 = window_p95(r)
    # Then every window from the step until the first new workers could help misses the SLO, and longer
    assert all(p95[a] > SLO for a in np.arange(STEP_AT, STEP_AT + 300.0, 60.0)), p95
    quick = window_p95(simulate(step_scenario()))
    misses = sum(v > SLO for v in p95.values())
    assert misses >= sum(v > SLO for v in quick.values()) + 4
    # And the run keeps asking for workers it cannot use yet: up to max while the first are still starting
    traj = r.summary["autoscaling"]["p"]["trajectory"]
    assert any(asked == 20 and ready == 4 for _, asked, ready in traj)


def test_a_short_down_delay_flaps_and_a_longer_one_does_not() -> None:
    short = simulate(step_scenario(down_delay=POLL), records=False).summary["autoscaling"]["p"]
    long = simulate(step_scenario(down_delay=600.0), records=False).summary["autoscaling"]["p"]
    # A 15 s down-delay removes workers as soon as the backlog is gone, below the 8 jobs/s of the peak,
    # and adds them back a poll or two later; waiting 600 s (the flap window) removes every flap
    assert short["flaps"] >= 5
    assert long["flaps"] == 0
    assert short["scale_events"] > long["scale_events"]


def test_jobs_cut_at_scale_down_are_counted_and_handed_back() -> None:
    # Given a grace far shorter than the 1 s jobs: every scale-down of a busy worker cuts its job
    r = simulate(step_scenario(down_delay=POLL, grace=0.2))
    a = r.summary["autoscaling"]["p"]
    drains = r.records.extra["drains"]
    assert a["cut_jobs"] == int(drains["jobs_cut_off"].sum()) > 0
    # Then the cut jobs ran again elsewhere: none lost, all completed
    assert r.summary["jobs"]["lost"] == 0 and r.summary["jobs"]["completed"] == r.summary["jobs"]["arrived"]


def test_worker_seconds_count_processes_from_creation_to_exit() -> None:
    # Given an autoscaler that never needs to move (4 workers, min 4, a load they carry)
    s = step_scenario(start_delay=10.0)
    flat = Scenario.from_dict({**s.to_dict(), "jobs": [{**s.to_dict()["jobs"][0],
                                                         "arrival": {"kind": "poisson", "rate": 1.0}}]})
    a = simulate(flat, records=False).summary["autoscaling"]["p"]
    assert a["scale_events"] == 0 and a["worker_seconds"] == pytest.approx(4 * 1800.0)
    assert a["workers"] == {"min": 4, "max": 4, "mean": pytest.approx(4.0)}
    # And a run that scales counts each process's cold start and drain too (more than its ready time)
    r = simulate(s, records=False).summary["autoscaling"]["p"]
    assert r["worker_seconds"] > 4 * 1800.0 and r["start_delays"]["mean"] == 10.0


def test_the_same_seed_gives_the_same_run_and_cold_starts_follow_their_distribution() -> None:
    s = step_scenario(start_delay=30.0)
    s = Scenario.from_dict({**s.to_dict(), "autoscalers": [{**s.to_dict()["autoscalers"][0],
                                                             "start_delay": {"kind": "exponential", "mean": 30.0}}]})
    a = simulate(s, records=False).summary
    b = simulate(s, records=False).summary
    assert a == b
    assert a["autoscaling"]["p"]["start_delays"]["drawn"] > 0
