"""The flat API's engine verbs (qsim.run, qsim.compare, qsim.probe) on real Redis: sync and awaitable,
inside a running event loop, on the session's server or on a throwaway one of their own."""

from __future__ import annotations

import asyncio

import pytest

import qsim

TINY = {"name": "tiny", "seed": 4, "duration": 1.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 8.0},
                  "service": {"kind": "constant", "mean": 0.05}}],
        "pools": [{"name": "p", "queues": ["q"], "concurrency": 2}]}


@pytest.mark.redis
def test_run_and_compare_sync_and_awaitable(redis_url: str) -> None:
    s = qsim.Scenario.from_dict(TINY)
    # When the engine runs the scenario from sync code, and awaited inside a running loop (as in Jupyter)
    e = qsim.run(s, redis_url)

    async def cell() -> tuple[qsim.EngineResult, qsim.EngineResult, qsim.Comparison]:
        inside = qsim.run(s, redis_url)  # the sync form inside the loop: it runs in a worker thread
        return inside, await qsim.run_async(s), await qsim.compare_async(s, redis_url)  # run_async: its own server

    inside, own_server, doc = asyncio.run(cell())
    # Then every run settled the same 8 jobs, none lost
    for r in (e, inside, own_server):
        assert r.summary["jobs"]["completed"] == r.summary["jobs"]["arrived"] == 8 and r.summary["jobs"]["lost"] == 0
    assert doc["engine"]["jobs"]["completed"] == 8 and doc["ratios"]["jobs.completed"] == 1.0
    # and a model run compares with an engine run without running anything
    assert qsim.compare(qsim.simulate(s), e)["ratios"]["jobs.completed"] == 1.0
    with pytest.raises(ValueError, match="keep=True needs a redis_url"):
        qsim.run(s, keep=True)


@pytest.mark.redis
def test_probe_on_a_throwaway_server() -> None:
    overhead = asyncio.run(qsim.probe_async(duration=1.0))
    assert overhead.n > 0 and 0 <= overhead.fetch_overhead < 0.1
