"""BullMQ as a target, against real BullMQ (Node.js) workers: the Locust target, calibrate, compare --check.

The worker is tests/node/worker.js: it sleeps each attempt's planned service time (the payload's
``"s"``) and fails as planned (``"x"``), so it runs exactly the jobs the model simulates. BullMQ is
installed with npm into a cache folder on first use (tests/bullmq_node.py). The default run uses
BullMQ 6.x; the long run (``--long``) repeats the whole round trip on 4.x and 5.x.

Locust monkey-patches its process for gevent, so it runs in a subprocess here.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from bullmq_node import VERSIONS, BullMQ, node_missing  # type: ignore[import-not-found]

from qsim.cli import main
from qsim.spec.scenario import Scenario
from qsim.spec.toml_writer import write_toml
from waiting import measured_until_passed, timing_allowance

pytestmark = [pytest.mark.redis, pytest.mark.skipif(node_missing() is not None, reason=node_missing() or "")]

ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 4
STEADY = textwrap.dedent("""
    name = "steady-bullmq"
    seed = 5
    duration = 6.0
    [[queues]]
    name = "orders"
    [[jobs]]
    name = "cut"
    queue = "orders"
    arrival = { kind = "poisson", rate = 20.0 }
    service = { kind = "gamma", mean = 0.05, cv = 0.3 }
    [[pools]]
    name = "workers"
    queues = ["orders"]
    workers = 1
    concurrency = 4
    """)


def locust(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_URL", "QSIM_", "LOCUST_"))}
    return subprocess.run([sys.executable, "-m", "locust", "-f", "loadtests", "--headless", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def explain(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr[-4000:]}\n--- stdout ---\n{proc.stdout[-2000:]}"


def stats(prefix: Path) -> dict[tuple[str, str], dict[str, str]]:
    with open(f"{prefix}_stats.csv", newline="") as f:
        return {(row["Type"], row["Name"]): row for row in csv.DictReader(f)}


def round_trip(major: str, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Locust adds the steady scenario to BullMQ, a Node worker runs it, calibrate reads it back, and
    compare --target bullmq --check drives the calibrated scenario into the same worker."""
    bq = BullMQ(major)
    scenario_file = tmp_path / "steady.toml"
    scenario_file.write_text(STEADY)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with bq.worker(redis_url, "orders", concurrency=CONCURRENCY, seed=3):
        # Given a BullMQ worker of concurrency 4 on queue "orders"
        # When Locust's BullMQ target adds the steady scenario (20 jobs/s for 6 s), judged by thresholds
        proc = locust("--scenario", str(scenario_file), "--redis-url", redis_url, "--target", "bullmq",
                      "--run-id", f"lt-v{major}", "--drain", "20", "--slo", "p95_wait<=1", "--slo", "lost==0",
                      "--slo", "p95_wait<=1 in every window", "--csv", str(tmp_path / "lt"))
        # Then every threshold passed (exit 0), the per-window one judged on the run's windows, and every job
        # added was reported ended, none failed
        assert proc.returncode == 0, explain(proc)
        assert "thresholds passed: 3 of 3" in proc.stderr, explain(proc)
        assert re.search(r"p95_wait<=1 in every window +[0-9.]+ +pass", proc.stderr), explain(proc)
        rows = stats(tmp_path / "lt")
        added = int(rows[("enqueue", "cut")]["Request Count"])
        assert added > 60 and int(rows[("enqueue", "cut")]["Failure Count"]) == 0
        assert int(rows[("job", "cut")]["Request Count"]) == int(rows[("wait", "cut")]["Request Count"]) == added
        assert int(rows[("job", "cut")]["Failure Count"]) == 0
        # and what the bullmq package wrote is what the Node worker read: BullMQ's job hash, the planned
        # service time slept (the worker returns it), BullMQ's completed set
        first = client.hgetall(f"bull:orders:lt-v{major}-cut-0")
        assert first["name"] == "cut" and json.loads(first["opts"])["jobId"] == f"lt-v{major}-cut-0"
        assert json.loads(first["returnvalue"])["s"] == json.loads(first["data"])["s"][0]
        assert client.zcard("bull:orders:completed") == added

        # When calibrated from the same Redis (the pool's concurrency is the worker's setting)
        calibrated = tmp_path / "calibrated.toml"
        assert main(["calibrate", "--from", "bullmq", "--redis", redis_url, "--queue", "orders",
                     "--out", str(calibrated), "--json"]) == 0
        capsys.readouterr()
        s = Scenario.from_toml(calibrated)
        write_toml(replace(s, pools=tuple(replace(p, concurrency=CONCURRENCY) for p in s.pools)), calibrated)
        # and the calibrated scenario's arrivals are driven into the same worker by compare --target bullmq
        # (the default tolerances; a busy machine slows the Node worker's pickups, so the 20 ms allowed on
        # waits and latencies is stretched by the machine's load, and at least twice the p95 wait this
        # worker showed at this load in the Locust run above, its pickup latency on this machine now)
        pickup_p95 = float(rows[("wait", "cut")]["95%"]) / 1000
        allowance = max(timing_allowance(0.02), 2 * pickup_p95)
        tolerances = tmp_path / "tolerances.toml"
        tolerances.write_text("".join(f'["{q}"]\nrel = 0.1\nabs = {allowance:.4f}\n'
                                      for q in ("wait.p50", "wait.p95", "latency.p50", "latency.p95")))
        # (a run that fails the check is measured again, at most twice: waiting.measured_until_passed)

        def measure() -> tuple[int, dict[str, Any]]:
            code = main(["compare", str(calibrated), "--target", "bullmq", "--redis", redis_url, "--queue", "orders",
                         "--check", "--tolerance", str(tolerances), "--json"])
            return code, json.loads(capsys.readouterr().out)

        runs = measured_until_passed(measure, lambda run: run[0] == 0,
                                     describe=lambda run: str(run[1]["check"]["failed"]))
    client.close()
    code, doc = runs[-1]
    # Then the measurement agrees with the model within compare --check's tolerances, and no job was lost
    assert code == 0, json.dumps(doc["check"], indent=1)
    assert doc["engine"]["source"] == "bullmq" and all(run["engine"]["jobs"]["lost"] == 0 for _, run in runs)
    assert doc["engine"]["jobs"]["completed"] == doc["bullmq"]["added"] > 60
    return doc


def agreement_line(major: str, doc: dict[str, Any]) -> str:
    q = {r["quantity"]: r for r in doc["check"]["quantities"]}
    cells = " ".join(f"{k} {q[k]['model']:.4g}/{q[k]['engine']:.4g}" for k in
                     ("wait.p50", "wait.p95", "latency.p50", "latency.p95", "throughput"))
    return f"bullmq {VERSIONS[major]}: model/measured {cells}, lost {q['jobs.lost']['engine']:.0f}"


@pytest.mark.timeout(300)  # (a check that fails is measured again: up to three compare runs)
@pytest.mark.parametrize("major", ["6", pytest.param("5", marks=pytest.mark.long),
                                   pytest.param("4", marks=pytest.mark.long)])
def test_locust_target_calibrate_and_compare_agree_on_real_bullmq(major: str, redis_url: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    doc = round_trip(major, redis_url, tmp_path, capsys)
    with capsys.disabled():
        print("\n" + agreement_line(major, doc))


def test_a_missed_threshold_stops_a_bullmq_load_test_early(redis_url: str, tmp_path: Path) -> None:
    bq = BullMQ("6")
    scenario_file = tmp_path / "steady.toml"
    scenario_file.write_text(STEADY.replace("duration = 6.0", "duration = 30.0"))
    with bq.worker(redis_url, "orders", concurrency=CONCURRENCY, seed=3):
        # Given a 30 s scenario and a threshold its 50 ms jobs miss with their first completion
        t = time.monotonic()
        proc = locust("--scenario", str(scenario_file), "--redis-url", redis_url, "--target", "bullmq",
                      "--run-id", "lt-abort", "--drain", "5", "--slo", "max_latency<=0.01", "--slo", "lost==0",
                      "--abort-on-fail")
        took = time.monotonic() - t
    # Then the test stopped long before its 30 s, said why, and failed the run (exit 1)
    assert proc.returncode == 1, explain(proc)
    assert took < 25, explain(proc)
    assert "max_latency<=0.01 can no longer be met: stopping the test" in proc.stderr, explain(proc)
    assert re.search(r"max_latency<=0.01 +[0-9.]+ +FAIL +\(could no longer be met", proc.stderr), explain(proc)
    assert re.search(r"lost==0 +0 +pass", proc.stderr), explain(proc)


@pytest.mark.parametrize("major", ["4", "5", "6"])
def test_what_the_bullmq_package_adds_node_workers_read(major: str, redis_url: str) -> None:
    """Standard, prioritized, retried, dead and flow jobs added through qsim's BullMQ producer (the bullmq
    package: BullMQ 6.x's scripts) are all processed by Node workers of each major version."""
    import asyncio

    from qsim.bullmq.options import child_options, job_options
    from qsim.bullmq.producer import BullMQProducer

    s = Scenario.from_dict({
        "name": "compat", "duration": 1.0, "queues": [{"name": "c"}], "pools": [{"name": "p", "queues": ["c"]}],
        "jobs": [{"name": "std", "queue": "c", "service": {"kind": "constant", "mean": 0.01},
                  "arrival": {"kind": "poisson", "rate": 1.0}},
                 {"name": "retry", "queue": "c", "service": {"kind": "constant", "mean": 0.01}, "attempts": 2,
                  "backoff": {"kind": "fixed", "delay": 0.02}},
                 {"name": "parent", "queue": "c", "service": {"kind": "constant", "mean": 0.01},
                  "flow": {"children": ["std"]}}]})

    async def produce() -> None:
        p = BullMQProducer(redis_url)
        try:
            for i in range(5):
                await p.add("c", "std", {"s": [0.01], "x": [0]}, job_options(s.job("std"), f"s-{i}"))
                await p.add("c", "std", {"s": [0.01], "x": [0]}, job_options(s.job("std"), f"p-{i}", priority=3))
                await p.add("c", "retry", {"s": [0.01, 0.01], "x": [1, 0]}, job_options(s.job("retry"), f"r-{i}"))
                await p.add("c", "retry", {"s": [0.01], "x": [1]}, job_options(s.job("retry"), f"d-{i}"))
                await p.add_flow("c", "parent", {"s": [0.01], "x": [0]}, job_options(s.job("parent"), f"f-{i}"),
                                 [("c", "std", {"s": [0.01], "x": [0]},
                                   child_options(s.job("std"), f"f-{i}.0", 0, "fail"))])
        finally:
            await p.close()

    bq = BullMQ(major)
    with bq.worker(redis_url, "c", concurrency=4):
        asyncio.run(produce())
        # (an idle 4.x worker picks up prioritized jobs only after its drainDelay of 5 s: see docs/how-to/bullmq.md)
        assert bq.wait_drained(redis_url, "c", expected=30, timeout=30)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    done, failed = client.zrange("bull:c:completed", 0, -1), client.zrange("bull:c:failed", 0, -1)
    assert sorted(failed) == [f"d-{i}" for i in range(5)]
    assert len(done) == 25 and {f"f-{i}" for i in range(5)} <= set(done)  # parents ran after their children
    assert client.hget("bull:c:r-0", "atm" if major != "4" else "attemptsMade") == "2"  # retried once by backoff
    assert client.hget("bull:c:p-0", "priority") == "3"
    assert client.hget("bull:c:d-0", "failedReason") == "planned failure of attempt 2"
    client.close()
