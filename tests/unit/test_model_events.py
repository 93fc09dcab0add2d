"""Model: crashes and stalled recovery, graceful shutdown under load, scale-up."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from qsim.model import JobDraws, Model, draw_jobs, simulate
from qsim.spec.scenario import Scenario


def scenario(*, jobs: list[dict[str, Any]] | None = None, pools: list[dict[str, Any]] | None = None,
             queues: list[dict[str, Any]] | None = None, **top: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "t", "seed": 9, "duration": 100.0, "queues": queues or [{"name": "q"}],
        "jobs": jobs or [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
                          "service": {"kind": "constant", "mean": 3.0}}],
        "pools": pools or [{"name": "p", "queues": ["q"], "workers": 10, "concurrency": 2}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


# --------------------------------------------------------------------------- crashes


def test_recovered_jobs_restart_at_the_first_stalled_check_after_their_lock_runs_out() -> None:
    # Given a process killed at several times (and replaced), lock 5 s (renewed every 2.5 s from each
    # process's start), checks every 4 s, spare slots
    kills = [12.3, 30.0, 47.9, 61.1]
    s = scenario(duration=80.0, engine={"lock_duration": 5.0, "stalled_interval": 4.0, "max_stalled": 3},
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                        "service": {"kind": "constant", "mean": 3.0}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 8}],
                 events=[{"at": t, "kind": "sigkill", "pool": "p"} for t in kills]
                 + [{"at": t + 0.5, "kind": "start", "pool": "p"} for t in kills])
    r = simulate(s)
    att = r.records.attempts.sort_values(["job_id", "attempt"])
    stalled = att[att["result"] == "stalled"]
    assert len(stalled) >= 8
    # the processes: the initial four, one started 0.5 s after each kill; each kill takes the busiest
    started = {f"p-{i}": 0.0 for i in range(4)} | {f"p-{4 + i}": t + 0.5 for i, t in enumerate(kills)}
    died = {a["worker"]: max(t for t in kills if t <= a["end"]) for _, a in stalled.iterrows()}
    assert len(died) == len(kills)  # every kill took a process that held jobs

    def checking(phase: float, t: float) -> bool:
        """Whether a process started at ``phase`` still lives at ``t`` (the group checks together)."""
        return any(began == phase and died.get(w, math.inf) > t for w, began in started.items())

    for _, a in stalled.iterrows():
        kill = died[a["worker"]]
        # the killed process's last renewal before the kill (every 2.5 s from its start)
        began = started[a["worker"]]
        renewed = began + np.floor((kill - began) / 2.5) * 2.5
        expiry = max(a["start"], renewed) + 5.0
        assert a["start"] < kill and a["end"] >= expiry  # logged until the stalled check found it
        after = att[(att["job_id"] == a["job_id"]) & (att["attempt"] == a["attempt"] + 1)].iloc[0]
        # Then it restarts at the first stalled check at or after its lock expired: each process checks
        # at its start, then every interval (processes started together, together)
        checks = [t0 + 4.0 * m for t0 in set(started.values()) for m in range(30)
                  if t0 + 4.0 * m >= expiry - 1e-9 and checking(t0, t0 + 4.0 * m)]
        assert after["start"] == a["end"] == pytest.approx(min(checks))
        assert 2.5 <= after["start"] - kill <= 5.0 + 4.0
    jobs = r.jobs
    assert (jobs["stalled"] == jobs["job_id"].map(stalled["job_id"].value_counts()).fillna(0)).all()
    assert r.summary["jobs"]["stalled"] == int(jobs.loc[jobs["enqueued"] >= 0, "stalled"].sum()) >= 8
    assert r.summary["jobs"]["lost"] == 0 and (jobs["outcome"] == "completed").all()
    # and the slot count steps down at each kill and up at each start
    assert r.records.slots[:3] == ((0.0, 32), (12.3, 24), (12.8, 32))


def test_a_sigkill_takes_the_process_holding_the_most_jobs_not_the_oldest() -> None:
    # Given two one-slot processes taking jobs in turn, and a kill at 1.7 s, when the oldest (p-0)
    # is idle (its job ended at 1.5) and p-1 runs the job it took at 1.0
    s = scenario(duration=8.0, jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 1.0},
                                      "service": {"kind": "constant", "mean": 1.5}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 1}],
                 events=[{"at": 1.7, "kind": "sigkill", "pool": "p"}])
    att = simulate(s).records.attempts
    # Then the busy one is killed (an OOM kill takes the largest process): its job stalls, and every
    # later job runs on the idle one that was spared
    stalled = att[att["result"] == "stalled"]
    assert stalled[["job_id", "worker"]].values.tolist() == [["j1", "p-1"]]
    assert set(att.loc[att["start"] > 1.7, "worker"]) == {"p-0"}

    # and with both busy (at 1.2 s), the oldest goes
    s = scenario(duration=8.0, jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 1.0},
                                      "service": {"kind": "constant", "mean": 1.5}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 1}],
                 events=[{"at": 1.2, "kind": "sigkill", "pool": "p"}])
    att = simulate(s).records.attempts
    assert att.loc[att["result"] == "stalled", ["job_id", "worker"]].values.tolist() == [["j0", "p-0"]]


def test_without_restarts_recovery_is_at_the_first_check_of_phase_zero() -> None:
    s = scenario(duration=60.0, engine={"lock_duration": 5.0, "stalled_interval": 4.0},
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                        "service": {"kind": "constant", "mean": 3.0}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 8}],
                 events=[{"at": 21.7, "kind": "sigkill", "pool": "p"}])
    att = simulate(s).records.attempts
    back = att[att["job_id"].isin(att.loc[att["result"] == "stalled", "job_id"]) & (att["attempt"] == 2)]
    assert len(back) >= 1 and (back["start"] == 28.0).all()  # lock out at 26.7, checks at 0, 4, ..., 28


def stalled_scenario(max_stalled: int) -> Model:
    s = scenario(queues=[{"name": "q", "concurrency_limit": 2}], pools=[{"name": "p", "queues": ["q"], "workers": 3}],
                 engine={"lock_duration": 5.0, "stalled_interval": 4.0, "max_stalled": max_stalled},
                 events=[{"at": 1.0, "kind": "sigkill", "pool": "p"}],
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 1.0},
                        "service": {"kind": "constant", "mean": 10.0}}])
    return Model(s, JobDraws(time=np.array([0.0, 0.0, 2.0]), type=np.zeros(3, dtype=np.int64),
                             service=np.full(3, 10.0)), seed=0)


def test_a_killed_job_holds_its_concurrency_place_until_recovered() -> None:
    # Given two jobs running at the limit (2), the process of the first killed at 1, a third job at 2
    r = stalled_scenario(max_stalled=1).run()
    j = r.jobs.set_index("job_id")
    # Then the third waits although a slot is free: the killed job's place under the limit is held
    # until the stalled check at 8 (lock out at 5), and the recovered job goes back to the FRONT of
    # its level, ahead of the third: it restarts at once (8) on another process, the third at 10
    att = r.records.attempts.set_index(["job_id", "attempt"])
    assert att.loc[("j0", 1), "result"] == "stalled" and att.loc[("j0", 1), "end"] == 8.0
    assert att.loc[("j0", 2), "start"] == 8.0 and att.loc[("j0", 2), "worker"] != "p-0"
    assert j.loc["j2", "started"] == 10.0
    assert (j.loc["j0", "stalled"], j.loc["j0", "attempts"], j.loc["j0", "failed_attempts"]) == (1, 2, 0)
    assert (j["outcome"] == "completed").all()


def test_a_job_stalled_more_than_max_stalled_goes_to_the_dlq() -> None:
    r = stalled_scenario(max_stalled=0).run()
    j = r.jobs.set_index("job_id")
    assert (j.loc["j0", "outcome"], j.loc["j0", "finished"], j.loc["j0", "stalled"]) == ("dead", 8.0, 1)
    assert r.summary["jobs"]["dead"] == 1 and r.summary["jobs"]["lost"] == 0


def test_killing_every_process_leaves_jobs_unfinished_not_lost() -> None:
    s = scenario(duration=20.0, pools=[{"name": "p", "queues": ["q"], "workers": 2}],
                 events=[{"at": 5.0, "kind": "sigkill", "pool": "p", "count": 5}])
    r = simulate(s)
    assert r.summary["jobs"]["unfinished"] > 0 and r.summary["jobs"]["lost"] == 0
    assert r.records.slots == ((0.0, 2), (5.0, 0))


# --------------------------------------------------------------------------- graceful shutdown


def shutdown(grace: float) -> tuple[Scenario, Any]:
    s = scenario(duration=60.0, jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0},
                                       "service": {"kind": "uniform", "low": 1.0, "high": 4.0}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 4}],
                 events=[{"at": 20.0, "kind": "sigterm", "pool": "p", "count": 2, "grace": grace}])
    return s, simulate(s)


def test_sigterm_with_grace_longer_than_any_job_cuts_off_nothing() -> None:
    s, r = shutdown(grace=4.0)
    drains = r.records.extra["drains"]
    att = r.records.attempts
    assert drains["process"].tolist() == ["p-0", "p-1"] and drains["active_at_signal"].sum() > 2
    assert (drains["jobs_cut_off"] == 0).all() and drains["cut_off_at"].isna().all()
    assert "cutoff" not in set(att["result"])
    for _, d in drains.iterrows():
        mine = att[att["worker"] == d["process"]]
        # Then each process drained when its last attempt ended, within the grace, and took nothing after
        assert d["drained_at"] == (mine["end"].max() if d["active_at_signal"] else 20.0)
        assert 0 <= d["drained_at"] - d["signalled_at"] <= 4.0
        assert (mine["start"] < 20.0).all()
        assert d["active_at_signal"] == ((mine["start"] < 20.0) & (mine["end"] > 20.0)).sum()
    assert r.summary["jobs"]["lost"] == 0 and (r.jobs["outcome"] == "completed").all()
    assert r.records.slots == ((0.0, 16), (20.0, 8))


def test_sigterm_with_a_short_grace_hands_back_exactly_the_jobs_active_at_the_deadline() -> None:
    s, r = shutdown(grace=0.5)
    drains = r.records.extra["drains"].set_index("process")
    att = r.records.attempts
    service = draw_jobs(s).service  # no failures: every attempt runs the job's first draw
    deadline = 20.5
    gone = set(drains.index)
    first = att[att["attempt"] == 1]
    on_gone = first[first["worker"].isin(gone)]
    planned_end = on_gone["start"] + service[on_gone["job_id"].str[1:].astype(int).to_numpy()]
    # Then the cut-off attempts are exactly those that would have run past the deadline
    want = set(on_gone.loc[(on_gone["start"] < 20.0) & (planned_end > deadline), "job_id"])
    cut = att[att["result"] == "cutoff"]
    assert set(cut["job_id"]) == want and len(want) > 0
    assert (cut["end"] == deadline).all()
    assert drains["jobs_cut_off"].sum() == len(want)
    assert (drains.loc[drains["jobs_cut_off"] > 0, "cut_off_at"] == deadline).all()
    # and each is handed back at once and runs again, in full, on a process still running
    again = att[att["job_id"].isin(want) & (att["attempt"] == 2)]
    assert len(again) == len(want) and (again["start"] >= deadline).all()
    assert not again["worker"].isin(gone).any() and (again["result"] == "ok").all()
    jobs = r.jobs.set_index("job_id")
    assert (jobs.loc[list(want), "stalled"] == 0).all() and (jobs.loc[list(want), "failed_attempts"] == 0).all()
    assert r.summary["jobs"]["lost"] == 0 and (r.jobs["outcome"] == "completed").all()


def test_sigterm_handback_frees_the_concurrency_limit() -> None:
    s = scenario(queues=[{"name": "q", "concurrency_limit": 1}], pools=[{"name": "p", "queues": ["q"], "workers": 2}],
                 events=[{"at": 1.0, "kind": "sigterm", "pool": "p", "grace": 1.0}])
    r = Model(s, JobDraws(time=np.array([0.0]), type=np.zeros(1, dtype=np.int64), service=np.array([5.0])),
              seed=0).run()
    att = r.records.attempts
    assert att["start"].tolist() == [0.0, 2.0] and att["result"].tolist() == ["cutoff", "ok"]
    assert att["worker"].tolist() == ["p-0", "p-1"] and r.jobs["finished"].iloc[0] == 7.0


# --------------------------------------------------------------------------- scale-up


def test_started_processes_join_and_take_work() -> None:
    s = scenario(duration=100.0, jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                                        "service": {"kind": "exponential", "mean": 1.0}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 1}],
                 events=[{"at": 50.0, "kind": "start", "pool": "p", "count": 3}])
    r = simulate(s)
    att = r.records.attempts
    assert r.records.slots == ((0.0, 1), (50.0, 4))
    new = att[att["worker"].isin(["p-1", "p-2", "p-3"])]
    assert len(new) > 50 and new["start"].min() == 50.0
    assert set(att["worker"]) == {"p-0", "p-1", "p-2", "p-3"}
    assert r.summary["jobs"]["lost"] == 0 and r.summary["utilization"] <= 1.0
