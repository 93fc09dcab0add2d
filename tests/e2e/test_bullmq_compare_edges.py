"""qsim compare --target bullmq at its edges: a Redis that refuses the login, and no BullMQ worker listening.

Neither needs Node.js: the jobs are added with the ``bullmq`` Python package, and no worker runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from qsim.cli import main
from qsim.harness.server import RedisServer

pytestmark = [pytest.mark.redis]

SCENARIO = """
name = "b"
seed = 1
duration = 3.0
[[queues]]
name = "orders"
[[jobs]]
name = "a"
queue = "orders"
arrival = { kind = "constant", rate = 4.0 }
service = { kind = "constant", mean = 0.05 }
[[pools]]
name = "p"
queues = ["orders"]
"""


def compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv, "--target", "bullmq", "--queue", "orders", "--drain-timeout", "1"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_wrong_password_is_one_sentence_before_anything_runs(own_redis: RedisServer, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Given a Redis that wants a password
    path = tmp_path / "b.toml"
    path.write_text(SCENARIO)
    client = redis.Redis.from_url(own_redis.url)
    client.config_set("requirepass", "sekret")
    client.close()
    url = f"redis://:wrong@127.0.0.1:{own_redis.port}/0"
    # When compare --target bullmq logs in with the wrong one (it used to run the model, then print 131
    # lines of asyncio tracebacks)
    code, out, err = compare(capsys, str(path), "--redis", url)
    # Then: exit 2, one sentence naming the Redis (password hidden) and the reason, nothing added
    assert code == 2 and out == "", err
    assert err == (f"qsim compare: cannot reach Redis at redis://:***@127.0.0.1:{own_redis.port}/0 "
                   "(invalid username-password pair or user is disabled)\n")
    admin = redis.Redis(port=own_redis.port, password="sekret")
    assert admin.dbsize() == 0
    admin.close()


def test_no_worker_listening_is_said_and_fails_the_check(redis_url: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Given no BullMQ worker on queue "orders" (12 jobs planned over 3 s)
    path = tmp_path / "b.toml"
    path.write_text(SCENARIO)
    # When compare --target bullmq runs
    code, out, err = compare(capsys, str(path), "--redis", redis_url)
    # Then the comparison says every job was left unfinished and why that may be (exit 0: nothing was judged)
    assert code == 0, err
    assert "bullmq left 12 of 12 job(s) unfinished at the drain timeout: no BullMQ worker took any" in out, out
    # And with --check the verdict fails on them: exit 1
    code, out, err = compare(capsys, str(path), "--redis", redis_url, "--check")
    assert code == 1, err
    row = next(line for line in out.splitlines() if line.startswith("jobs.unfinished"))
    assert row.split()[1:3] == ["0", "12"] and row.endswith("fail"), row
    assert "check FAILED" in out and "jobs.unfinished" in out.rsplit("check FAILED", 1)[1]
