"""Prometheus metrics of a worker, scraped over HTTP and parsed with prometheus-client's parser."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine_helpers import ROOT, run_worker_until, wait_until
from qsim.engine import AsyncQueue, Job, Queue, Worker
from qsim.engine.metrics import WorkerMetrics
from redis_server import free_port

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.5, "handle_signals": False}


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """``{sample name: {sorted labels: value}}`` from http://127.0.0.1:port/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def one(m: dict[str, Any], name: str, **labels: str) -> float:
    want = tuple(sorted(labels.items()))
    return float(m[name][want])


def test_worker_metrics_count_every_job_and_read_queue_depth(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("orders", redis=redis_url)
        await q.add_bulk([("cut", {"i": i}) for i in range(25)])
        await q.add_bulk([("bent", {"i": i}, {"attempts": 2}) for i in range(5)])

        async def handler(job: Job) -> int:
            if job.name == "bent":
                raise ValueError("bent slip")
            await asyncio.sleep(0.01)
            return 1

        w = Worker("orders", handler, redis=redis_url, concurrency=4, **FAST)
        metrics = WorkerMetrics(w)
        port = metrics.serve(0)

        async def settled() -> bool:
            c = await q.counts()
            return c["completed"] == 25 and c["dead"] == 5

        await run_worker_until(w, settled)
        # jobs left waiting (paused queue) and delayed, for the depth gauges
        await q.pause()
        await q.add_bulk([("cut", {}), ("cut", {}, {"priority": 3})])
        await q.add("cut", {}, delay=60)
        await asyncio.sleep(0.3)
        m = await asyncio.to_thread(scrape, port)
        metrics.close()
        # counters match the jobs run
        assert one(m, "qsim_jobs_completed_total", queue="orders", job="cut") == 25
        assert one(m, "qsim_jobs_failed_total", queue="orders", job="bent") == 10
        assert one(m, "qsim_jobs_retried_total", queue="orders", job="bent") == 5
        assert one(m, "qsim_jobs_dead_total", queue="orders", job="bent") == 5
        assert one(m, "qsim_jobs_completed_total", queue="orders", job="bent") == 0
        assert one(m, "qsim_jobs_dead_total", queue="orders", job="cut") == 0
        # one duration sample per attempt, 10 ms each for the good ones
        assert one(m, "qsim_job_duration_seconds_count", queue="orders", job="cut") == 25
        assert one(m, "qsim_job_duration_seconds_count", queue="orders", job="bent") == 10
        assert 0.25 <= one(m, "qsim_job_duration_seconds_sum", queue="orders", job="cut") < 1.0
        assert one(m, "qsim_job_duration_seconds_bucket", queue="orders", job="cut", le="0.005") == 0
        assert one(m, "qsim_job_duration_seconds_bucket", queue="orders", job="cut", le="+Inf") == 25
        # one wait per job, at its first start (retries do not count again)
        assert one(m, "qsim_job_wait_seconds_count", queue="orders", job="cut") == 25
        assert one(m, "qsim_job_wait_seconds_count", queue="orders", job="bent") == 5
        # queue depth and the oldest waiting job, read from Redis at scrape time
        assert one(m, "qsim_queue_jobs", queue="orders", state="waiting") == 2
        assert one(m, "qsim_queue_jobs", queue="orders", state="delayed") == 1
        assert one(m, "qsim_queue_jobs", queue="orders", state="active") == 0
        assert one(m, "qsim_queue_jobs", queue="orders", state="dead") == 5
        assert 0.3 <= one(m, "qsim_queue_oldest_waiting_age_seconds", queue="orders") < 5
        # the worker's concurrency and (now that it stopped) no active job
        assert one(m, "qsim_worker_concurrency", worker=w.id) == 4
        assert one(m, "qsim_worker_active_jobs", worker=w.id) == 0
        await q.close()

    asyncio.run(main())


def test_active_gauge_and_wait_histogram_while_running(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("slow", redis=redis_url)
        await q.add_bulk([("nap", {}) for _ in range(3)])
        release = asyncio.Event()

        async def handler(job: Job) -> None:
            await release.wait()

        w = Worker("slow", handler, redis=redis_url, concurrency=2, **FAST)
        metrics = WorkerMetrics(w)
        port = metrics.serve(0)
        task = asyncio.ensure_future(w.run())
        async with asyncio.timeout(5):
            while (await q.counts())["active"] < 2:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        waited_before_release = 0.2
        m = await asyncio.to_thread(scrape, port)
        assert one(m, "qsim_worker_active_jobs", worker=w.id) == 2
        assert one(m, "qsim_queue_jobs", queue="slow", state="active") == 2
        assert one(m, "qsim_queue_jobs", queue="slow", state="waiting") == 1
        release.set()
        async with asyncio.timeout(5):
            while (await q.counts())["completed"] < 3:
                await asyncio.sleep(0.01)
        await w.close()
        await task
        m = await asyncio.to_thread(scrape, port)
        metrics.close()
        assert one(m, "qsim_jobs_completed_total", queue="slow", job="nap") == 3
        # one wait per job (first start only): two started at once, the third after a release
        assert one(m, "qsim_job_wait_seconds_count", queue="slow", job="nap") == 3
        assert one(m, "qsim_job_wait_seconds_bucket", queue="slow", job="nap", le="0.1") >= 2
        assert one(m, "qsim_job_wait_seconds_sum", queue="slow", job="nap") >= waited_before_release
        await q.close()

    asyncio.run(main())


def test_two_workers_have_separate_registries(redis_url: str) -> None:
    async def noop(job: Job) -> None:
        return None

    wa, wb = Worker("a", noop, redis=redis_url), Worker("b", noop, redis=redis_url)
    a, b = WorkerMetrics(wa, queue_stats=False), WorkerMetrics(wb, queue_stats=False)
    job = Job("1", "t", None, 1, "a", 1, 0.0, None, "tok")
    job.wait = 0.02
    a.before_attempt(job)  # the worker's attempt hooks (qsim.engine.hooks), as around a handler
    a.after_attempt(job, 0.001, None)
    wa._emitter.emit("completed", job, None)
    assert a.registry.get_sample_value("qsim_jobs_completed_total", {"queue": "a", "job": "t"}) == 1
    assert a.registry.get_sample_value("qsim_job_wait_seconds_bucket", {"queue": "a", "job": "t", "le": "0.01"}) == 0
    assert a.registry.get_sample_value("qsim_job_wait_seconds_bucket", {"queue": "a", "job": "t", "le": "0.025"}) == 1
    assert a.registry.get_sample_value("qsim_job_wait_seconds_sum", {"queue": "a", "job": "t"}) == 0.02
    assert b.registry.get_sample_value("qsim_jobs_completed_total", {"queue": "a", "job": "t"}) is None
    assert b.registry.get_sample_value("qsim_jobs_stalled_total", {"queue": "b"}) == 0


def test_cli_worker_serves_metrics(redis_url: str, tmp_path: Any) -> None:
    (tmp_path / "handlers_m.py").write_text("async def work(job):\n    return job.data['n']\n")
    Queue("cli", redis=redis_url).add_bulk([("t", {"n": i}) for i in range(7)])
    port = free_port()
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    p = subprocess.Popen([sys.executable, "-m", "qsim", "worker", "handlers_m:work", "--queue", "cli", "--redis",
                          redis_url, "--metrics-port", str(port)], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def counted() -> Any:
            try:
                m = scrape(port)
            except OSError:
                return None
            return m if m.get("qsim_jobs_completed_total", {}).get((("job", "t"), ("queue", "cli"))) == 7 else None

        m = wait_until(counted, timeout=20, interval=0.1)
        assert one(m, "qsim_job_duration_seconds_count", queue="cli", job="t") == 7
        assert one(m, "qsim_queue_jobs", queue="cli", state="waiting") == 0
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err.decode()
    assert f"metrics on http://0.0.0.0:{port}/metrics" in err.decode()


def test_grafana_dashboard_charts_only_metrics_the_worker_exports(redis_url: str) -> None:
    import json
    import re

    async def noop(job: Job) -> None:
        return None

    w = Worker("orders", noop, redis=redis_url)
    m = WorkerMetrics(w)
    job = Job("1", "t", None, 1, "orders", 1, 0.0, None, "tok")
    job.wait = 0.1
    m.before_attempt(job)
    m.after_attempt(job, 0.001, None)
    exported = {s.name for fam in m.registry.collect() for s in fam.samples}
    m.close()
    dash = json.loads((ROOT / "benchmarks" / "grafana-dashboard.json").read_text())
    used = {n for p in dash["panels"] for t in p["targets"] for n in re.findall(r"qsim_[a-z_]+", t["expr"])}
    assert {"qsim_job_wait_seconds_bucket", "qsim_job_duration_seconds_bucket", "qsim_queue_jobs",
            "qsim_queue_oldest_waiting_age_seconds", "qsim_worker_active_jobs"} <= used
    from qsim.advise.live import ADVICE_METRICS  # --advise-slo's gauges (tests/engine/test_advise_qsim.py)

    assert used <= exported | set(ADVICE_METRICS), used - exported - set(ADVICE_METRICS)


def test_cli_worker_whose_metrics_port_is_taken_says_so_and_exits_1(redis_url: str, tmp_path: Any) -> None:
    import socket

    (tmp_path / "handlers_p.py").write_text("async def work(job):\n    return 1\n")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
        p = subprocess.run([sys.executable, "-m", "qsim", "worker", "handlers_p:work", "--queue", "taken", "--redis",
                            redis_url, "--metrics-port", str(port)], cwd=tmp_path, env=env, capture_output=True,
                           timeout=60)
    assert p.returncode == 1, p.stderr.decode()
    assert f"cannot serve metrics on port {port}:" in p.stderr.decode()
    assert "metrics on http" not in p.stderr.decode()
