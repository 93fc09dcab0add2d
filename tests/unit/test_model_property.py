"""Model: a Hypothesis property over random small scenarios mixing every mechanism.

Whatever the mix (retries, poison, timeouts, rate and concurrency limits,
aging, crashes, shutdowns, scale-up, fan-out, flows, overhead), no job is
lost, every record is consistent with the others and no limit is ever
exceeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from qsim.model import simulate
from qsim.spec.scenario import Scenario


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    nq = draw(st.integers(1, 2))
    queues: list[dict[str, Any]] = []
    for i in range(nq):
        q: dict[str, Any] = {"name": f"q{i}"}
        if draw(st.booleans()):
            q["rate_limit"] = {"max": draw(st.integers(1, 5)), "per": draw(st.sampled_from([0.2, 0.5, 1.0, 2.0]))}
        if draw(st.booleans()):
            q["concurrency_limit"] = draw(st.integers(1, 4))
        if draw(st.booleans()):
            q["aging"] = draw(st.sampled_from([0.5, 1.0, 3.0]))
        queues.append(q)
    qnames = [q["name"] for q in queues]

    def job(name: str, arriving: bool) -> dict[str, Any]:
        j: dict[str, Any] = {
            "name": name, "queue": draw(st.sampled_from(qnames)), "priority": draw(st.integers(0, 3)),
            "service": draw(st.sampled_from([{"kind": "exponential", "mean": 0.2}, {"kind": "constant", "mean": 0.3},
                                             {"kind": "uniform", "low": 0.05, "high": 1.0}])),
            "fail_prob": draw(st.sampled_from([0.0, 0.2, 0.5])), "poison_prob": draw(st.sampled_from([0.0, 0.1])),
            "attempts": draw(st.integers(1, 4)),
            "backoff": {"kind": draw(st.sampled_from(["fixed", "exponential"])),
                        "delay": draw(st.sampled_from([0.0, 0.1, 0.5])), "max": 1.0,
                        "jitter": draw(st.sampled_from([0.0, 0.5]))},
            "timeout": draw(st.sampled_from([0.0, 0.0, 0.25, 0.6])),
        }
        if arriving:
            j["arrival"] = draw(st.sampled_from([{"kind": "poisson", "rate": 2.0}, {"kind": "poisson", "rate": 6.0},
                                                 {"kind": "burst", "rate": 0.5, "size": 4}]))
        return j

    jobs = [job("a", True), job("kid", False), job("kid2", False)]
    if draw(st.booleans()):
        jobs.append(job("b", True))
    shape = draw(st.sampled_from(["none", "fan", "flow"]))
    if shape == "fan":
        jobs[0]["fan_out"] = {"job": "kid", "count": draw(st.integers(1, 3))}
    elif shape == "flow":
        jobs[0]["flow"] = {"children": draw(st.sampled_from([["kid"], ["kid", "kid2"]])),
                           "on_child_failure": draw(st.sampled_from(["fail", "ignore"]))}
    npools = draw(st.integers(1, 2))
    pools = []
    for i in range(npools):
        served = qnames if i == 0 else draw(st.sampled_from([qnames, qnames[-1:]]))
        pools.append({"name": f"p{i}", "queues": served, "policy": draw(st.sampled_from(["priority", "ordered", "wrr"])),
                      "workers": draw(st.integers(1, 3)), "concurrency": draw(st.integers(1, 3))})
    duration = draw(st.sampled_from([5.0, 10.0, 20.0]))
    events = [{"at": draw(st.floats(0.0, duration)), "kind": draw(st.sampled_from(["sigterm", "sigkill", "start"])),
               "pool": draw(st.sampled_from([p["name"] for p in pools])), "count": draw(st.integers(1, 2)),
               "grace": draw(st.sampled_from([0.0, 0.3, 2.0]))} for _ in range(draw(st.integers(0, 3)))]
    return {"name": "prop", "seed": draw(st.integers(0, 1000)), "duration": duration, "queues": queues, "jobs": jobs,
            "pools": pools, "events": events,
            "engine": {"lock_duration": draw(st.sampled_from([0.5, 2.0])),
                       "stalled_interval": draw(st.sampled_from([0.5, 1.5])),
                       "max_stalled": draw(st.integers(0, 2)),
                       "fetch_overhead": draw(st.sampled_from([0.0, 0.0, 0.01])),
                       "ack_overhead": draw(st.sampled_from([0.0, 0.0, 0.01]))}}


def overlap_max(start: np.ndarray, end: np.ndarray) -> int:
    """The most intervals [start, end) open at once."""
    if not start.size:
        return 0
    t = np.concatenate([start, end])
    d = np.concatenate([np.ones(start.size, dtype=int), -np.ones(end.size, dtype=int)])
    order = np.lexsort((d, t))  # at equal times ends (-1) first
    return int(np.cumsum(d[order]).max())


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_mixtures_lose_nothing_and_keep_every_record_and_limit(raw: dict[str, Any]) -> None:
    s = Scenario.from_dict(raw)
    r = simulate(s)
    jobs, att = r.jobs, r.records.attempts
    summary = r.summary["jobs"]
    # no job is lost; the counts add up
    assert summary["lost"] == 0 and set(jobs["outcome"]) <= {"completed", "dead", "unfinished"}
    assert summary["arrived"] == summary["completed"] + summary["dead"] + summary["unfinished"]
    if not raw["events"]:  # (a queue whose processes all stopped keeps its jobs, unfinished)
        assert summary["unfinished"] == 0
    # every record's timestamps are ordered
    ran = jobs["started"].notna()
    assert (jobs.loc[ran, "started"] >= jobs.loc[ran, "enqueued"]).all()
    settled = jobs["outcome"].isin(["completed", "dead"])
    assert jobs.loc[settled, "finished"].notna().all() and jobs.loc[~settled, "finished"].isna().all()
    assert (jobs.loc[ran & settled, "finished"] >= jobs.loc[ran & settled, "started"]).all()
    ended = att["end"].notna()
    assert (att.loc[ended, "end"] >= att.loc[ended, "start"]).all()
    # the attempt log matches the job table
    by_job = att.groupby("job_id")
    n = by_job.size().reindex(jobs["job_id"], fill_value=0).to_numpy()
    assert (n == jobs["attempts"].to_numpy()).all()
    # (astype: with no attempt at all, apply keeps the result column's categorical dtype)
    failed = by_job["result"].apply(lambda x: int(x.isin(["failed", "timeout"]).sum())).astype("int64")
    assert (failed.reindex(jobs["job_id"], fill_value=0).to_numpy() == jobs["failed_attempts"].to_numpy()).all()
    stalls = by_job["result"].apply(lambda x: int((x == "stalled").sum())).astype("int64")
    assert (stalls.reindex(jobs["job_id"], fill_value=0).to_numpy() >= jobs["stalled"].to_numpy()).all()
    srt = att.sort_values(["job_id", "attempt"])
    same = srt["job_id"].to_numpy()[1:] == srt["job_id"].to_numpy()[:-1]
    assert (srt["start"].to_numpy()[1:][same] >= srt["end"].to_numpy()[:-1][same]).all()  # one attempt at a time
    last = srt.groupby("job_id")["result"].last()
    done = jobs.loc[jobs["outcome"] == "completed", "job_id"]
    assert (last[done] == "ok").all()
    # no limit is ever exceeded
    end = att["end"].fillna(np.inf).to_numpy()
    for w, g in att.assign(end=end).groupby("worker"):
        pool = next(p for p in raw["pools"] if p["name"] == str(w).rsplit("-", 1)[0])
        assert overlap_max(g["start"].to_numpy(), g["end"].to_numpy()) <= pool["concurrency"]
    aq = att.assign(end=end).merge(jobs[["job_id", "queue"]], on="job_id")
    for q in raw["queues"]:
        mine = aq[aq["queue"] == q["name"]]
        if "concurrency_limit" in q:
            assert overlap_max(mine["start"].to_numpy(), mine["end"].to_numpy()) <= q["concurrency_limit"]
        if "rate_limit" in q:
            st_ = np.sort(mine["start"].to_numpy())
            k, per = q["rate_limit"]["max"], q["rate_limit"]["per"]
            assert (st_[k:] - st_[:-k] >= per - 1e-9).all() if st_.size > k else True
    # children: fan-out count per completed parent; flow parents start after their children finished
    a = raw["jobs"][0]
    parents = jobs[jobs["type"] == "a"].set_index("job_id")
    kids = jobs[jobs["parent"] != ""]
    if "fan_out" in a:
        counts = kids.groupby("parent").size().reindex(parents.index, fill_value=0)
        donep = parents["outcome"] == "completed"
        assert (counts[donep] == a["fan_out"]["count"]).all() and (counts[~donep] == 0).all()
    if "flow" in a:
        lastkid = kids.groupby("parent")["finished"].max().reindex(parents.index)
        started = parents["started"].notna()
        assert (parents.loc[started, "started"] >= lastkid[started]).all()
    # the time series never goes negative and ends empty when everything settled
    ts = r.timeseries
    assert (ts["waiting"] >= 0).all() and (ts["active"] >= 0).all()
    if summary["unfinished"] == 0 and not (jobs["outcome"] == "unfinished").any():
        final = ts.groupby("queue").last()
        assert (final["waiting"] == 0).all() and (final["active"] == 0).all()
    assert isinstance(r.records.extra.get("drains", pd.DataFrame()), pd.DataFrame)
