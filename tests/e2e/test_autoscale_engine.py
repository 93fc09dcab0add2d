"""The autoscaling controllers on the real engine, beside the model (qsim/harness/autoscaling.py).

A compressed step profile (15 jobs/s of 0.1 s jobs, x4 for a minute, back), a
step policy on the oldest job's age (up above 1 s, down below 0.1 s) polling every 2 s, cold starts of 4 s
(longer than a worker process's own start-up, so both sides wait the same),
10 s windows. The engine's controller reads the real queue's gauges from Redis
and starts and stops real worker processes.
"""

from __future__ import annotations

import pytest

from qsim import Scenario
from qsim.analysis.compare import compare

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
@pytest.mark.timeout(900)
def test_engine_follows_the_model_with_the_same_controller(redis_url: str) -> None:
    # Given the same scenario, seed and controller code on both sides
    doc = compare(compressed_step(), redis_url)
    a = doc["autoscaling"]["p"]
    model, engine = doc["model"]["autoscaling"]["p"], doc["engine"]["autoscaling"]["p"]
    # Then the engine lost nothing, asked for the model's workers within 1 for at least 90% of the time,
    # and its p95 wait per window is within 25% or 100 ms of the model's in at least 85% of the windows
    assert doc["engine"]["jobs"]["lost"] == 0
    assert a["workers_within"] >= 0.90, (model["trajectory"], engine["trajectory"])
    assert a["windows_within"] >= 0.85, ([w["wait_p95"] for w in doc["model"]["windows"]],
                                         [w["wait_p95"] for w in doc["engine"]["windows"]])
    assert a["passed"]
    # And both scaled up and back down
    assert engine["workers"]["max"] >= 7 and engine["scale_events"] >= 4


@pytest.mark.long
@pytest.mark.timeout(900)
def test_jobs_cut_at_scale_down_agree(redis_url: str) -> None:
    # Given a grace shorter than... a scale-down during the peak (a short down-delay) with a grace of 0.05 s:
    # each stopped worker busy at the signal has its job cut off and handed back
    doc = compare(compressed_step(grace=0.05, down_delay=4.0), redis_url)
    cut = doc["autoscaling"]["p"]["cut_jobs"]
    assert doc["engine"]["jobs"]["lost"] == 0
    assert cut["model"] > 0 and cut["engine"] > 0
    assert abs(cut["engine"] - cut["model"]) <= max(3, 0.5 * cut["model"])  # within noise
