"""Model: the sliding-window rate limit, priority aging, and the per-job engine overhead."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from qsim.model import JobDraws, Model, simulate
from qsim.spec.scenario import Scenario


def scenario(*, queues: list[dict[str, Any]] | None = None, jobs: list[dict[str, Any]] | None = None,
             pools: list[dict[str, Any]] | None = None, **top: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "t", "seed": 5, "duration": 100.0, "queues": queues or [{"name": "q"}],
        "jobs": jobs or [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 10.0},
                          "service": {"kind": "exponential", "mean": 0.1}}],
        "pools": pools or [{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 1}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


def max_in_window(starts: np.ndarray, per: float) -> int:
    """The most starts any half-open window [t, t + per) holds (t at a start: enough)."""
    s = np.sort(starts)
    return int((np.searchsorted(s, s + per - 1e-9, side="left") - np.arange(s.size)).max()) if s.size else 0


# --------------------------------------------------------------------------- rate limit


@pytest.mark.slow
def test_rate_limit_throughput_is_max_over_per_at_twice_the_demand() -> None:
    # Given demand of 20 jobs/s, 40 slots, and a limit of 10 starts per second
    s = scenario(duration=400.0, queues=[{"name": "q", "rate_limit": {"max": 10, "per": 1.0}}],
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 20.0},
                        "service": {"kind": "exponential", "mean": 0.2}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 40}])
    r = simulate(s)
    # Then throughput is max / per within 2% (warmup 0: the Summary counts every completion in its window)
    assert r.summary["throughput"] == pytest.approx(10.0, rel=0.02)
    done = r.jobs["finished"].to_numpy()
    assert np.sum((done >= 100) & (done < 300)) / 200 == pytest.approx(10.0, rel=0.02)
    starts = r.records.attempts["start"].to_numpy()
    # and no window of length per ever holds more than max starts (the limit is reached: exactly max)
    assert max_in_window(starts, 1.0) == 10
    assert r.summary["jobs"]["lost"] == 0 and r.summary["jobs"]["unfinished"] == 0


def test_rate_limit_is_a_sliding_window_not_a_fixed_one() -> None:
    # Given a burst of 10 jobs at t = 0.9 and 10 more at t = 1.1, a limit of 5 per 1 s
    s = scenario(queues=[{"name": "q", "rate_limit": {"max": 5, "per": 1.0}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 20}])
    t = np.array([0.9] * 10 + [1.1] * 10)
    r = Model(s, JobDraws(time=t, type=np.zeros(20, dtype=np.int64), service=np.full(20, 0.01)), seed=0).run()
    starts = np.sort(r.records.attempts["start"].to_numpy())
    # Then 5 start at 0.9, the next 5 exactly one window later (a fixed window would let 5 more at 1.0)
    assert starts[:5].tolist() == [0.9] * 5
    assert starts[5:10] == pytest.approx([1.9] * 5)
    assert starts[10:15] == pytest.approx([2.9] * 5)
    assert max_in_window(starts, 1.0) == 5


def test_rate_and_concurrency_limits_hold_together_across_pools() -> None:
    s = scenario(duration=60.0, queues=[{"name": "q", "rate_limit": {"max": 3, "per": 0.5}, "concurrency_limit": 2}],
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                        "service": {"kind": "exponential", "mean": 0.2}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 3}, {"name": "r", "queues": ["q"], "workers": 2}])
    r = simulate(s)
    att = r.records.attempts
    assert max_in_window(att["start"].to_numpy(), 0.5) <= 3
    ev = pd.concat([pd.DataFrame({"t": att["start"], "d": 1}), pd.DataFrame({"t": att["end"], "d": -1})])
    assert ev.sort_values(["t", "d"])["d"].cumsum().max() <= 2
    assert set(r.jobs["worker"].str[0]) == {"p", "r"}


# --------------------------------------------------------------------------- aging


def test_aging_lets_an_old_low_priority_job_pass_a_new_high_priority_one() -> None:
    # Given one slot busy until t = 7, job A (priority 5) waiting since 0, job B (priority 0) since 6
    def run(aging: float) -> list[str]:
        s = scenario(queues=[{"name": "q", "aging": aging}], pools=[{"name": "p", "queues": ["q"], "workers": 1}],
                     jobs=[{"name": "a", "queue": "q", "priority": 5, "arrival": {"kind": "constant", "rate": 1.0},
                            "service": {"kind": "constant", "mean": 1.0}},
                           {"name": "b", "queue": "q", "priority": 0, "service": {"kind": "constant", "mean": 1.0}},
                           {"name": "block", "queue": "q", "service": {"kind": "constant", "mean": 7.0}}])
        d = JobDraws(time=np.array([0.0, 0.0, 6.0]), type=np.array([2, 0, 1]), service=np.array([7.0, 1.0, 1.0]))
        jobs = Model(s, d, seed=0).run().jobs.sort_values("started")
        return jobs["type"].tolist()
    # Then with 1 s per level A's effective priority at 7 is 5 - 7 = -2 < B's 0 - 1 = -1: A first
    assert run(1.0) == ["block", "a", "b"]
    # and with 2 s per level it is 5 - 3.5 = 1.5 > B's -0.5: B first
    assert run(2.0) == ["block", "b", "a"]


def test_aging_across_the_queues_of_a_priority_pool() -> None:
    s = scenario(queues=[{"name": "old", "aging": 1.0}, {"name": "new"}],
                 pools=[{"name": "p", "queues": ["new", "old"], "workers": 1}],
                 jobs=[{"name": "a", "queue": "old", "priority": 3, "service": {"kind": "constant", "mean": 1.0},
                        "arrival": {"kind": "constant", "rate": 1.0}},
                       {"name": "b", "queue": "new", "priority": 0, "service": {"kind": "constant", "mean": 1.0}},
                       {"name": "block", "queue": "new", "service": {"kind": "constant", "mean": 5.0}}])
    d = JobDraws(time=np.array([0.0, 0.0, 4.0]), type=np.array([2, 0, 1]), service=np.array([5.0, 1.0, 1.0]))
    jobs = Model(s, d, seed=0).run().jobs.sort_values("started")
    assert jobs["type"].tolist() == ["block", "a", "b"]  # at 5: a is 3 - 5 = -2, b is 0


# --------------------------------------------------------------------------- engine overhead


def test_fetch_overhead_delays_each_start_and_caps_a_slots_rate() -> None:
    s = scenario(duration=50.0, engine={"fetch_overhead": 0.05},
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 20.0},
                        "service": {"kind": "constant", "mean": 0.05}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 1}])
    r = simulate(s)
    jobs = r.jobs
    first = jobs.iloc[0]
    assert (first["started"], first["finished"]) == pytest.approx((0.05, 0.1))
    # one slot, 0.1 s per job with overhead: 10 jobs/s, the queue grows under 20/s
    assert r.summary["throughput"] == pytest.approx(10.0, rel=0.01)
    assert (jobs["finished"] - jobs["started"]).to_numpy() == pytest.approx(0.05)


def test_ack_overhead_holds_the_slot_after_each_attempt_and_caps_a_slots_rate() -> None:
    # one slot, 0.05 s handler, 0.02 s fetch, 0.03 s ack: a job every 0.1 s at most
    s = scenario(duration=50.0, engine={"fetch_overhead": 0.02, "ack_overhead": 0.03},
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 20.0},
                        "service": {"kind": "constant", "mean": 0.05}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 1}])
    r = simulate(s)
    jobs = r.jobs
    first = jobs.iloc[0]
    assert (first["started"], first["finished"]) == pytest.approx((0.02, 0.1))  # finished when the ack lands
    assert r.summary["throughput"] == pytest.approx(10.0, rel=0.01)  # 1 / (service + fetch + ack)
    assert (jobs["finished"] - jobs["started"]).to_numpy() == pytest.approx(0.08)  # handler + ack
    att = r.records.attempts
    assert (att["end"] - att["start"]).to_numpy() == pytest.approx(0.08)


def test_ack_overhead_adds_to_the_latency_of_every_attempt() -> None:
    # light load (no waiting): each failed attempt and the final one hold their slot ack_overhead longer
    base = {"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 0.5},
            "service": {"kind": "constant", "mean": 0.1}, "fail_prob": 0.5, "attempts": 3,
            "backoff": {"kind": "fixed", "delay": 0.2}}
    runs = {ack: simulate(scenario(duration=40.0, engine={"ack_overhead": ack}, jobs=[base],
                                   pools=[{"name": "p", "queues": ["q"], "workers": 1}]))
            for ack in (0.0, 0.05)}
    without, with_ack = (runs[a].jobs for a in (0.0, 0.05))
    # the same draws: the same attempts and outcomes
    assert with_ack["attempts"].tolist() == without["attempts"].tolist()
    assert with_ack["outcome"].tolist() == without["outcome"].tolist()
    assert with_ack["attempts"].max() > 1  # some jobs retried
    latency = lambda j: (j["finished"] - j["enqueued"]).to_numpy()  # noqa: E731
    assert latency(with_ack) - latency(without) == pytest.approx(0.05 * with_ack["attempts"].to_numpy())
    assert (with_ack["started"] == without["started"]).all()  # the first handler starts at once either way
