"""qsim advise --from bullmq: advice for a real BullMQ (Node.js) queue, read-only.

Needs ``node`` and ``npm`` (tests/bullmq_node.py installs bullmq into a cache folder on first use);
without them the test skips, saying so.
"""

from __future__ import annotations

import json

import pytest
import redis
from bullmq_node import BullMQ, node_missing  # type: ignore[import-not-found]

from qsim.cli import main

pytestmark = pytest.mark.redis
needs_node = pytest.mark.skipif(node_missing() is not None, reason=node_missing() or "")

TYPES = [{"name": "cut", "rate": 40}]
SERVICE = {"cut": {"kind": "gamma", "mean": 0.05, "cv": 0.5}}


def write_calls(url: str) -> int:
    """Commands that write, served by the server so far (INFO commandstats)."""
    stats = redis.Redis.from_url(url).info("commandstats")
    writes = ("hset", "hmset", "hdel", "zadd", "zrem", "del", "unlink", "set", "lpush", "rpush", "lpop", "rpop",
              "lrem", "lmove", "incr", "expire", "pexpire", "xadd", "evalsha", "eval", "flushdb", "flushall")
    return sum(v["calls"] for k, v in stats.items() if k.removeprefix("cmdstat_") in writes)


@needs_node
@pytest.mark.parametrize("major", ["6", pytest.param("5", marks=pytest.mark.long)])
def test_advice_for_a_bullmq_queue(redis_url: str, capsys: pytest.CaptureFixture[str], major: str) -> None:
    bq = BullMQ(major)
    # Given a named BullMQ worker (6.x by default; 5.x in the long run) of concurrency 4 at 40 jobs/s of 50 ms jobs (2 busy slots)
    with bq.worker(redis_url, "B", concurrency=4, service=SERVICE, seed=7, name="shop-0"):
        out = bq.produce(redis_url, "B", types=TYPES, duration=5.0, seed=3)
        assert bq.wait_drained(redis_url, "B", expected=out["added"], timeout=60)
    before = write_calls(redis_url)
    # When advised from its Redis
    code = main(["advise", "--from", "bullmq", "--redis", redis_url, "--queue", "B", "--slo", "p95_wait<=0.2",
                 "--concurrency", "4", "--json", "--processes", "1"])
    doc = json.loads(capsys.readouterr().out)
    # Then it read only, and sized the pool at that concurrency from the measured load
    assert code == 0 and write_calls(redis_url) == before
    assert doc["concurrency"] == 4 and doc["current_workers"] == 1 and doc["pool"] == "shop"
    assert doc["arrival_rate"] == pytest.approx(40, rel=0.25) and doc["service_mean"] == pytest.approx(0.05, rel=0.2)
    assert doc["recommended_workers"] in (1, 2) and doc["predicted"]["wait"]["p95"] <= 0.2
