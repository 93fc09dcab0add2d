"""The Redis probe: Redis's CPU per job and per waiting worker, measured on a real redis-server, and written into the
calibrated scenario that ``qsim plan`` then prices Redis with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from qsim.calibrate.redis_probe import probe_redis_cost, sample
from qsim.cli import main
from qsim.spec.scenario import Scenario

pytestmark = pytest.mark.redis

CSV = Path(__file__).resolve().parents[1] / "golden" / "jobs.csv"


def test_the_probe_measures_redis_cpu_per_job_and_per_idle_worker(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    before = sample(client)
    # When 400 jobs are added and drained, then 4 workers wait on the empty queue
    cost = probe_redis_cost(redis_url, jobs=400, concurrency=5, idle_workers=4)
    after = sample(client)
    d = cost.detail
    # Then Redis spent CPU on both phases; per job within what one machine can plausibly take (1 µs .. 20 ms)
    assert 1.0 < cost.cpu_per_job_us < 20_000.0
    assert d["add_us"] > 0 and d["drain_us"] > 0
    assert cost.cpu_per_job_us == pytest.approx(d["add_us"] + d["drain_us"])
    # the whole probe cannot have cost Redis less than its jobs did
    assert after.cpu - before.cpu >= cost.cpu_per_job_us * 400 / 1e6 * 0.99
    # each job is an add, a fetch and a completion, each a script of a few commands: more than 3, fewer than 100
    assert 3 < d["commands_per_job"] < 100
    # waiting workers send commands (their blocking pops time out every 5 s): a small positive idle cost
    assert 0 < d["idle_commands_per_worker_s"] < 50 and cost.idle_us_per_worker > 0
    # and the probe leaves no key behind
    assert client.dbsize() == 0
    client.close()


def test_calibrate_probe_writes_the_cost_into_the_scenario_plan_prices_redis_with(
        redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.toml"
    # When a calibration from a CSV is given the probe's overheads (the probe runs on the test's Redis)
    assert main(["calibrate", "--from", "csv", str(CSV), "--probe", "--redis", redis_url, "--out", str(out),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    measured = doc["overhead"]["redis"]
    assert measured["cpu_per_job_us"] > 0 and measured["commands_per_job"] > 3
    # Then the scenario carries Redis's cost per job as measured (rounded to 0.01 µs)
    s = Scenario.from_toml(out)
    assert s.engine.redis_cpu_per_job_us == pytest.approx(measured["cpu_per_job_us"], abs=0.01)
    assert s.engine.redis_idle_us_per_worker == pytest.approx(measured["idle_us_per_worker"], abs=0.001)
    assert "Redis CPU per job measured by the probe" in out.read_text()
    # and qsim plan prices the answer with it
    pool = s.pools[0].name
    assert main(["plan", str(out), "--slo", "p95_wait<=5", "--vary", f"pools.{pool}.workers=2,4,8,16",
                 "--processes", "1", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    r = plan["redis"]
    assert plan["recommended"] is not None and r["source"] == "engine.redis_cpu_per_job_us"
    assert r["cpu_per_job_us"] >= s.engine.redis_cpu_per_job_us
