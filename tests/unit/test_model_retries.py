"""Model: retries, backoff, the dead-letter queue, timeouts, and the draws shared with the engine harness."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from qsim.harness.plan import plan_jobs
from qsim.model import JobDraws, Model, draw_jobs, simulate
from qsim.model.retries import backoff_delay
from qsim.spec.scenario import BackoffSpec, Scenario
from qsim.spec.workload import plan_attempts

Z99 = 2.5758293035489004  # two-sided 99%


def scenario(*, job: dict[str, Any] | None = None, jobs: list[dict[str, Any]] | None = None,
             pools: list[dict[str, Any]] | None = None, **top: Any) -> Scenario:
    base = {"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 10.0},
            "service": {"kind": "exponential", "mean": 0.1}}
    raw: dict[str, Any] = {
        "name": "t", "seed": 11, "duration": 100.0, "queues": [{"name": "q"}],
        "jobs": jobs or [{**base, **(job or {})}],
        "pools": pools or [{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 1}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


def attempts_law(p: float, q: float, a: int) -> tuple[float, float]:
    """Mean and variance of the attempts of one job: poison (q) uses all a; else geometric, capped at a."""
    probs = {n: (1 - q) * p ** (n - 1) * (1 - p) for n in range(1, a)}
    probs[a] = (1 - q) * p ** (a - 1) + q
    mean = sum(n * w for n, w in probs.items())
    return mean, sum((n - mean) ** 2 * w for n, w in probs.items())


def planned_busy(s: Scenario, seed: int, jobs: pd.DataFrame) -> float:
    """Sum, over every job, of the drawn service times of the attempts it made (timeouts cap them)."""
    draws = draw_jobs(s, seed=seed)
    plan = plan_attempts(s, draws, seed)
    total = 0.0
    made = jobs["attempts"].to_numpy()
    for i in range(len(draws)):
        k = int(draws.type[i])
        table = plan.own[k]
        assert table is not None
        svc = table.service[int(plan.rank[i]), :made[i]]
        t = s.jobs[k].timeout
        total += float(np.minimum(svc, t).sum() if t > 0 else svc.sum())
    return total


# --------------------------------------------------------------------------- retry load and the DLQ


@pytest.mark.slow
def test_retry_load_mean_attempts_and_dead_letters_match_their_laws() -> None:
    # Given transient failures, poison jobs and 3 attempts, plenty of capacity
    p, q, a = 0.3, 0.05, 3
    s = scenario(duration=2000.0, job={"fail_prob": p, "poison_prob": q, "attempts": a,
                                       "backoff": {"kind": "fixed", "delay": 0.05}})
    r = simulate(s)
    jobs, att = r.jobs, r.records.attempts
    n = len(jobs)
    assert n > 19_000 and r.summary["jobs"]["lost"] == 0 and r.summary["jobs"]["unfinished"] == 0
    # Then busy slot-time is exactly the drawn service of every attempt made
    busy = float((att["end"] - att["start"]).sum())
    assert busy == pytest.approx(planned_busy(s, s.seed, jobs), rel=1e-9)
    assert len(att) == int(jobs["attempts"].sum())
    # and the mean attempts per job lies in the 99% interval of E[attempts]
    mean, var = attempts_law(p, q, a)
    half = Z99 * math.sqrt(var / n)
    assert abs(jobs["attempts"].mean() - mean) <= half, (jobs["attempts"].mean(), mean, half)
    # and dead is within the binomial 99% interval of N (q + (1 - q) p^a)
    pd_ = q + (1 - q) * p ** a
    dead = int((jobs["outcome"] == "dead").sum())
    assert abs(dead - n * pd_) <= Z99 * math.sqrt(n * pd_ * (1 - pd_)), (dead, n * pd_)
    # and the records agree with each other
    assert (jobs.loc[jobs["outcome"] == "dead", "attempts"] == a).all()
    assert (jobs["failed_attempts"] == jobs["attempts"] - (jobs["outcome"] == "completed")).all()
    assert r.summary["jobs"]["failed_attempts"] == int(jobs.loc[jobs["enqueued"] >= 0, "failed_attempts"].sum())
    assert set(att["result"]) == {"ok", "failed"}


def test_utilization_counts_every_attempt() -> None:
    s = scenario(duration=300.0, job={"fail_prob": 0.5, "attempts": 4, "backoff": {"kind": "fixed", "delay": 0.0}})
    r = simulate(s)
    att = r.records.attempts
    end = float(r.jobs.loc[r.jobs["outcome"] == "completed", "finished"].max())
    busy = float((np.minimum(att["end"], end) - att["start"]).clip(lower=0).sum())
    assert r.summary["utilization"] == pytest.approx(busy / (4 * end), rel=1e-9)
    # about 10/s x 0.1 s x E[attempts] (1.875) over 4 slots
    assert r.summary["utilization"] == pytest.approx(10 * 0.1 * attempts_law(0.5, 0.0, 4)[0] / 4, rel=0.1)


# --------------------------------------------------------------------------- backoff


@pytest.mark.parametrize("spec, failed, u, want", [
    (BackoffSpec(kind="fixed", delay=2.0, max=1.0), 5, 0.0, 2.0),  # fixed: no cap, as the engine's Backoff.fixed
    (BackoffSpec(kind="exponential", delay=1.0, max=60.0), 1, 0.0, 1.0),
    (BackoffSpec(kind="exponential", delay=1.0, max=60.0), 4, 0.0, 8.0),
    (BackoffSpec(kind="exponential", delay=1.0, max=60.0), 9, 0.0, 60.0),
    (BackoffSpec(kind="exponential", delay=1.0, max=60.0, jitter=0.5), 2, 0.5, 1.5),
    (BackoffSpec(kind="exponential", delay=0.0012345, max=60.0), 1, 0.0, 0.001),  # whole ms, as stored
])
def test_backoff_delay_is_the_engines_rule(spec: BackoffSpec, failed: int, u: float, want: float) -> None:
    from qsim.engine import Backoff
    assert backoff_delay(spec, failed, u) == pytest.approx(want)
    eng = Backoff.fixed(spec.delay, jitter=spec.jitter) if spec.kind == "fixed" else Backoff.exponential(
        spec.delay, max=spec.max, jitter=spec.jitter)

    class U:
        def random(self) -> float:
            return u
    assert backoff_delay(spec, failed, u) == int(eng.delay_for(failed, U()) * 1000) / 1000  # type: ignore[arg-type]


def test_a_poison_job_retries_after_its_backoffs_then_goes_to_the_dlq() -> None:
    # Given one poison job with exponential backoff 1, 2, 4 (cap 3) and one free slot
    s = scenario(job={"poison_prob": 1.0, "attempts": 4, "service": {"kind": "constant", "mean": 0.5},
                      "backoff": {"kind": "exponential", "delay": 1.0, "max": 3.0}})
    r = Model(s, JobDraws(time=np.array([1.0]), type=np.array([0]), service=np.array([0.5])), seed=1).run()
    att = r.records.attempts.sort_values("attempt")
    # Then each retry starts exactly its backoff after the failure
    assert att["start"].tolist() == pytest.approx([1.0, 2.5, 5.0, 8.5])
    assert att["result"].tolist() == ["failed"] * 4
    job = r.jobs.iloc[0]
    assert (job["outcome"], job["attempts"], job["failed_attempts"], job["finished"]) == ("dead", 4, 4, 9.0)
    assert r.summary["jobs"]["dead"] == 1 and r.summary["jobs"]["lost"] == 0


def test_jitter_keeps_each_delay_in_its_band() -> None:
    s = scenario(duration=200.0, job={"poison_prob": 1.0, "attempts": 3, "service": {"kind": "constant", "mean": 0.01},
                                      "arrival": {"kind": "poisson", "rate": 1.0},
                                      "backoff": {"kind": "fixed", "delay": 1.0, "jitter": 0.4}},
                 pools=[{"name": "p", "queues": ["q"], "workers": 50}])
    att = simulate(s).records.attempts.sort_values(["job_id", "attempt"])
    gaps = (att.groupby("job_id")["start"].diff() - 0.01).dropna()
    assert len(gaps) > 300 and gaps.min() >= 0.6 - 1e-9 and gaps.max() <= 1.0 + 1e-9
    assert gaps.std() > 0.08  # uniform on [0.6, 1]: sd 0.115


# --------------------------------------------------------------------------- timeouts


def test_an_attempt_longer_than_timeout_fails_at_exactly_start_plus_timeout() -> None:
    s = scenario(duration=200.0, job={"timeout": 0.15, "attempts": 2, "backoff": {"kind": "fixed", "delay": 0.0},
                                      "service": {"kind": "exponential", "mean": 0.1}})
    r = simulate(s)
    att = r.records.attempts
    draws = draw_jobs(s)
    plan = plan_attempts(s, draws, s.seed)
    table = plan.own[0]
    assert table is not None
    row = np.asarray([int(j[1:]) for j in att["job_id"]])
    planned = table.service[plan.rank[row], att["attempt"].to_numpy() - 1]
    timed_out = att["result"] == "timeout"
    assert timed_out.sum() > 100
    assert (timed_out.to_numpy() == (planned > 0.15)).all()
    assert (att.loc[timed_out, "end"] == att.loc[timed_out, "start"] + 0.15).all()
    assert ((att["end"] - att["start"])[~timed_out] <= 0.15).all()
    dead = r.jobs[r.jobs["outcome"] == "dead"]
    assert len(dead) > 0 and (dead["failed_attempts"] == 2).all() and r.summary["jobs"]["lost"] == 0


# --------------------------------------------------------------------------- shared draws


def test_the_engine_plan_runs_the_models_draws() -> None:
    s = scenario(duration=30.0, jobs=[
        {"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0}, "attempts": 3, "fail_prob": 0.4,
         "poison_prob": 0.1, "service": {"kind": "lognormal", "mean": 0.2, "cv": 1.0}},
        {"name": "b", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0}, "attempts": 2, "fail_prob": 0.2,
         "service": {"kind": "exponential", "mean": 0.1}, "fan_out": {"job": "k", "count": 2}},
        {"name": "k", "queue": "q", "attempts": 2, "fail_prob": 0.5, "service": {"kind": "constant", "mean": 0.1}}])
    draws = draw_jobs(s)
    plan = plan_attempts(s, draws, s.seed)
    planned = plan_jobs(s)
    assert len(planned) == len(draws)
    for i, pj in enumerate(planned):
        k = int(draws.type[i])
        table = plan.own[k]
        assert table is not None
        row = int(plan.rank[i])
        assert pj.payload["s"] == [round(float(x), 6) for x in table.service[row]]
        assert pj.payload["x"] == ([1] * s.jobs[k].attempts if table.poison[row] else table.fails[row].astype(int).tolist())
        kids = plan.kids.get(i, [])
        assert [c.job_id for c in pj.children] == [f"{s.jobs[c].name}-c{r}" for c, r in kids]
    # and the model runs exactly these: each attempt's duration is its drawn service time
    r = simulate(s)
    att = r.records.attempts.merge(r.jobs[["job_id", "type", "parent"]], on="job_id")
    own = att[att["parent"] == ""]
    for _, a in own.head(200).iterrows():
        i = int(a["job_id"][1:])
        table = plan.own[int(draws.type[i])]
        assert table is not None
        assert a["end"] - a["start"] == pytest.approx(table.service[int(plan.rank[i]), a["attempt"] - 1])
