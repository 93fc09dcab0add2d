"""The model keeps the engine's timing: lock renewal and stalled-check phase, front-of-level
positions of recovered and handed-back jobs, keyed rate-limit windows per tenant."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from qsim.model import JobDraws, Model, simulate
from qsim.spec.scenario import Scenario


def scenario(**top: Any) -> Scenario:
    raw: dict[str, Any] = {"name": "t", "seed": 3, "duration": 60.0, "queues": [{"name": "q"}],
                           "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                                     "service": {"kind": "constant", "mean": 3.0}}],
                           "pools": [{"name": "p", "queues": ["q"], "workers": 3, "concurrency": 4}]}
    raw.update(top)
    return Scenario.from_dict(raw)


def engine_rule(kill: float, fetched: float, lock: float, interval: float, checks_from: list[float]) -> float:
    """When the engine puts back a job fetched at ``fetched`` by a process started at 0 and killed at
    ``kill``: the process renews its locks every lock/2 from its start, so the lock expires at
    max(fetch, last renewal) + lock; live processes check at s, s + interval, ... (their start s)."""
    renewed = math.floor(kill / (lock / 2)) * (lock / 2)
    expiry = max(fetched, renewed) + lock
    return min(s + math.ceil((expiry - s) / interval - 1e-9) * interval for s in checks_from)


# --------------------------------------------------------------------------- stalled recovery timing


def test_the_issue_case_a_job_is_back_when_the_check_after_its_renewed_lock_finds_it() -> None:
    # Given lock 2 s, checks every 1 s, a process killed at 4.05 while running jobs fetched before 4.0
    s = scenario(engine={"lock_duration": 2.0, "stalled_interval": 1.0, "max_stalled": 5},
                 events=[{"at": 4.05, "kind": "sigkill", "pool": "p"}])
    draws = JobDraws(time=np.array([0.5, 0.6, 0.7, 3.2]), type=np.zeros(4, dtype=np.int64), service=np.full(4, 5.0))
    att = Model(s, draws, seed=0).run().records.attempts
    stalled = att[att["result"] == "stalled"]
    # Then (renewed at 4.0, expired at 6.0, the check at 6.0 finds it) they are back 1.95 s after the
    # kill, not 2.95 s (the lock counted from the kill) as a model without renewals says
    assert len(stalled) >= 1 and (stalled["end"] == 6.0).all()
    again = att[att["job_id"].isin(stalled["job_id"]) & (att["attempt"] == 2)]
    assert (again["start"] - 4.05).round(9).tolist() == [1.95] * len(stalled)


@pytest.mark.parametrize("lock,interval", [(2.0, 1.0), (3.0, 1.0), (5.0, 4.0), (30.0, 30.0)])
def test_recovery_delay_follows_the_engine_rule_for_every_kill_time(lock: float, interval: float) -> None:
    # Given 12 long jobs on 20 slots, and one of five processes killed at many phases of its renewals
    delays = []
    for kill in np.linspace(lock, 3 * lock, 23):
        s = scenario(duration=200.0, engine={"lock_duration": lock, "stalled_interval": interval, "max_stalled": 5},
                     pools=[{"name": "p", "queues": ["q"], "workers": 5, "concurrency": 4}],
                     events=[{"at": float(kill), "kind": "sigkill", "pool": "p"}])
        n = 12
        fetched = np.sort(np.random.default_rng(int(kill * 1000)).uniform(0, kill, n))  # some after a renewal
        draws = JobDraws(time=fetched, type=np.zeros(n, dtype=np.int64), service=np.full(n, 10 * lock))
        att = Model(s, draws, seed=0).run().records.attempts
        stalled = att[att["result"] == "stalled"]
        assert len(stalled) >= 2  # p-0's slots held jobs (jobs spread over the processes)
        for _, a in stalled.iterrows():
            want = engine_rule(float(kill), a["start"], lock, interval, [0.0])
            # Then each is put back exactly where the engine's rule says, and restarts there (spare slots)
            assert a["end"] == pytest.approx(want, abs=1e-9)
            nxt = att[(att["job_id"] == a["job_id"]) & (att["attempt"] == 2)]
            assert nxt["start"].iloc[0] == pytest.approx(want, abs=1e-9)
            delays.append(want - kill)
    # and the delays spread over (lock/2, lock + interval]: half a lock earlier than lock + check at best
    assert min(delays) > lock / 2 - 1e-9 and max(delays) <= lock + interval + 1e-9
    assert min(delays) < lock  # renewals matter: some come back before a full lock after the kill


def test_processes_started_later_renew_and_check_from_their_own_start() -> None:
    # Given a process started at 2.3 (lock 4 s: renewals at 4.3, 6.3, ...; checks at 2.3, 5.3, ... every 3 s)
    # and the initial process killed at 7.0 (renewed at 6.0: lock out at 10.0)
    s = scenario(engine={"lock_duration": 4.0, "stalled_interval": 3.0, "max_stalled": 5},
                 pools=[{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 2}],
                 events=[{"at": 2.3, "kind": "start", "pool": "p"}, {"at": 7.0, "kind": "sigkill", "pool": "p"},
                         {"at": 7.5, "kind": "sigkill", "pool": "p"}])
    draws = JobDraws(time=np.array([0.0, 0.5, 2.4, 2.5]), type=np.zeros(4, dtype=np.int64),
                     service=np.full(4, 20.0))
    r = Model(s, draws, seed=0).run()
    att = r.records.attempts.set_index(["job_id", "attempt"])
    # Then p-0's jobs (lock out at 10.0) are found at 11.3 by p-1's checks (2.3 + 3k), p-0's own checks died
    # with it; p-1 is killed at 7.5 (renewed at 6.3: out at 10.3): no process is left to check, so its
    # jobs stay stalled and unfinished, never lost
    assert att.loc[("j0", 1), "result"] == "stalled" and math.isnan(att.loc[("j0", 1), "end"])
    assert r.summary["jobs"]["lost"] == 0 and r.summary["jobs"]["unfinished"] == 4
    s2 = scenario(engine={"lock_duration": 4.0, "stalled_interval": 3.0, "max_stalled": 5},
                  pools=[{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 2}],
                  events=[{"at": 2.3, "kind": "start", "pool": "p"}, {"at": 7.0, "kind": "sigkill", "pool": "p"}])
    att2 = Model(s2, draws, seed=0).run().records.attempts.set_index(["job_id", "attempt"])
    assert att2.loc[("j0", 1), "end"] == pytest.approx(11.3) and att2.loc[("j1", 1), "end"] == pytest.approx(11.3)


# --------------------------------------------------------------------------- positions in the level


def test_a_cut_off_job_goes_back_to_the_front_of_its_level_not_ahead_of_a_better_level() -> None:
    # Given one process of 1 slot running a long job, a second process (1 slot) busy, and a backlog
    # of the same priority (0) and one better job (priority -1) waiting; the first process gets SIGTERM
    s = scenario(jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
                        "service": {"kind": "constant", "mean": 1.0}},
                       {"name": "vip", "queue": "q", "priority": -1, "service": {"kind": "constant", "mean": 1.0},
                        "arrival": {"kind": "poisson", "rate": 1.0}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 1}],
                 events=[{"at": 1.0, "kind": "sigterm", "pool": "p", "grace": 0.5}])
    draws = JobDraws(time=np.array([0.0, 0.0, 0.2, 0.3, 0.4, 0.45]), type=np.array([0, 0, 0, 0, 0, 1]),
                     service=np.array([9.0, 3.0, 1.0, 1.0, 1.0, 1.0]))
    r = Model(s, draws, seed=0).run()
    att = r.records.attempts
    assert att.loc[(att["job_id"] == "j0") & (att["attempt"] == 1), "result"].item() == "cutoff"
    starts = att[att["attempt"] == 1].set_index("job_id")["start"]
    # Then at 3.0 (p-1 free) the better level goes first (j5), then j0 (cut off at 1.5, handed back
    # in FRONT of j2, j3, j4 of its level, which waited longer), then j2, j3, j4
    order = att.sort_values(["start", "job_id"])
    after = [f"{j}" for j in order.loc[order["start"] >= 3.0, "job_id"]]
    assert after == ["j5", "j0", "j2", "j3", "j4"]
    assert starts["j5"] == 3.0
    assert r.summary["jobs"]["lost"] == 0


def test_recovered_jobs_go_to_the_front_of_their_level_in_lock_expiry_order() -> None:
    # Given a single-slot survivor with a backlog, and two jobs of a killed process whose locks expire
    # at different times (fetched before and after its last renewal)
    s = scenario(engine={"lock_duration": 2.0, "stalled_interval": 10.0, "max_stalled": 5},
                 pools=[{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 2}],
                 events=[{"at": 5.5, "kind": "sigkill", "pool": "p"}])
    # p-0 takes j0 (t 0) and j2 (t 5.2: after p-0's renewal at 5.0); p-1 takes j1 and j3 and stays busy
    draws = JobDraws(time=np.array([0.0, 0.1, 5.2, 5.3, 6.0, 6.1, 6.2]), type=np.zeros(7, dtype=np.int64),
                     service=np.array([30.0, 11.0, 30.0, 9.5, 1.0, 1.0, 1.0]))
    att = Model(s, draws, seed=0).run().records.attempts
    back = att[att["attempt"] == 2].set_index("job_id")["start"]
    firsts = att[att["attempt"] == 1].set_index("job_id")
    assert set(att.loc[att["result"] == "stalled", "job_id"]) == {"j0", "j2"}
    # Then the check at 10.0 (the second of p-1) puts both back, j0 (lock out at 7.0) before j2 (7.2),
    # both ahead of j4, j5, j6 that waited since 6.0: p-1 frees slots at 11.1 and 14.8
    assert back["j0"] == pytest.approx(11.1) and back["j2"] == pytest.approx(14.8)
    assert (firsts.loc[["j4", "j5", "j6"], "start"] > 14.8).all()


# --------------------------------------------------------------------------- keyed rate limits


def keyed(**queue: Any) -> Scenario:
    return scenario(duration=20.0,
                    queues=[{"name": "q", "rate_limit": {"max": 3, "per": 1.0, "key": "tenant"}, **queue}],
                    jobs=[{"name": "acme", "queue": "q", "arrival": {"kind": "constant", "rate": 8.0},
                           "service": {"kind": "constant", "mean": 0.05}, "data": {"tenant": "acme"}},
                          {"name": "globex", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                           "service": {"kind": "constant", "mean": 0.05}, "data": {"tenant": "globex", "tags": [1]}},
                          {"name": "anon1", "queue": "q", "arrival": {"kind": "constant", "rate": 1.0},
                           "service": {"kind": "constant", "mean": 0.05}},
                          {"name": "anon2", "queue": "q", "arrival": {"kind": "constant", "rate": 1.5},
                           "service": {"kind": "constant", "mean": 0.05}, "data": {"region": "eu"}}],
                    pools=[{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 4}])


def most_in_a_window(starts: np.ndarray, per: float) -> int:
    starts = np.sort(starts)
    return int(max(np.searchsorted(starts, starts + per - 1e-12, side="left") - np.arange(starts.size)))


def test_a_keyed_queue_has_a_sliding_window_per_tenant() -> None:
    r = simulate(keyed())
    j = r.jobs
    starts = {t: g["started"].to_numpy() for t, g in j.groupby("type")}
    # Then no tenant starts more than 3 jobs in any 1 s window; acme (8/s) backs up to exactly 3/s
    assert most_in_a_window(starts["acme"], 1.0) == 3 and most_in_a_window(starts["globex"], 1.0) <= 3
    acme = j[j["type"] == "acme"]
    assert (acme["started"] - acme["enqueued"]).max() > 20.0
    # globex never waits behind acme's backlog (its own window has room)
    globex = j[j["type"] == "globex"]
    assert (globex["started"] - globex["enqueued"]).max() < 1.0
    # and the jobs without the field (two types) share one window, the "" of the engine
    anon = np.concatenate([starts["anon1"], starts["anon2"]])
    assert most_in_a_window(anon, 1.0) == 3 and most_in_a_window(starts["anon1"], 1.0) < 3
    assert r.summary["jobs"]["lost"] == 0 and r.summary["jobs"]["unfinished"] == 0


def test_a_keyed_queue_shares_its_concurrency_limit_across_tenants() -> None:
    r = simulate(keyed(concurrency_limit=2))
    att = r.records.attempts
    ev = sorted([(t, 1) for t in att["start"]] + [(t, -1) for t in att["end"]])
    assert max(np.cumsum([d for _, d in ev])) == 2  # never more than 2 active over all tenants
    assert most_in_a_window(r.jobs.loc[r.jobs["type"] == "acme", "started"].to_numpy(), 1.0) <= 3


def test_keyed_lanes_keep_the_queue_order_and_wrr_between_queues() -> None:
    # Given a keyed queue k (tenants a, b) and a plain queue p under wrr 1:1 on one slot, all backlogged
    s = scenario(duration=4.0,
                 queues=[{"name": "k", "rate_limit": {"max": 100, "per": 1.0, "key": "tenant"}}, {"name": "p"}],
                 jobs=[{"name": "a", "queue": "k", "arrival": {"kind": "constant", "rate": 5.0},
                        "service": {"kind": "constant", "mean": 0.5}, "data": {"tenant": "a"}},
                       {"name": "b", "queue": "k", "priority": -1, "arrival": {"kind": "constant", "rate": 5.0},
                        "service": {"kind": "constant", "mean": 0.5}, "data": {"tenant": "b"}},
                       {"name": "c", "queue": "p", "arrival": {"kind": "constant", "rate": 5.0},
                        "service": {"kind": "constant", "mean": 0.5}}],
                 pools=[{"name": "w", "queues": ["k", "p"], "policy": "wrr", "workers": 1, "concurrency": 1}])
    j = simulate(s).jobs.sort_values("started")
    queues = j["queue"].tolist()
    # Then k and p alternate (wrr over queues, not lanes), and within k the better priority (b) goes first
    assert all(queues[i] != queues[i + 1] for i in range(len(queues) - 1) if i < 20)
    k_types = j.loc[j["queue"] == "k", "type"].tolist()
    assert k_types[:10] == ["b"] * 10
