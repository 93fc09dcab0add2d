"""qsim calibrate --from qsim: the engine's own job records, read-only, to a scenario; --probe."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import qsim.calibrate as cal
from qsim.cli import main
from qsim.errors import CalibrationError
from qsim.harness.run import EngineResult, run_scenario
from qsim.spec.scenario import Scenario

pytestmark = pytest.mark.redis

TRUTH = {
    "name": "truth", "seed": 3, "duration": 6.0,
    "queues": [{"name": "orders", "concurrency_limit": 5, "rate_limit": {"max": 500, "per": 1.0}}, {"name": "mail"}],
    "jobs": [
        {"name": "cut", "queue": "orders", "priority": 2, "arrival": {"kind": "poisson", "rate": 40.0},
         "service": {"kind": "lognormal", "mean": 0.03, "cv": 0.6}, "fail_prob": 0.2, "attempts": 3,
         "backoff": {"kind": "fixed", "delay": 0.05}},
        {"name": "pack", "queue": "orders", "arrival": {"kind": "burst", "rate": 10.0, "size": 5},
         "service": {"kind": "constant", "mean": 0.02}},
        {"name": "send", "queue": "mail", "arrival": {"kind": "poisson", "rate": 15.0},
         "service": {"kind": "exponential", "mean": 0.01}},
    ],
    "pools": [{"name": "shop", "queues": ["orders", "mail"], "workers": 2, "concurrency": 3}],
}


@pytest.fixture(scope="module")
def measured(redis_server: Any) -> Iterator[tuple[str, EngineResult]]:
    """One engine run with known truth, its keys kept (db 3 of the session's server)."""
    url = redis_server.url.rsplit("/", 1)[0] + "/3"
    redis.Redis.from_url(url).flushdb()
    result = run_scenario(Scenario.from_dict(TRUTH), url, keep=True)
    assert result.summary["jobs"]["lost"] == 0
    yield url, result


def write_calls(url: str) -> int:
    """Commands that write, served by the server so far (INFO commandstats)."""
    stats = redis.Redis.from_url(url).info("commandstats")
    writes = ("hset", "hmset", "hdel", "zadd", "zrem", "del", "unlink", "set", "lpush", "rpush", "lpop", "rpop",
              "incr", "expire", "pexpire", "xadd", "evalsha", "eval", "flushdb", "flushall", "zpopmin", "rename")
    return sum(v["calls"] for k, v in stats.items() if k.removeprefix("cmdstat_") in writes)


def test_engine_records_to_scenario(measured: tuple[str, EngineResult], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    url, run = measured
    # When calibrated from the engine's Redis (the CLI, as docs/reference/cli.md gives it)
    before = write_calls(url)
    out_toml = tmp_path / "cal.toml"
    code = main(["calibrate", "--from", "qsim", "--redis", url, "--queue", "orders", "--queue", "mail",
                 "--prefix", run.prefix, "--out", str(out_toml), "--json"])
    doc = json.loads(capsys.readouterr().out)
    # Then nothing was written to the Redis it read
    assert code == 0
    assert write_calls(url) == before
    # and the scenario holds the truth where the records hold it
    s = Scenario.from_toml(out_toml)
    assert s.to_dict() == doc["scenario"]
    cut, pack = s.job("cut"), s.job("pack")
    assert (cut.queue, cut.priority, cut.attempts) == ("orders", 2, 3)
    assert (cut.backoff.kind, cut.backoff.delay) == ("fixed", 0.05)
    q = s.queue("orders")
    assert q.concurrency_limit == 5 and q.rate_limit is not None and (q.rate_limit.max, q.rate_limit.per) == (500, 1.0)
    assert [(p.name, p.queues, p.workers) for p in s.pools] == [("shop", ("mail", "orders"), 2)]
    assert s.queue("mail").concurrency_limit is None and s.job("send").queue == "mail"
    assert 2 <= s.pools[0].concurrency <= 3
    assert pack.arrival.kind == "burst" and pack.arrival.size == 5  # type: ignore[union-attr]
    jobs = run.records.jobs
    n_cut = int((jobs["type"] == "cut").sum())
    assert doc["fits"]["cut"]["arrival"]["rate"] == pytest.approx(n_cut / s.duration, rel=1e-6)
    assert sum(f["jobs"] for f in doc["fits"].values()) == len(jobs) and doc["fits"]["cut"]["jobs"] == n_cut
    assert doc["fits"]["send"]["arrival"]["kind"] == "poisson"
    # service: the handler's time plus at most a few ms of engine overhead
    assert 0.028 < doc["fits"]["cut"]["service"]["mean"] < 0.036
    assert doc["fits"]["pack"]["service"]["kind"] in ("constant", "gamma", "lognormal", "empirical")
    assert 0.019 < doc["fits"]["pack"]["service"]["mean"] < 0.026
    f = doc["fits"]["cut"]["failures"]
    assert f["fail_ci"][0] <= 0.2 <= f["fail_ci"][1] and f["failed_attempts"] == int(jobs["failed_attempts"].sum())
    o = doc["overhead"]
    assert o["source"] == "measured jobs (low load)" and 0 < o["fetch_overhead"] < 0.02 and o["ack_overhead"] == 0
    assert o["n"] >= 30


def test_windows_and_max_jobs(measured: tuple[str, EngineResult]) -> None:
    url, run = measured
    full = cal.from_redis(url, "orders", prefix=run.prefix)
    assert len(full.measured.attempts) >= len(full.measured.jobs)  # the engine logs every attempt
    capped = cal.from_redis(url, ["orders"], prefix=run.prefix, max_jobs=120, min_jobs=10)
    assert len(capped.measured.jobs) <= 120
    assert capped.window[0] > full.window[0]
    assert any("--max-jobs" in w for w in capped.warnings)
    t0 = float(full.measured.jobs["enqueued"].min())
    early = cal.from_redis(url, "orders", prefix=run.prefix, until=t0 + 3.0, min_jobs=10)
    assert early.window[1] == pytest.approx(t0 + 3.0) and len(early.measured.jobs) < len(full.measured.jobs)
    with pytest.raises(CalibrationError, match="no jobs in queue 'orders'"):
        cal.from_redis(url, "orders", prefix=run.prefix, since=str(t0 + 1e6))


def test_missing_queues_and_foreign_layouts(measured: tuple[str, EngineResult],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    url, run = measured
    client = redis.Redis.from_url(url)
    client.rpush(f"{run.prefix}:{{listy}}:completed", "x")  # not the engine's layout
    try:
        cases = [
            (["--queue", "nope", "--prefix", run.prefix], f"no qsim queue 'nope' under prefix '{run.prefix}'"),
            (["--queue", "nope", "--prefix", run.prefix], "queues seen under"),
            (["--queue", "orders"], "no qsim queue 'orders' under prefix 'qsim'"),
            (["--queue", "listy", "--prefix", run.prefix], "is a list, not a zset"),
            (["--queue", "bad name", "--prefix", run.prefix], "queue name must be a non-empty string"),
            (["--queue", "orders", "--prefix", run.prefix, "--min-jobs", "100000"], "at least 100000 are needed"),
        ]
        for args, expected in cases:
            code = main(["calibrate", "--from", "qsim", "--redis", url, *args])
            out, err = capsys.readouterr()
            assert code == 2, (args, err)
            assert expected in err and err.count("\n") == 1 and out == "", (args, err)
    finally:
        client.delete(f"{run.prefix}:{{listy}}:completed")
        client.close()
    # a Redis that cannot be reached is bad input too (the URL is the user's): exit 2, one line
    assert main(["calibrate", "--from", "qsim", "--redis", "redis://127.0.0.1:1/0", "--queue", "q"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach Redis at redis://127.0.0.1:1/0 (connection refused)" in err and err.count("\n") == 1


def test_probe_measures_the_engine_overhead(measured: tuple[str, EngineResult],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # When the probe runs on a local Redis (db 4 of the session's server: db 3 holds the measured run)
    redis_url = measured[0].rsplit("/", 1)[0] + "/4"
    redis.Redis.from_url(redis_url).flushdb()
    assert main(["calibrate", "--probe", "--redis", redis_url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    o = doc["overhead"]
    # Then it fits both overheads from its own light-load run, and leaves no key behind
    assert o["source"] == "probe" and o["n"] >= 60 and o["lost"] == 0
    assert 0 < o["fetch_overhead"] < 0.02 and 0 <= o["ack_overhead"] < 0.02
    assert o["fetch_overhead"] + o["ack_overhead"] == pytest.approx(max(o["in_slot_mean"], o["fetch_overhead"]))
    assert redis.Redis.from_url(redis_url).dbsize() == 0
    # a calibration given the probe's overhead takes both out of the measured runs
    url, run = measured
    probed = cal.Overhead(o["fetch_overhead"], o["ack_overhead"], "probe", n=o["n"])
    c = cal.from_redis(url, "orders", prefix=run.prefix, overhead=probed)
    assert c.scenario.engine.fetch_overhead == o["fetch_overhead"] and c.scenario.engine.ack_overhead == o["ack_overhead"]
    assert c.types["cut"].service.shift == pytest.approx(o["fetch_overhead"] + o["ack_overhead"])
    assert c.overhead.source == "probe" and "probe" in c.comments()["engine.ack_overhead"]
    # and a Redis that is not on this machine is refused before anything is written
    assert main(["calibrate", "--probe", "--redis", "redis://10.255.255.1:6379/0"]) == 2
    assert "--i-know-this-is-not-local" in capsys.readouterr().err


def test_probe_under_load_gives_the_scenario_overhead_by_load(measured: tuple[str, EngineResult], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    url, run = measured
    out_toml = tmp_path / "cal.toml"
    # When calibrated with a probe at the pools' shape (2 x 3 slots) over two loads (the CLI, as a user runs it)
    code = main(["calibrate", "--from", "qsim", "--redis", url, "--queue", "orders", "--queue", "mail",
                 "--prefix", run.prefix, "--probe", "--concurrency", "3", "--workers", "2", "--loads", "0.2,0.6",
                 "--probe-service", "0.01", "--out", str(out_toml), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    # Then the overhead is a table over the utilizations the probe reached, its lightest row as the scalars
    o = doc["overhead"]
    rows = o["by_load"]
    assert len(rows) == 2 and rows[0][0] < rows[1][0] <= 1.0 and o["lost"] == 0
    assert (o["fetch_overhead"], o["ack_overhead"]) == (rows[0][1], rows[0][2])
    assert all(0 <= f < 0.05 and 0 <= a < 0.05 for _, f, a in rows)
    assert o["source"] == "probe at 2 x 3 slots, 2 loads" and "offered 0.2" in o["note"]
    # and the scenario carries it, its scalars 0; the service was fitted less the overhead at the measured load
    s = Scenario.from_toml(out_toml)
    assert s.engine.overhead_by_load == tuple(tuple(r) for r in rows) and s.engine.fetch_overhead == 0.0
    assert any("measured utilization" in w for w in doc["warnings"])
    assert doc["fits"]["cut"]["shift"] > 0
    # the model runs it, reading the row of its own load; the probe left no key behind
    assert main(["simulate", str(out_toml), "--json"]) == 0
    capsys.readouterr()
    client = redis.Redis.from_url(url, decode_responses=True)
    assert [k for k in client.scan_iter(count=1000) if not k.startswith(run.prefix)] == []
    client.close()
    # bad probe shapes are refused before anything runs
    for argv, said in ((["--probe", "--loads", "0.5"], "--workers and --loads need --concurrency N"),
                       (["--from", "csv", "x.csv", "--concurrency", "2"], "they need --probe")):
        assert main(["calibrate", *argv]) == 2
        assert said in capsys.readouterr().err
