"""``qsim run`` drains what it started (a drain timeout from the model's settle time, a per-queue
report of what is left), fans out through the engine's own API, and runs inside an event loop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from qsim.engine import Queue, Worker, WorkerSettings
from qsim.harness.drain import DRAIN_FLOOR, drain_timeout, predicted_drain, settle_time
from qsim.harness.plan import job_options
from qsim.harness.pool_worker import make_synthetic
from qsim.harness.processes import PoolProcessSpec
from qsim.harness.run import run_scenario, run_scenario_async
from qsim.model import simulate
from qsim.spec.scenario import Scenario


def wrr_backlog(duration: float, rates: tuple[float, float], service: float, concurrency: int,
                seed: int = 3) -> Scenario:
    """Two queues on one weighted round-robin pool that cannot keep up: a backlog at the end."""
    return Scenario.from_dict({
        "name": "wrr-backlog", "seed": seed, "duration": duration,
        "queues": [{"name": "critical"}, {"name": "bulk"}],
        "jobs": [{"name": "c", "queue": "critical", "arrival": {"kind": "poisson", "rate": rates[0]},
                  "service": {"kind": "constant", "mean": service}},
                 {"name": "b", "queue": "bulk", "arrival": {"kind": "poisson", "rate": rates[1]},
                  "service": {"kind": "constant", "mean": service}}],
        "pools": [{"name": "p", "queues": ["critical", "bulk"], "policy": "wrr",
                   "weights": {"critical": 3, "bulk": 1}, "workers": 1, "concurrency": concurrency}],
        "engine": {"lock_duration": 2.0, "stalled_interval": 1.0},
    })


def test_the_default_drain_covers_the_models_backlog_where_the_old_rule_cut_it() -> None:
    # Given the WRR backlog that once ended with 546 of its jobs unfinished under max(30, duration):
    # 60 jobs/s for 60 s on 5 slots of 0.2 s (25 jobs/s)
    s = wrr_backlog(60.0, (20.0, 40.0), 0.2, 5)
    jobs = simulate(s).jobs
    last_arrival = jobs["enqueued"].max()
    cut_by_old_rule = int((jobs["finished"] > last_arrival + max(30.0, s.duration)).sum())
    assert cut_by_old_rule > 500
    # When the drain timeout is taken from the model's settle time
    drain = predicted_drain(s, jobs=jobs)
    # Then it covers the whole backlog with the documented margin
    assert drain.settle == pytest.approx(jobs["finished"].max() - last_arrival)
    assert drain.settle > 60.0 and drain.timeout == pytest.approx(1.5 * drain.settle + 10.0)
    assert int((jobs["finished"] > last_arrival + drain.timeout).sum()) == 0
    # and a run that settles at once still gets the floor
    assert drain_timeout(0.0) == DRAIN_FLOOR
    assert settle_time(jobs.iloc[0:0]) == 0.0
    with pytest.raises(ValueError, match="settle time"):
        drain_timeout(float("nan"))


@pytest.mark.redis
def test_a_backlog_drains_with_the_default_and_a_short_drain_is_reported_per_queue(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    # Given a small WRR backlog (about 60 jobs for 2 slots of 0.1 s: ~2 s of backlog after the arrivals)
    s = wrr_backlog(1.5, (12.0, 28.0), 0.1, 2)
    assert predicted_drain(s).settle > 1.0
    # When it runs with the default drain timeout
    result = run_scenario(s, redis_url)
    # Then every job settled: nothing unfinished, nothing lost, nothing reported
    jobs = result.summary["jobs"]
    assert jobs["completed"] == jobs["arrived"] > 40 and jobs["unfinished"] == 0 and jobs["lost"] == 0
    assert result.unsettled == {}
    assert result.drain_timeout == pytest.approx(predicted_drain(s).timeout)
    # When the same run gets only 0.2 s to drain
    with caplog.at_level(logging.WARNING, logger="qsim.harness.run"):
        cut = run_scenario(s, redis_url, drain_timeout=0.2)
    # Then the jobs left are unfinished (not lost), reported per queue in a warning naming --drain-timeout
    left = cut.summary["jobs"]
    assert left["unfinished"] > 0 and left["lost"] == 0
    assert "bulk" in cut.unsettled and sum(cut.unsettled["bulk"].values()) > 0
    warning = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert "--drain-timeout" in warning and "bulk: " in warning and "unsettled" in warning


@pytest.mark.redis
def test_fan_out_goes_through_add_children_and_the_run_works_inside_an_event_loop(redis_url: str) -> None:
    # Given a type that fans out 2 children per job
    s = Scenario.from_dict({
        "name": "fan", "seed": 2, "duration": 1.0,
        "queues": [{"name": "q"}, {"name": "parts"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 4.0},
                  "service": {"kind": "constant", "mean": 0.02}, "fan_out": {"job": "part", "count": 2}},
                 {"name": "part", "queue": "parts", "service": {"kind": "constant", "mean": 0.02}}],
        "pools": [{"name": "p", "queues": ["q", "parts"], "concurrency": 4}],
    })

    # When it runs from a coroutine: awaited, and through the sync front door inside the running loop
    async def both() -> tuple[Any, Any]:
        awaited = await run_scenario_async(s, redis_url, keep=True)
        return awaited, run_scenario(s, redis_url)

    awaited, nested = asyncio.run(both())
    # Then both runs measured the same jobs as the model, children included
    model = simulate(s).summary["jobs"]
    for result in (awaited, nested):
        assert result.summary["jobs"]["completed"] == model["completed"] == 12 and result.summary["jobs"]["lost"] == 0
    # and each child is the engine's child of its parent (job.add_children), as a user's handler makes it
    with Queue("parts", redis=redis_url, prefix=awaited.prefix) as parts:
        kids = [parts.get_job(f"part-c{i}") for i in range(8)]
    assert [k.parent for k in kids] == [f"q:a-{i // 2}" for i in range(8)]
    assert all(k.state == "completed" for k in kids)


@pytest.mark.redis
def test_a_waiting_fan_out_parks_the_parent_until_its_children_are_done(redis_url: str) -> None:
    # Given a planned parent whose fan-out asks to wait for its children (move_to_waiting_children)
    kid = Scenario.from_dict({"name": "k", "duration": 1.0, "queues": [{"name": "q"}],
                              "jobs": [{"name": "part", "queue": "q", "arrival": {"kind": "constant", "rate": 1.0},
                                        "service": {"kind": "constant", "mean": 0.1}}],
                              "pools": [{"name": "p", "queues": ["q"]}]}).job("part")
    fan = {"queue": "q", "type": "part", "options": job_options(kid), "wait": True,
           "jobs": [[f"kid-{i}", {"s": [0.3], "x": [0]}] for i in range(2)]}
    with Queue("q", redis=redis_url) as q:
        q.add("split", {"s": [0.05], "x": [0], "fan": fan}, job_id="parent")

    # When a worker with the synthetic handler (2 slots) runs it to the end
    async def main() -> int:
        worker = Worker("q", make_synthetic(), redis=redis_url, concurrency=2)
        task = asyncio.ensure_future(worker.run())
        with Queue("q", redis=redis_url) as q:
            for _ in range(500):
                if q.get_job("parent").state == "completed":
                    break
                await asyncio.sleep(0.01)
        await worker.close(5.0)
        return int(await task)

    assert asyncio.run(main()) == 0
    # Then the parent freed its slot for both children (they ran at once) and completed after them,
    # in one attempt, its handler's re-run returning at once
    with Queue("q", redis=redis_url) as q:
        parent, kids = q.get_job("parent"), [q.get_job(f"kid-{i}") for i in range(2)]
    assert parent.state == "completed" and parent.attempts_made == 1 and parent.returnvalue["resumed"] is True
    assert all(k.state == "completed" and k.parent == "q:parent" for k in kids)
    assert parent.finished_at >= max(k.finished_at for k in kids)  # type: ignore[operator]
    assert abs(kids[0].started_at - kids[1].started_at) < 0.2  # type: ignore[operator]


def test_the_worker_command_line_has_one_definition() -> None:
    # Given a pool worker process's settings
    s = PoolProcessSpec(settings=WorkerSettings(redis="redis://127.0.0.1:1/0", prefix="x", queues=("a", "b"),
                                                concurrency=3, worker_id="p-0", policy="wrr", weights={"a": 2, "b": 1},
                                                lock_duration=1.5, stalled_interval=0.5, max_stalled=2,
                                                shutdown_grace=4.0),
                        ready_key="x:ready")
    # When its command line is written and read back
    argv = s.argv()
    assert argv[1:3] == ["-m", "qsim.harness.pool_worker"]
    # Then it is the same settings
    assert PoolProcessSpec.parse(argv[3:]) == s
    with pytest.raises(SystemExit):
        PoolProcessSpec.parse(argv[3:] + ["--weight", "a=x"])
