"""qsim calibrate --from bullmq: a real BullMQ (Node.js) worker with known service times, and BullMQ's
4.x, 5.x and 6.x Redis layouts.

The real-BullMQ tests need ``node`` and ``npm`` (bullmq is installed into a cache folder on first
use, see tests/bullmq_node.py); without them they skip, saying so. The layout tests write job
hashes by hand, as bullmq 4.18 and 5.81 write them, and need only Redis.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

import qsim.calibrate as cal
from bullmq_node import BullMQ, node_missing  # type: ignore[import-not-found]
from qsim.cli import main
from qsim.errors import CalibrationError
from qsim.model import simulate

pytestmark = pytest.mark.redis
needs_node = pytest.mark.skipif(node_missing() is not None, reason=node_missing() or "")

TYPES = [{"name": "bulk", "arrival": "burst", "rate": 20, "size": 10}, {"name": "cut", "rate": 20}]
SERVICE = {"bulk": {"kind": "lognormal", "mean": 0.08, "cv": 0.5}, "cut": {"kind": "gamma", "mean": 0.05, "cv": 0.3}}
DURATION = 6.0


def run_bullmq(bq: BullMQ, url: str, queue: str, concurrency: int, **worker: Any) -> dict[str, Any]:
    with bq.worker(url, queue, concurrency=concurrency, service=SERVICE, seed=7, **worker):
        out = bq.produce(url, queue, types=TYPES, duration=DURATION, seed=3)
        assert bq.wait_drained(url, queue, expected=out["added"], timeout=60)
    return out


def slept(url: str, queue: str, ids: list[str]) -> float:
    """The mean service time the worker drew for these jobs (it returns it)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    pipe = client.pipeline()
    for i in ids:
        pipe.hget(f"bull:{queue}:{i}", "returnvalue")
    values = [json.loads(v)["s"] for v in pipe.execute()]
    client.close()
    return float(np.mean(values))


@needs_node
@pytest.mark.long  # BullMQ 6 has the same round trip in the default run (tests/e2e/test_bullmq_target.py)
def test_bullmq5_round_trip(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    bq = BullMQ("5")
    # Given a real BullMQ 5 worker (named, concurrency 6) with known service distributions
    run_bullmq(bq, redis_url, "A", 6, name="shop-0")
    # When calibrated from its Redis (the CLI, as docs/reference/cli.md gives it)
    assert main(["calibrate", "--from", "bullmq", "--redis", redis_url, "--queue", "A", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    fits = doc["fits"]
    # Then each type's service is the runs' own distribution (BullMQ's pickup is not known to hold a slot:
    # it goes to the wait, nothing is taken out of the runs): its mean within 3% of the runs' mean, a fit
    # the bootstrap does not reject; the runs hold the handler's whole sleep and BullMQ's own few ms in the
    # slot (Node's timers overshoot on a busy machine), so the mean is at least what the worker drew and
    # within 12% of the truth (~110 draws of a cv 0.3 gamma: 4 standard errors)
    jobs = cal.from_bullmq(redis_url, "A").measured.jobs
    assert doc["overhead"]["treatment"].startswith("pickup_latency") and doc["overhead"]["in_run"] is False
    for name, spec in SERVICE.items():
        mean = fits[name]["service"]["mean"]
        mine = jobs[(jobs["type"] == name) & (jobs["outcome"] == "completed")]
        assert mean == pytest.approx(float((mine["finished"] - mine["started"]).mean()), rel=0.03), (name, fits[name])
        assert fits[name]["ks_p"] >= 0.01, (name, fits[name])
        assert mean >= slept(redis_url, "A", list(mine["job_id"])) - 0.002, (name, fits[name])
        assert mean == pytest.approx(spec["mean"], rel=0.12), (name, fits[name])
    # and each arrival rate within 3% (the burst's is fixed; the Poisson type's: the rate its sample realized)
    assert fits["bulk"]["arrival"] == {"kind": "burst", "rate": pytest.approx(20.0, rel=0.03), "size": 10}
    n_cut = int((jobs["type"] == "cut").sum())
    assert fits["cut"]["arrival"]["kind"] == "poisson"
    assert fits["cut"]["arrival"]["rate"] == pytest.approx(n_cut / DURATION, rel=0.03)
    assert doc["scenario"]["pools"][0] | {"concurrency": 0} == {
        "name": "shop", "queues": ["A"], "policy": "priority", "weights": {}, "workers": 1, "concurrency": 0}
    assert doc["source"].startswith("bullmq:5.81")
    # and the model's prediction at concurrency 4 is within 15% of BullMQ's measured mean wait there
    s = cal.from_bullmq(redis_url, "A").scenario
    at4 = replace(s, pools=tuple(replace(p, concurrency=4) for p in s.pools))
    predicted = float(np.mean([simulate(replace(at4, seed=100 + i)).summary["wait"]["mean"] for i in range(6)]))
    run_bullmq(bq, redis_url, "B", 4, name="shop-0")
    b = cal.from_bullmq(redis_url, "B").measured.jobs
    measured = float((b["started"] - b["enqueued"]).mean())
    assert measured > 0.01  # bursts queue at 4 slots: not pickup noise
    assert predicted == pytest.approx(measured, rel=0.15), (predicted, measured)


@needs_node
@pytest.mark.parametrize("major", ["4", "5", "6"])
def test_bullmq_failures_retries_and_options(redis_url: str, major: str) -> None:
    bq = BullMQ(major)
    types = [{"name": "flaky", "rate": 60, "attempts": 3, "backoff": {"type": "fixed", "delay": 20}, "priority": 2}]
    with bq.worker(redis_url, "F", concurrency=8, service={"*": {"kind": "constant", "mean": 0.005}},
                   fail_prob={"*": 0.2}, poison_prob={"*": 0.1}, seed=11):
        out = bq.produce(redis_url, "F", types=types, duration=2.0, seed=5)
        assert bq.wait_drained(redis_url, "F", expected=out["added"], timeout=60)
    before = redis.Redis.from_url(redis_url).info("commandstats")
    c = cal.from_bullmq(redis_url, ["F"])
    after = redis.Redis.from_url(redis_url).info("commandstats")
    assert {k: v["calls"] for k, v in after.items() if "hset" in k or "zadd" in k or "del" in k} == \
        {k: v["calls"] for k, v in before.items() if "hset" in k or "zadd" in k or "del" in k}  # read-only
    j = c.scenario.job("flaky")
    assert (j.attempts, j.backoff.kind, j.backoff.delay, j.priority) == (3, "fixed", 0.02, 2)
    f = c.types["flaky"].failures
    assert f.jobs == out["added"] and f.fail_ci[0] - 0.05 <= 0.2 <= f.fail_ci[1] + 0.05
    assert f.poison_ci[0] - 0.05 <= 0.1 <= f.poison_ci[1] + 0.05
    assert c.measured.source.startswith(f"bullmq:{major}.")
    if major == "4":  # 4.x stores no worker name (its producer and worker write the 4.x layout)
        assert any("no worker names" in w for w in c.warnings)


def _job(client: redis.Redis, queue: str, jid: int, fields: dict[str, Any]) -> None:
    client.hset(f"bull:{queue}:{jid}", mapping={k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()})


def test_bullmq_layouts_written_by_hand(redis_url: str) -> None:
    """Job hashes as bullmq 4.18 (attemptsMade counts started attempts) and 5.81 (atm counts ended
    ones, ats started ones, pb the worker's name) write them."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    t = 1_700_000_000_000
    for queue, v5 in (("old", False), ("new", True)):
        client.hset(f"bull:{queue}:meta", mapping={"version": "bullmq:5.81.5" if v5 else "bullmq:4.18.3",
                                                   "opts.maxLenEvents": 10000, "concurrency": 3})
        for i in range(40):
            start = t + i * 100
            # every 4th job failed once and then completed; job 39 ran out of its 2 attempts
            made = 2 if i % 4 == 0 or i == 39 else 1
            fields: dict[str, Any] = {
                "name": "resize", "data": "{}", "timestamp": str(start - 10 - 50), "delay": "0",
                "opts": {"attempts": 2, "backoff": 250, "delay": 50, "removeOnComplete": {"count": 1000}},
                "priority": "0", "processedOn": str(start), "finishedOn": str(start + 20)}
            fields.update({"atm": str(made), "ats": str(made), "pb": "box-1"} if v5 else {"attemptsMade": str(made)})
            _job(client, queue, i + 1, fields)
            client.zadd(f"bull:{queue}:{'failed' if i == 39 else 'completed'}", {str(i + 1): start + 20})
        client.rpush(f"bull:{queue}:wait", "41")
        _job(client, queue, 41, {"name": "resize", "timestamp": str(t + 4000), "opts": {"attempts": 2}, "priority": "0"})
    for queue in ("old", "new"):
        c = cal.from_bullmq(redis_url, queue, min_jobs=10)
        jobs = c.measured.jobs.set_index("job_id")
        assert jobs.loc["1", "enqueued"] == pytest.approx((t - 10) / 1000)  # timestamp + opts.delay
        assert np.isnan(jobs.loc["1", "started"]) and jobs.loc["2", "started"] == pytest.approx(t / 1000 + 0.1)
        assert (jobs.loc["1", "failed_attempts"], jobs.loc["40", "outcome"], jobs.loc["41", "outcome"]) == \
            (1, "dead", "unfinished")
        j = c.scenario.job("resize")
        assert (j.attempts, j.backoff.kind, j.backoff.delay) == (2, "fixed", 0.25)
        assert c.scenario.queue(queue).concurrency_limit == 3
        assert c.types["resize"].service.mean == pytest.approx(0.02 - c.overhead.in_slot, abs=1e-3)
        assert c.pools[0].name == ("box" if queue == "new" else "workers")
    with pytest.raises(CalibrationError, match="BullMQ queues seen under 'bull': new, old"):
        cal.from_bullmq(redis_url, "missing")
    client.lpush("bull:broken:completed", "1")
    with pytest.raises(CalibrationError, match="bull:broken:completed is a list, not a zset"):
        cal.from_bullmq(redis_url, "broken")
    client.flushall()
    client.hset("qsim:{orders}:meta", "paused", "0")
    with pytest.raises(CalibrationError, match="holds qsim engine queues: use --from qsim"):
        cal.from_bullmq(redis_url, "orders")
    client.close()


def test_an_uncapped_bullmq_backoff_stays_uncapped(redis_url: str, tmp_path: Path) -> None:
    """BullMQ's exponential backoff has no cap: calibrate must not write max = 60 (it used to)."""
    from qsim.spec.backoff import MAX_BACKOFF
    from qsim.spec.scenario import Scenario

    # Given 40 BullMQ jobs with 6 attempts and an exponential backoff of 10 s (its 5th retry waits 160 s)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    t = 1_700_000_000_000
    client.hset("bull:mail:meta", mapping={"version": "bullmq:5.81.5", "opts.maxLenEvents": 10000})
    for i in range(40):
        start = t + i * 100
        _job(client, "mail", i + 1, {
            "name": "send", "data": "{}", "timestamp": str(start - 10), "delay": "0", "priority": "0",
            "opts": {"attempts": 6, "backoff": {"type": "exponential", "delay": 10_000}},
            "processedOn": str(start), "finishedOn": str(start + 20), "atm": "1", "ats": "1", "pb": "box-1"})
        client.zadd("bull:mail:completed", {str(i + 1): start + 20})
    client.close()
    # When calibrated and written as a scenario
    c = cal.from_bullmq(redis_url, "mail", min_jobs=10)
    path = tmp_path / "mail.toml"
    c.write(path)
    # Then the backoff keeps no cap: max is the engine's own longest delay, and the file says why
    b = Scenario.from_toml(path).job("send").backoff
    assert (b.kind, b.delay, b.max) == ("exponential", 10.0, MAX_BACKOFF)
    text = path.read_text()
    assert "max = 60" not in text and "has no cap" in text
