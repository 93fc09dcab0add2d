"""The autoscaling controllers on the real engine, beside the model (qsim/harness/autoscaling.py).

A compressed step profile (15 jobs/s of 0.1 s jobs, x4 for a minute, back), a
step policy on the oldest job's age (up above 1 s, down below 0.1 s) polling every 2 s, cold starts of 4 s
(longer than a worker process's own start-up, so both sides wait the same),
10 s windows. The engine's controller reads the real queue's gauges from Redis
and starts and stops real worker processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from qsim import Scenario
from qsim.analysis.fidelity.compare import compare
from waiting import ROOT, measured_until_passed, wait_until

pytestmark = [pytest.mark.redis]


def compressed_step(*, grace: float = 5.0, down_delay: float = 20.0) -> Scenario:
    return Scenario.from_dict({
        "name": "compressed-step", "duration": 180.0, "seed": 2, "window": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "constant", "mean": 0.1},
                  "arrival": {"kind": "profile", "shape": "step",
                              "points": [[0, 15.0], [60, 15.0], [60, 60.0], [120, 60.0], [120, 15.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 3}],
        "autoscalers": [{"pool": "p", "min": 3, "max": 12, "policy": "step", "metric": "oldest_age",
                         "up_when": 1.0, "down_when": 0.1, "step": 2, "up_delay": 2.0, "down_delay": down_delay,
                         "poll": 2.0, "grace": grace, "start_delay": {"kind": "constant", "mean": 4.0}}]})


@pytest.mark.long
@pytest.mark.alone
@pytest.mark.timeout(1500)
def test_engine_follows_the_model_with_the_same_controller(redis_url: str) -> None:
    # Given the same scenario, seed and controller code on both sides (a run that does not agree is measured
    # again, at most twice: on a shared machine other work can slow one run; waiting.measured_until_passed)
    runs = measured_until_passed(lambda: compare(compressed_step(), redis_url),
                                 lambda doc: doc["autoscaling"]["p"]["passed"],
                                 describe=lambda doc: str(doc["autoscaling"]))
    doc = runs[-1]
    a = doc["autoscaling"]["p"]
    model, engine = doc["model"]["autoscaling"]["p"], doc["engine"]["autoscaling"]["p"]
    # Then the engine lost nothing in any run, asked for the model's workers within 1 for at least 90% of the time,
    # and its p95 wait per window is within 25% or 100 ms of the model's in at least 85% of the windows
    assert all(run["engine"]["jobs"]["lost"] == 0 for run in runs)
    assert a["workers_within"] >= 0.90, (model["trajectory"], engine["trajectory"])
    assert a["windows_within"] >= 0.85, ([w["wait_p95"] for w in doc["model"]["windows"]],
                                         [w["wait_p95"] for w in doc["engine"]["windows"]])
    assert a["passed"]
    # And both scaled up and back down
    assert engine["workers"]["max"] >= 7 and engine["scale_events"] >= 4


@pytest.mark.long
@pytest.mark.alone
@pytest.mark.timeout(900)
def test_jobs_cut_at_scale_down_agree(redis_url: str) -> None:
    # Given a scale-down during the peak (a short down-delay) with a grace of 0.05 s:
    # each stopped worker busy at the signal has its job cut off and handed back
    doc = compare(compressed_step(grace=0.05, down_delay=4.0), redis_url)
    cut = doc["autoscaling"]["p"]["cut_jobs"]
    assert doc["engine"]["jobs"]["lost"] == 0
    assert cut["model"] > 0 and cut["engine"] > 0
    # And the two counts differ by no more than two independent Poisson counts would (3 sigma of the difference):
    # which workers are busy at a stop signal is chance, so the model's 4 and the engine's 8 are the same answer
    assert abs(cut["engine"] - cut["model"]) <= 3 * (cut["engine"] + cut["model"]) ** 0.5


def _workers_of(pid: int) -> list[int]:
    """The live pool worker processes the process ``pid`` started (its children running qsim.harness.pool_worker,
    not yet dead)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid_text = stat.read_text().rsplit(")", 1)[1].split()[:2]
            ppid = int(ppid_text)
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and state != "Z" and b"qsim.harness.pool_worker" in cmd:
            found.append(int(stat.parent.name))
    return sorted(found)


@pytest.mark.timeout(300)
def test_an_autoscaled_pool_replaces_the_workers_sigkill_took(redis_url: str, tmp_path: Path) -> None:
    # Given an autoscaled pool held at 2 workers (1 s cold starts) in a `qsim run` on the engine
    path = tmp_path / "kills.toml"
    path.write_text("""
name = "kills"
duration = 16.0
seed = 3
[engine]
lock_duration = 2.0
stalled_interval = 1.0
[[queues]]
name = "q"
[[jobs]]
name = "j"
queue = "q"
arrival = { kind = "constant", rate = 10.0 }
service = { kind = "constant", mean = 0.05 }
[[pools]]
name = "p"
queues = ["q"]
workers = 2
[[autoscalers]]
pool = "p"
min = 2
max = 2
policy = "hpa"
metric = "list_length"
target = 8
poll = 2.0
grace = 5.0
start_delay = { kind = "constant", mean = 1.0 }
""")
    run = subprocess.Popen([sys.executable, "-m", "qsim", "run", str(path), "--redis", redis_url, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    killed: list[int] = []
    try:
        # When every worker it has is SIGKILLed, twice (about 4 s and 10 s into the run), as a node failure would
        with redis.Redis.from_url(redis_url) as client:  # the run has started once a job completed
            wait_until(lambda: any(client.scan_iter(match="qsim-run-*completed*")), timeout=180)
        for pause in (4.0, 6.0):
            time.sleep(pause)
            victims = _workers_of(run.pid)
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            killed += victims
        out, err = run.communicate(timeout=200)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err[-3000:]
    summary = json.loads(out)
    jobs, scaling = summary["jobs"], summary["autoscaling"]["p"]
    print(f"\nSIGKILLs of every worker ({len(killed)} processes): jobs {jobs}; "
          f"replacements {scaling.get('replacements')}")
    # Then each killed worker was replaced (as a Deployment does), and every job completed: none unfinished, none lost
    assert scaling["replacements"] == len(killed) >= 4
    assert jobs["lost"] == 0 and jobs["unfinished"] == 0 and jobs["completed"] == jobs["arrived"] > 100
