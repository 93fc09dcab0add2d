"""The engine harness: a scenario run on real Redis with real worker processes,
measured with the same Summary as the model."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from waiting import wait_until

from qsim.harness.plan import plan_jobs
from qsim.harness.run import run_scenario
from qsim.model import simulate
from qsim.spec.scenario import Scenario

pytestmark = pytest.mark.redis


def scenario(**changes: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "e2e", "seed": 5, "duration": 4.0, "warmup": 0.5,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 30.0},
                  "service": {"kind": "exponential", "mean": 0.05}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 4}],
        "engine": {"lock_duration": 1.0, "stalled_interval": 0.5},
    }
    raw.update(changes)
    return Scenario.from_dict(raw)


def test_plan_is_the_models_draws() -> None:
    s = scenario()
    plan = plan_jobs(s)
    model = simulate(s).jobs.sort_values("enqueued")
    assert len(plan) == len(model)
    assert [p.at for p in plan] == pytest.approx(model["enqueued"].tolist())
    service = (model["finished"] - model["started"]).to_numpy()
    assert [p.payload["s"][0] for p in plan] == pytest.approx(service.tolist(), abs=1e-5)


def test_light_load_engine_matches_model_job_for_job(redis_url: str) -> None:
    # Given a lightly loaded pool (rho ~ 0.2) running the model's very jobs
    s = scenario()
    model = simulate(s).summary
    # When it runs on the engine
    engine = run_scenario(s, redis_url).summary
    # Then nothing is lost and every job completes
    assert engine["source"] == "engine"
    assert engine["jobs"]["lost"] == 0
    assert engine["jobs"]["completed"] == engine["jobs"]["arrived"] == model["jobs"]["arrived"]
    # and latency is the same service times plus a few milliseconds of engine overhead
    overhead = engine["latency"]["mean"] - model["latency"]["mean"]
    assert 0 <= overhead < 0.03, overhead
    assert engine["wait"]["p50"] < 0.01


def test_sigkill_mid_run_loses_nothing(redis_url: str) -> None:
    # Given jobs long enough to be in flight when a worker process is killed
    s = scenario(jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 10.0},
                        "service": {"kind": "constant", "mean": 0.4}}],
                 events=[{"at": 2.0, "kind": "sigkill", "pool": "p", "count": 1}])
    result = run_scenario(s, redis_url, drain_timeout=20)
    jobs = result.summary["jobs"]
    # Then its jobs were found stalled and completed elsewhere; none lost
    assert jobs["lost"] == 0 and jobs["unfinished"] == 0
    assert jobs["completed"] == jobs["arrived"]
    assert jobs["stalled"] >= 1
    restarted = result.jobs[result.jobs["stalled"] > 0]
    assert (restarted["outcome"] == "completed").all()
    assert result.exit_codes["p-0"] == -9 or result.exit_codes["p-1"] == -9


def test_sigkill_takes_the_process_holding_a_job_not_the_idle_oldest(redis_url: str) -> None:
    # Given two one-slot processes and jobs every second lasting 1.5 s: at 1.7 s one process is idle
    # (its job ended at 1.5) and the other runs the job that came at 1.0
    s = scenario(duration=3.0, warmup=0.0,
                 jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 1.0},
                        "service": {"kind": "constant", "mean": 1.5}}],
                 pools=[{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 1}],
                 events=[{"at": 1.7, "kind": "sigkill", "pool": "p", "count": 1}])
    result = run_scenario(s, redis_url, drain_timeout=20)
    att = result.records.attempts
    # Then the busy one is killed, whichever it is: the second job stalls there, the other process lives
    stalled = att[att["result"] == "stalled"]
    assert stalled["job_id"].tolist() == ["a-1"], att  # the engine names jobs by type and number
    killed = stalled["worker"].iloc[0]
    assert result.exit_codes[killed] == -9
    assert all(code != -9 for w, code in result.exit_codes.items() if w != killed)
    assert result.summary["jobs"]["lost"] == 0 and result.summary["jobs"]["completed"] == len(result.jobs)


def test_sigterm_with_enough_grace_cuts_off_nothing(redis_url: str) -> None:
    s = scenario(jobs=[{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 10.0},
                        "service": {"kind": "constant", "mean": 0.3}}],
                 events=[{"at": 1.5, "kind": "sigterm", "pool": "p", "count": 1, "grace": 5.0}])
    result = run_scenario(s, redis_url, drain_timeout=20)
    jobs = result.summary["jobs"]
    assert jobs["lost"] == 0 and jobs["stalled"] == 0 and jobs["completed"] == jobs["arrived"]
    assert sorted(code for code in result.exit_codes.values()) == [0, 0]


def test_qsim_run_json_with_its_own_throwaway_server(tmp_path: Any) -> None:
    path = tmp_path / "s.toml"
    path.write_text('name = "cli"\nduration = 2.0\n[[queues]]\nname = "q"\n'
                    '[[jobs]]\nname = "a"\nqueue = "q"\narrival = { kind = "poisson", rate = 20.0 }\n'
                    'service = { kind = "constant", mean = 0.01 }\n'
                    '[[pools]]\nname = "p"\nqueues = ["q"]\n')
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "REDIS_URL"}
    done = subprocess.run([sys.executable, "-m", "qsim", "run", str(path), "--json"], capture_output=True,
                          text=True, timeout=90, env=env_free)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["source"] == "engine" and summary["jobs"]["lost"] == 0
    assert summary["jobs"]["completed"] == summary["jobs"]["arrived"] > 10


def test_limits_policies_flows_and_fan_out_on_the_engine(redis_url: str) -> None:
    # Given two queues served by one wrr pool, a global concurrency limit, a rate
    # limit, a flow (parent after its children) and a fan-out
    s = Scenario.from_dict({
        "name": "features", "seed": 1, "duration": 3.0,
        "queues": [{"name": "fast", "concurrency_limit": 3}, {"name": "slow", "rate_limit": {"max": 5, "per": 1.0}}],
        "jobs": [
            {"name": "a", "queue": "fast", "arrival": {"kind": "poisson", "rate": 10.0},
             "service": {"kind": "constant", "mean": 0.05}, "fan_out": {"job": "part", "count": 3}},
            {"name": "part", "queue": "fast", "service": {"kind": "constant", "mean": 0.02}},
            {"name": "inv", "queue": "slow", "arrival": {"kind": "constant", "rate": 2.0},
             "service": {"kind": "constant", "mean": 0.05}, "flow": {"children": ["fetch", "tax"]}},
            {"name": "fetch", "queue": "fast", "service": {"kind": "constant", "mean": 0.05}},
            {"name": "tax", "queue": "slow", "service": {"kind": "constant", "mean": 0.05}},
        ],
        "pools": [{"name": "p", "queues": ["fast", "slow"], "policy": "wrr", "weights": {"fast": 3, "slow": 1},
                   "workers": 2, "concurrency": 4}],
    })
    jobs = run_scenario(s, redis_url).jobs
    # Then every job, children included, completes once and none is lost
    assert set(jobs["outcome"]) == {"completed"}
    parents_a = jobs[jobs["type"] == "a"]
    assert (jobs["type"] == "part").sum() == 3 * len(parents_a)
    # no flow parent starts before its last child finished
    inv = jobs[jobs["type"] == "inv"].set_index("job_id")
    last_child = jobs[jobs["parent"].isin(inv.index) & (jobs["type"] != "part")].groupby("parent")["finished"].max()
    assert len(last_child) == len(inv) and (inv["started"] >= last_child.reindex(inv.index)).all()
    # at most 3 jobs of "fast" active at once, at most 5 starts of "slow" in any 1 s window
    fast = jobs[jobs["queue"] == "fast"]
    events = sorted([(t, 1) for t in fast["started"]] + [(t, -1) for t in fast["finished"]], key=lambda e: (e[0], e[1]))
    active = max(__import__("itertools").accumulate(d for _, d in events))
    assert active <= 3
    starts = sorted(jobs.loc[jobs["queue"] == "slow", "started"])
    assert all(b - a >= 1.0 - 1e-3 for a, b in zip(starts, starts[5:]))


LONG_RUN = ('name = "long"\nduration = 30.0\n[[queues]]\nname = "q"\n'
            '[[jobs]]\nname = "a"\nqueue = "q"\narrival = { kind = "poisson", rate = 20.0 }\n'
            'service = { kind = "constant", mean = 0.01 }\n[[pools]]\nname = "p"\nqueues = ["q"]\n')


def _started_run(tmp_path: Any, url: str, client: Any) -> subprocess.Popen[str]:
    """``qsim run`` of a 30 s scenario on ``url``, once its jobs are being added (Ctrl-C reaches it: a test
    run in the background may have SIGINT ignored, which a child would inherit)."""
    import signal

    path = tmp_path / "long.toml"
    path.write_text(LONG_RUN)
    p = subprocess.Popen([sys.executable, "-m", "qsim", "run", str(path), "--redis", url, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until(lambda: any(b":job:" in k for k in client.scan_iter(match="qsim-run-*", count=1000)), timeout=60)
    return p


def test_an_interrupted_run_leaves_no_keys(tmp_path: Any, own_redis: Any) -> None:
    import signal

    import redis

    client = redis.Redis.from_url(own_redis.url)
    p = _started_run(tmp_path, own_redis.url, client)
    # When it is interrupted (Ctrl-C) halfway
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    # Then it says so (130) and its keys are gone, as at the end of a run (all 25 stayed)
    assert p.returncode == 130 and "interrupted" in err, err
    assert list(client.scan_iter(match="qsim-run-*")) == []


def test_a_redis_that_goes_away_during_a_run_is_a_failure_not_bad_input(tmp_path: Any, own_redis: Any) -> None:
    import redis

    client = redis.Redis.from_url(own_redis.url)
    p = _started_run(tmp_path, own_redis.url, client)
    # When Redis is killed halfway
    own_redis.kill()
    _, err = p.communicate(timeout=120)
    # Then the run failed (1), said in one line, and not as a bad URL (2, as for a Redis unreachable at the start)
    assert p.returncode == 1 and "Redis went away during the run" in err and "Traceback" not in err, err
