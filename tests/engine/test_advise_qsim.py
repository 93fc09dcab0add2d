"""qsim advise on a real engine's records: read-only, the offline plan agrees, bad input, --watch,
Ctrl-C, and ``qsim worker --advise-slo`` exporting the advice next to its metrics."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest
from stepped_load import HERE
from waiting import wait_until

from qsim.advise import WORKER_BUDGET, Advice, Advisor, Unavailable, advise, watch
from qsim.advise.live import ADVICE_METRICS
from qsim.cli import main
from qsim.engine import Queue
from qsim.harness.run import EngineResult, run_scenario
from qsim.spec.scenario import Scenario

pytestmark = pytest.mark.redis

SLO = "p95_wait<=0.5"
TRUTH = {
    "name": "advised", "seed": 5, "duration": 10.0,
    "queues": [{"name": "orders"}, {"name": "mail"}],
    "jobs": [{"name": "cut", "queue": "orders", "arrival": {"kind": "poisson", "rate": 15.0},
              "service": {"kind": "exponential", "mean": 0.15}},
             {"name": "send", "queue": "mail", "arrival": {"kind": "poisson", "rate": 8.0},
              "service": {"kind": "constant", "mean": 0.05}}],
    "pools": [{"name": "shop", "queues": ["orders"], "workers": 2, "concurrency": 2},
              {"name": "post", "queues": ["mail"], "workers": 1, "concurrency": 2}],
}


@pytest.fixture(scope="module")
def measured(redis_server: Any) -> Iterator[tuple[str, EngineResult]]:
    """One engine run, its keys kept (db 7 of the session's server; these tests never flush)."""
    url = redis_server.url.rsplit("/", 1)[0] + "/7"
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


def test_advise_reads_only_and_agrees_with_an_offline_plan(measured: tuple[str, EngineResult], tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, run = measured
    out = tmp_path / "advised.toml"
    # When advised from the engine's records (the CLI, as docs/reference/cli.md gives it)
    before = write_calls(url)
    code = main(["advise", "--redis", url, "--queue", "orders", "--slo", SLO, "--window", "15m", "--prefix",
                 run.prefix, "--json", "--out", str(out), "--processes", "1"])
    doc = json.loads(capsys.readouterr().out)
    # Then nothing was written to the Redis it read
    assert code == 0 and write_calls(url) == before
    # and the advice is a worker count at the observed concurrency, with the measured figures beside it
    assert doc["concurrency"] == 2 and doc["current_workers"] == 2 and doc["pool"] == "shop"
    assert doc["recommended_workers"] is not None and doc["reason"] is None
    assert doc["arrival_rate"] == pytest.approx(15.0, rel=0.25) and 0.12 < doc["service_mean"] < 0.2
    assert 0.3 < doc["utilization"] < 0.95 and doc["window"]["jobs"] > 100
    assert doc["predicted"]["wait"]["p95"] <= 0.5 and doc["shutdown"]["termination_grace_period_seconds"] >= 6
    # and an offline `qsim plan` of the scenario it wrote gives the same answer
    assert doc["plan_command"].startswith(f"qsim plan {out} ")
    argv = doc["plan_command"].split()[1:]
    argv = [a.strip('"') for a in argv]
    assert main([*argv, "--processes", "1", "--json"]) == 0
    offline = json.loads(capsys.readouterr().out)
    assert offline["recommended"] == {doc["search"]["path"]: doc["recommended_workers"]}
    # and the Redis load it implies is the offline plan's, within the default ceiling at this rate
    assert doc["redis"] == offline["redis"] and doc["redis"]["workers"] == doc["recommended_workers"]
    assert 0 < doc["redis"]["utilization"] < doc["redis"]["ceiling"] and not doc["redis"]["above_ceiling"]
    # and the text form says the same in a few lines; a Redis priced above the ceiling is warned about
    assert main(["advise", "--redis", url, "--queue", "orders", "--slo", SLO, "--prefix", run.prefix,
                 "--processes", "1", "--redis-cpu-per-job", "100000", "--redis-ceiling", "0.5"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"queue 'orders' needs {doc['recommended_workers']} worker")
    assert "measured in the last 15m" in text and "terminationGracePeriodSeconds" in text
    redis_line = next(line for line in text.splitlines() if line.strip().startswith("redis: "))
    assert "1e+05 µs per job, --redis-cpu-per-job; ABOVE the ceiling 50%" in redis_line
    assert "warning: Redis: the recommended point implies" in text and "(--redis-ceiling)" in text


def test_bad_input_exits_2_naming_what(measured: tuple[str, EngineResult],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, run = measured
    cases = [
        (["--queue", "orders", "--window", "1s"], "no jobs in queue 'orders' in the last 1s (--window)"),
        (["--queue", "nope"], f"no qsim queue 'nope' under prefix '{run.prefix}'"),
        (["--queue", "orders", "--min-jobs", "100000"], "widen --window"),
    ]
    for args, expected in cases:
        code = main(["advise", "--redis", url, "--prefix", run.prefix, "--slo", SLO, *args])
        out, err = capsys.readouterr()
        assert code == 2 and expected in err and err.count("\n") == 1 and out == "", (args, err)
    assert main(["advise", "--redis", "redis://127.0.0.1:1/0", "--queue", "q", "--slo", SLO]) == 2
    assert "cannot reach Redis at redis://127.0.0.1:1/0" in capsys.readouterr().err


def test_a_rate_limit_the_arrivals_exceed_is_said_in_words(measured: tuple[str, EngineResult],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, run = measured
    q = Queue("mail", redis=url, prefix=run.prefix)
    q.set_rate_limit(4, 1.0)  # the mail queue's 8 jobs/s now exceed what its limit lets start
    try:
        assert main(["advise", "--redis", url, "--prefix", run.prefix, "--queue", "mail", "--slo", SLO, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
    finally:
        q.set_rate_limit(None)
        q.close()
    assert doc["recommended_workers"] is None and doc["concurrency"] == 2
    assert "rate limit of 4 per 1 s" in doc["reason"] and doc["search"]["runs"] == 0


def test_watch_prints_changes_only_serves_gauges_and_ends_on_ctrl_c(measured: tuple[str, EngineResult]) -> None:
    url, run = measured
    port = _free_port()
    # Given a watch every second on a queue whose jobs do not change, serving its gauges
    proc = subprocess.Popen(
        [sys.executable, "-m", "qsim", "advise", "--redis", url, "--prefix", run.prefix, "--queue", "orders",
         "--slo", SLO, "--watch", "1", "--replications", "5", "--metrics-port", str(port)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        text = wait_until(lambda: _scrape(port, 'qsim_recommended_workers{queue="orders"}'), timeout=60, interval=0.3)
        time.sleep(4)  # a few more rounds, with nothing to report
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        out, err = proc.communicate(timeout=30)
    # Then it printed the first advice (and its shutdown line) once, and Ctrl-C ended it cleanly
    lines = out.splitlines()
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert len(lines) == 2 and "orders: recommended" in lines[0] and lines[1].startswith("  shutdown:"), out
    assert lines[0][:4].isdigit() and lines[0][10] == "T"  # 2024-05-01T12:00:03Z
    recommended = lines[0].split("recommended ")[1].split(" x ")[0]
    assert f'qsim_recommended_workers{{queue="orders"}} {float(recommended)}' in text


def test_library_watch_and_unavailable_rounds(measured: tuple[str, EngineResult]) -> None:
    url, run = measured
    got: list[Advice | Unavailable] = []
    for item in watch(url, ["orders"], SLO, every=0.5, prefix=run.prefix, window="15m", **WORKER_BUDGET):
        got.append(item)
        if len(got) == 2:
            break
    assert all(isinstance(g, Advice) for g in got)
    assert got[0].recommended_workers == got[1].recommended_workers  # same data, same seeds: same advice
    first = next(watch(url, ["orders"], SLO, every=1, prefix=run.prefix, window="1s"))
    assert isinstance(first, Unavailable) and "no jobs in queue 'orders' in the last 1s" in first.reason


def test_advisor_exports_the_advice_as_gauges(measured: tuple[str, EngineResult]) -> None:
    url, run = measured
    registry = CollectorRegistry()
    advisor = Advisor(url, "orders", SLO, every=60, prefix=run.prefix, concurrency=2)
    registry.register(advisor.collector)
    assert b"qsim_recommended_workers{" not in generate_latest(registry)  # nothing before the first advice
    advisor.start()
    try:
        wait_until(lambda: advisor.latest is not None, timeout=60, interval=0.2)
        text = generate_latest(registry).decode()
    finally:
        advisor.close()
    assert isinstance(advisor.latest, Advice)
    expected = advise(url, "orders", SLO, prefix=run.prefix, concurrency=2, **WORKER_BUDGET)
    assert f'qsim_recommended_workers{{queue="orders"}} {float(expected.recommended_workers)}' in text
    p95 = expected.predicted_wait("p95")
    assert p95 is not None and f'qsim_predicted_wait_seconds{{quantile="0.95",queue="orders"}} {p95}' in text
    assert 'qsim_advice_slo_reachable{queue="orders"} 1.0' in text and "qsim_advice_cpu_seconds" in text
    names = {s.name for fam in registry.collect() for s in fam.samples}
    assert names == set(ADVICE_METRICS)  # every gauge the docs, the dashboard and deploy/ name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int, needle: str) -> str | None:
    """The metrics page on ``port`` once it holds ``needle`` (None before)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    return text if needle in text else None


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry.name))
    return kids


def test_worker_exports_recommended_workers_next_to_its_metrics(measured: tuple[str, EngineResult]) -> None:
    url, run = measured
    port = _free_port()
    # Given a worker on the measured queue with --advise-slo
    proc = subprocess.Popen(
        [sys.executable, "-m", "qsim", "worker", "stepped_load:sleep_handler", "--queue", "orders", "--redis", url,
         "--prefix", run.prefix, "--concurrency", "2", "--metrics-port", str(port), "--advise-slo", SLO,
         "--advise-every", "5"], cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # Then the advice appears beside the worker's own metrics
        text = wait_until(lambda: _scrape(port, "qsim_recommended_workers{"), timeout=90, interval=0.5)
        helpers = _children(proc.pid)
        assert helpers, "the advice runs in a helper process"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    lines = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
             if line and not line.startswith("#")}
    assert 'qsim_worker_concurrency{worker' in text and 'qsim_queue_jobs{queue="orders"' in text
    recommended = lines['qsim_recommended_workers{queue="orders"}']
    assert recommended >= 1 and recommended == int(recommended)
    assert 0 <= lines['qsim_predicted_wait_seconds{quantile="0.95",queue="orders"}'] <= 0.5
    assert 0 < lines['qsim_advice_cpu_seconds{queue="orders"}'] < 30
    # and the worker stops cleanly, its helper with it
    assert proc.returncode == 0, err
    wait_until(lambda: not any(Path(f"/proc/{h}").exists() for h in helpers), timeout=10)
