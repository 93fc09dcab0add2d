"""Locust follows a rate profile: profiled types are added at their drawn times, ``--time-scale`` compresses
the scenario's clock with its rates kept (qsim/loadtest/timescale.py), and the model comparison models the
same run; headless against the session's Redis with --start-workers."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from qsim.engine import Queue
from qsim.errors import JobNotFound
from qsim.loadtest.compare import load_test_scenario
from qsim.loadtest.config import LoadTestConfig
from qsim.loadtest.mix import arrival_rates, peak_rates
from qsim.loadtest.schedule import Schedule, scheduled_types
from qsim.loadtest.timescale import time_scaled
from qsim.spec.dists import BurstArrivals, PoissonArrivals, ProfileArrivals, RateProfile, TraceArrivals
from qsim.spec.scenario import Scenario
from qsim.spec.workload import draw_jobs
from waiting import timing_allowance

ROOT = Path(__file__).resolve().parents[2]

#: 40 s at 50 jobs/s, 40 s at 150, 40 s at 50: with --time-scale 0.1, 4 s each, about 200, 600, 200 adds.
PROFILED = """
    name = "profiled"
    seed = 4
    duration = 120.0
    [[queues]]
    name = "q"
    [[jobs]]
    name = "day"
    queue = "q"
    arrival = { kind = "profile", points = [[0, 50.0], [40, 150.0], [80, 50.0], [120, 50.0]], shape = "step" }
    service = { kind = "constant", mean = 0.002 }
    [[jobs]]
    name = "steady"
    queue = "q"
    arrival = { kind = "poisson", rate = 5.0 }
    service = { kind = "constant", mean = 0.002 }
    [[pools]]
    name = "p"
    queues = ["q"]
    concurrency = 16
    [[events]]
    at = 100.0
    kind = "start"
    pool = "p"
    """
TIME_SCALE = 0.1
#: Seconds a scheduled add may come after its drawn time (gevent scheduling on a loaded machine).
LATE = 0.25


def scenario(tmp_path: Path) -> tuple[Path, Scenario]:
    path = tmp_path / "profiled.toml"
    path.write_text(textwrap.dedent(PROFILED))
    return path, Scenario.from_toml(path)


def per_window(times: np.ndarray, width: float, count: int) -> np.ndarray:
    return np.bincount(np.clip((times / width).astype(np.int64), 0, count - 1), minlength=count)


# --------------------------------------------------------------------------- the Locust-free parts


def test_time_scale_compresses_the_clock_and_keeps_the_rates(tmp_path: Path) -> None:
    _, s = scenario(tmp_path)
    fast = time_scaled(s, TIME_SCALE)
    # the clock: duration, events, the profile's times
    assert fast.duration == pytest.approx(12.0) and fast.events[0].at == pytest.approx(10.0)
    prof = fast.job("day").arrival.profile  # type: ignore[union-attr]
    assert [t for t, _ in prof.points] == pytest.approx([0.0, 4.0, 8.0, 12.0])
    # the rates: the profile's at each moment of the scenario, the stationary ones as they were
    assert prof.rate_at(5.0) == 150.0 and prof.peak == 150.0
    assert fast.job("steady").arrival == s.job("steady").arrival
    assert fast.job("day").service == s.job("day").service and fast.pools == s.pools
    # producers are sized for the peak, the mean is what the paced mix uses
    assert peak_rates(fast) == {"day": 150.0, "steady": 5.0}
    assert arrival_rates(fast)["day"] == pytest.approx(250 / 3)
    assert time_scaled(s, 1.0) is s
    # periods, profiled bursts, traces (every 1/S-th arrival kept, evenly) scale alike
    daily = RateProfile(points=((0.0, 1.0), (43200.0, 3.0)), shape="linear", period=86400.0)
    burst = BurstArrivals(size=5, profile=daily)
    trace = TraceArrivals(path=Path("t.csv"), at=tuple(float(i) for i in range(100)))
    jobs = (s.jobs[0].__class__(name="b", queue="q", arrival=burst, service=s.jobs[0].service),
            s.jobs[0].__class__(name="t", queue="q", arrival=trace, service=s.jobs[0].service))
    day = time_scaled(s.__class__(name="d", duration=86400.0, queues=s.queues, jobs=jobs, pools=s.pools), 0.01)
    b = day.job("b").arrival
    assert isinstance(b, BurstArrivals) and b.profile is not None and b.profile.period == pytest.approx(864.0)
    assert b.rate == pytest.approx(burst.rate) and day.duration == pytest.approx(864.0)
    # the Summary's windows cover the same stretches of the day: 60 s of the scenario are 0.6 s of the run
    assert day.window_length == pytest.approx(0.6)
    t = day.job("t").arrival
    assert isinstance(t, TraceArrivals) and t.at == (0.0,)  # 100 arrivals, every 100th kept
    half = time_scaled(s.__class__(name="d", duration=100.0, queues=s.queues, jobs=jobs[1:], pools=s.pools), 0.5)
    assert half.job("t").arrival.at == pytest.approx(tuple(i * 0.5 for i in range(0, 100, 2)))  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="stretch the trace of job type 't'"):
        time_scaled(half, 2.0)
    with pytest.raises(ValueError, match="--time-scale must be a number > 0"):
        LoadTestConfig(time_scale=0.0)


def test_the_schedule_follows_the_profile_and_the_model_runs_the_same(tmp_path: Path) -> None:
    _, s = scenario(tmp_path)
    fast = time_scaled(s, TIME_SCALE)
    # profiled types are scheduled (added at their drawn times), stationary ones paced
    assert scheduled_types(fast, "constant") == ["day"]
    sched = Schedule(fast, ["day"], window=fast.duration)
    counts = per_window(sched.times, 4.0, 3)
    want = np.array([200, 600, 200])
    assert np.all(np.abs(counts - want) < 4 * np.sqrt(want)), counts
    assert np.array_equal(sched.times, draw_jobs(fast).time[draw_jobs(fast).type == 0])
    # the model of a distributed run (no enqueue times to replay): the same profile at the same scale
    model = load_test_scenario(fast, scale=2.0, window=fast.duration, pacing="constant")
    arrival = model.job("day").arrival
    assert isinstance(arrival, ProfileArrivals)
    assert arrival.profile.rate_at(2.5) == 300.0 and arrival.profile.rate_at(1.5) == 100.0  # sped up by 2
    assert arrival.profile.period == pytest.approx(6.0)  # the schedule repeats every duration / scale
    assert isinstance(model.job("steady").arrival, (PoissonArrivals,)) or model.job("steady").arrival.kind == "constant"


# --------------------------------------------------------------------------- Locust, for real


@pytest.mark.redis
def test_headless_locust_adds_per_window_follow_the_profile(redis_url: str, tmp_path: Path) -> None:
    path, s = scenario(tmp_path)
    # When Locust plays the 120 s scenario at --time-scale 0.1 (12 s), with its pool started locally
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "QSIM_", "LOCUST_"))}
    proc = subprocess.run([sys.executable, "-m", "locust", "-f", "loadtests", "--headless", "--scenario", str(path),
                           "--redis-url", redis_url, "--start-workers", "--run-id", "lt-p", "--drain", "15",
                           "--time-scale", str(TIME_SCALE), "--compare-model", "--csv", str(tmp_path / "run")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    # Then the profiled type was added at its drawn times, on the compressed clock ...
    fast = time_scaled(s, TIME_SCALE)
    drawn = Schedule(fast, ["day"], window=fast.duration).times
    with Queue("q", redis=redis_url) as q:
        jobs = [q.get_job(f"lt-p-day-{n}") for n in range(drawn.size)]
        assert all(j is not None and j.state == "completed" for j in jobs)
        with pytest.raises(JobNotFound):  # and no more
            q.get_job(f"lt-p-day-{drawn.size}")
        at = np.array([float(j.enqueued_at) for j in jobs])  # type: ignore[union-attr,arg-type]
    t0 = float(np.min(at - drawn))  # the window opened here (Redis clock): no add comes before its time
    late = at - t0 - drawn
    assert np.percentile(late, 99) < timing_allowance(LATE), np.percentile(late, [50, 99, 100])
    # ... so the adds per 4 s window follow the profile: 50, 150, 50 jobs/s (Poisson noise allowed)
    counts = per_window(at - t0, 4.0, 3)
    expected = np.array([fast.job("day").arrival.profile.cumulative(b) - fast.job("day").arrival.profile.cumulative(a)  # type: ignore[union-attr]
                         for a, b in ((0, 4), (4, 8), (8, 12))])
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected) + 3), (counts, expected)
    assert counts[1] > 2.5 * max(counts[0], counts[2])  # the peak, not the mean
    print("adds per 4 s window:", counts, "expected:", expected.round(1), "late p50/p99/max (s):",
          np.percentile(late, [50, 99, 100]).round(3))
    # and the model comparison ran the same jobs (the enqueue times replayed)
    model = (tmp_path / "run_model.csv").read_text()
    assert "day,wait" in model and "model vs load test" in proc.stderr
    assert math.isfinite(float(model.splitlines()[1].split(",")[2]))
