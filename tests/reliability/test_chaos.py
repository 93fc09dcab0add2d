"""The short form of benchmarks/chaos.py: a kill storm on real worker processes, every execution counted."""

from __future__ import annotations

import pytest

from reliability_helpers import load_benchmark
from redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.chaos]


def test_kill_storm_loses_nothing_and_duplicates_only_jobs_held_at_a_kill(own_redis: RedisServer) -> None:
    chaos = load_benchmark("chaos")
    # Given 3,000 jobs, 3 worker processes, one SIGKILLed every 2 s (lock 2 s, stalled check 1 s)
    cfg = chaos.ChaosConfig(jobs=3000, baseline_jobs=1000, workers=3, concurrency=10, work=0.05, kill_every=2.0,
                            lock_duration=2.0, stalled_interval=1.0, timeout=90.0)
    lines: list[str] = []
    # When the storm runs to the end
    rep = chaos.run_chaos(own_redis.url, cfg, lines.append)
    print(chaos.format_report(rep))
    c, b = rep["chaos"], rep["baseline"]
    # Then nothing is lost or dead, and every job completed
    assert c["kills"] >= 2 and c["held_at_kills"] > 0
    assert c["lost"] == 0 and c["dead"] == 0 and c["unfinished"] == 0 and c["double_starts"] == 0
    assert c["completed"] == 3000 == c["completed_once"] + c["completed_more_than_once"]
    assert c["completed_without_execution"] == 0
    # and a job ran twice only if a killed worker held it
    assert c["duplicates_not_held_at_a_kill"] == 0
    assert c["completed_more_than_once"] <= c["held_at_kills"]
    # and every held job was put back within lock_duration + stalled_interval (+0.5 s of scheduling slack)
    assert c["recovery_delay"]["n"] > 0
    assert c["recovery_delay"]["max"] <= c["recovery_bound"] + 0.5
    assert c["recovery_delay"]["min"] >= cfg.lock_duration / 2 - 0.3  # renewed every half lock: never put back early
    assert 0 <= c["lock_expiry_to_requeue"]["min"] and c["lock_expiry_to_requeue"]["max"] <= cfg.stalled_interval + 0.5
    # and the run without kills ran every job exactly once
    assert b["completed_once"] == 1000 and b["lost"] == 0 and b["completed_more_than_once"] == 0
    assert 0 < rep["throughput_ratio"] < 1.5
    assert not any("exited on its own" in s for s in lines)
    # and every worker exited within 20 s of the SIGTERM that ended each phase
    assert not any("did not stop" in s for s in lines), "\n".join(lines)
