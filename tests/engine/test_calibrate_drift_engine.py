"""Calibrate tells drift from bursts on the real engine: the drift scenario (tests/drift_cases.py: a step
profile 10 -> 40 -> 10 jobs/s, a linear ramp, a stationary Poisson stream, batches of 20 every 5 s) run by
the harness on the session's Redis, calibrated from the engine's own records (6 minutes: `long`)."""

from __future__ import annotations

import pytest

import qsim.calibrate as cal
from qsim.harness.run import run_scenario
from qsim.spec.scenario import Scenario

from drift_cases import DRIFT, check_recovery

pytestmark = pytest.mark.redis


@pytest.mark.long
@pytest.mark.timeout(1200)
def test_engine_runs_are_recovered(redis_url: str) -> None:
    # Given the drift scenario run on the engine
    result = run_scenario(Scenario.from_dict(DRIFT), redis_url, keep=True)
    assert result.summary["jobs"]["lost"] == 0
    # When calibrated from the engine's Redis
    c = cal.from_redis(redis_url, ["q"], prefix=result.prefix)
    # Then each type comes back as it was made: the scenario's time 0 is when the first batch was added
    jobs = c.measured.jobs
    t0 = float(jobs[jobs["type"] == "batches"]["enqueued"].min())
    figures = check_recovery({t: f.arrival for t, f in c.types.items()}, c.window[1] - c.window[0],
                             offset=t0 - c.window[0])
    print("engine recovery:", figures)
