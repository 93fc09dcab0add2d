"""``qsim worker`` / ``stats`` / ``dlq`` through worker_cli.register (the part qsim.cli mounts)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from engine_helpers import ROOT, wait_until
from qsim.cli import worker as worker_cli
from qsim.engine import Queue
from tests_redis_port import unused_url

pytestmark = pytest.mark.redis

DRIVER = (
    "import argparse, sys, logging; from qsim.cli import worker as worker_cli; "
    "logging.basicConfig(level=logging.INFO); "
    "p = argparse.ArgumentParser(prog='qsim'); s = p.add_subparsers(required=True); "
    "worker_cli.register(s); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
)


def run_cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    p = argparse.ArgumentParser(prog="qsim")
    worker_cli.register(p.add_subparsers(required=True))
    args = p.parse_args(list(argv))
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_redis_url_default_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert worker_cli.resolve_redis_url(None) == "redis://127.0.0.1:6379/0"
    monkeypatch.setenv("REDIS_URL", "redis://env:1/0")
    assert worker_cli.resolve_redis_url(None) == "redis://env:1/0"
    assert worker_cli.resolve_redis_url("redis://arg:2/0") == "redis://arg:2/0"


def test_unreachable_redis_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    url = unused_url()
    for argv in (["stats", "--redis", url], ["dlq", "list", "--queue", "q", "--redis", url]):
        code, out, err = run_cli(*argv, capsys=capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert f"cannot reach Redis at {url} (connection refused)" in err


def test_stats_and_dlq_commands(redis_url: str, queue: Queue, capsys: pytest.CaptureFixture[str]) -> None:
    queue.add("t", {"password": "hunter2"}, job_id="d1")
    queue.add("t", {}, job_id="d2")
    r = queue.client
    for jid in ("d1", "d2"):  # kill them the way a worker would
        r.zrem(queue.keys.wait, jid)
        r.zadd(queue.keys.dead, {jid: 1})
        r.hset(queue.keys.job(jid), mapping={"state": "dead", "error": f"Boom: {'hunter2' if jid == 'd1' else 'x'}"})
    Queue("other", redis=redis_url).add("t", {})
    code, out, _ = run_cli("stats", "--redis", redis_url, "--json", capsys=capsys)
    stats = json.loads(out)["queues"]
    assert code == 0 and stats["q"]["dead"] == 2 and stats["other"]["waiting"] == 1
    code, out, _ = run_cli("dlq", "list", "--queue", "q", "--redis", redis_url, capsys=capsys)
    assert code == 0 and out.count("\n") == 2 and "hunter2" not in out
    code, out, _ = run_cli("dlq", "show", "d1", "--queue", "q", "--redis", redis_url, capsys=capsys)
    shown = json.loads(out)
    assert shown["data"] == {"password": "***"} and shown["error"] == "Boom: ***"
    code, _, err = run_cli("dlq", "show", "nope", "--queue", "q", "--redis", redis_url, capsys=capsys)
    assert code == 1 and "nope" in err
    code, out, _ = run_cli("dlq", "retry", "d1", "--queue", "q", "--redis", redis_url, capsys=capsys)
    assert code == 0 and out.startswith("1 job(s)") and queue.get_job("d1").state == "waiting"
    code, _, err = run_cli("dlq", "retry", "--queue", "q", "--redis", redis_url, capsys=capsys)
    assert code == 2 and "--all" in err
    code, out, _ = run_cli("dlq", "purge", "--queue", "q", "--redis", redis_url, capsys=capsys)
    assert code == 0 and out.startswith("1 dead job(s) deleted") and queue.counts()["dead"] == 0


def test_dlq_lists_past_a_key_overwritten_by_hand_and_shows_only_dead_jobs(
    redis_url: str, queue: Queue, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given three dead jobs, one of whose keys was overwritten by hand with a string and one deleted by hand
    # (or evicted), and a waiting job
    for jid in ("d1", "d2", "d3"):
        queue.add("t", {}, job_id=jid)
        queue.client.zrem(queue.keys.wait, jid)
        queue.client.zadd(queue.keys.dead, {jid: 1})
        queue.client.hset(queue.keys.job(jid), mapping={"state": "dead", "error": "Boom"})
    queue.client.delete(queue.keys.job("d2"))
    queue.client.set(queue.keys.job("d2"), "not a hash")
    queue.client.delete(queue.keys.job("d3"))
    queue.add("t", {}, job_id="w1")
    opts = ("--queue", "q", "--redis", redis_url)
    # When the dead-letter queue is listed, then every dead job is (as many as stats counts), the unreadable
    # ones saying why
    code, out, err = run_cli("dlq", "list", *opts, capsys=capsys)
    assert code == 0, err
    rows = dict(line.split("\t", 1) for line in out.splitlines())
    assert set(rows) == {"d1", "d2", "d3"} and "Boom" in rows["d1"] and "3 dead job(s)" in err
    assert queue.counts()["dead"] == 3
    assert "holds another type than a hash" in rows["d2"] and "job hash is gone" in rows["d3"]
    code, out, _ = run_cli("dlq", "list", *opts, "--json", capsys=capsys)
    assert {j["id"]: j["state"] for j in json.loads(out)} == {"d1": "dead", "d2": "unknown", "d3": "unknown"}
    # and retrying the gone one moves nothing and says where to look
    code, out, err = run_cli("dlq", "retry", "d3", *opts, capsys=capsys)
    assert code == 1 and "0 job(s) moved back" in out and "hash is gone or corrupt" in err and "d3" in err
    # and showing the unreadable one, or a job that is not dead, is one clear line and exit 1
    code, out, err = run_cli("dlq", "show", "d2", *opts, capsys=capsys)
    assert code == 1 and out == "" and "'d2' holds another type than a hash" in err and "WRONGTYPE" not in err
    code, out, err = run_cli("dlq", "show", "w1", *opts, capsys=capsys)
    assert code == 1 and out == "" and "'w1' is not in the dead-letter queue" in err and "waiting" in err
    # and the key overwritten by hand is still there, as it was
    assert queue.client.get(queue.keys.job("d2")) == "not a hash"


def test_worker_command_runs_a_users_handler(
    redis_url: str, redis_client: redis.Redis, queue: Queue, tmp_path: Path
) -> None:
    (tmp_path / "myjobs.py").write_text(
        "async def handle(job):\n    return {'twice': job.data['n'] * 2}\n\ndef sync_one(job):\n    return 1\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    bad = subprocess.run([sys.executable, "-c", DRIVER, "worker", "myjobs:sync_one", "--queue", "q",
                          "--redis", redis_url], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "must be an async function" in bad.stderr
    unreachable = subprocess.run([sys.executable, "-c", DRIVER, "worker", "myjobs:handle", "--queue", "q",
                                  "--redis", unused_url()], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=30)
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr
    queue.add_bulk([("t", {"n": i}) for i in range(10)])
    p = subprocess.Popen([sys.executable, "-c", DRIVER, "worker", "myjobs:handle", "--queue", "q", "--redis",
                          redis_url, "--concurrency", "3"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: queue.counts()["completed"] == 10, timeout=20)
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()
    assert sorted(j.returnvalue["twice"] for j in queue.job_records()) == [2 * i for i in range(10)]


@pytest.mark.parametrize("order", ["id-first", "options-first", "id-between"])
def test_dlq_show_and_retry_take_the_id_before_or_after_the_options(
    redis_url: str, queue: Queue, capsys: pytest.CaptureFixture[str], order: str
) -> None:
    queue.add("t", {"password": "hunter2"}, job_id="d1")
    r = queue.client
    r.zrem(queue.keys.wait, "d1")
    r.zadd(queue.keys.dead, {"d1": 1})
    r.hset(queue.keys.job("d1"), mapping={"state": "dead", "error": "Boom"})
    opts = ["--queue", "q", "--redis", redis_url]
    argv = {"id-first": ["d1", *opts], "options-first": [*opts, "d1"], "id-between": [*opts[:2], "d1", *opts[2:]]}
    code, out, err = run_cli("dlq", "show", *argv[order], capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["id"] == "d1" and json.loads(out)["data"] == {"password": "***"}
    code, out, err = run_cli("dlq", "retry", *argv[order], capsys=capsys)
    assert code == 0 and out.startswith("1 job(s)"), err
    # an option the command does not know is still refused
    with pytest.raises(SystemExit):
        run_cli("dlq", "show", "--queue", "q", "d1", "--nope", capsys=capsys)


@pytest.mark.parametrize("action", ["show", "retry"])
def test_dlq_with_an_id_utf8_cannot_encode_is_exit_2(redis_url: str, queue: Queue, action: str) -> None:
    # Given a shell argument whose bytes are not UTF-8 (Python reads it as a lone surrogate)
    queue.add("t", {}, job_id="d1")
    before = sorted(queue.client.keys("*"))
    # When `qsim dlq show/retry` gets it as the job id
    p = subprocess.run([sys.executable, "-m", "qsim", "dlq", action, b"job-\xff", "--queue", "q", "--redis",
                        redis_url], cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                       text=True, timeout=60)
    print(f"\nqsim dlq {action} job-\\xff: exit {p.returncode}: {p.stderr.strip()}")
    # Then it is bad input: exit 2, one line naming the id, no traceback, nothing written
    assert p.returncode == 2
    assert "job_id" in p.stderr and "job-" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert sorted(queue.client.keys("*")) == before
