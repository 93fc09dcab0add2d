"""Shutdown of an idle worker that was just woken: a job whose fetch is in flight when the stop comes
is handed back at once, never left active without an owner."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Sequence
from typing import Any

import pytest

import qsim.engine.pipeline as pipeline_mod  # the fetch/ack pipeline sends the batches
from qsim.engine import AsyncQueue, Job, Worker
from qsim.engine import protocol as P
from qsim.engine.scripts import Call

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("stop", ["close", "sigterm"])
def test_a_stop_while_a_fetch_is_in_flight_hands_the_fetched_job_back(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        ran: list[str] = []

        async def handler(job: Job) -> None:
            ran.append(job.id)
            await asyncio.sleep(0.3)

        w = Worker("q", handler, redis=redis_url, lock_duration=30.0, stalled_interval=30.0,
                   handle_signals=stop == "sigterm")
        closing: list[asyncio.Future[int]] = []
        armed = [False]
        real = pipeline_mod.run_calls_async

        async def stop_during_fetch(client: Any, scripts: Any, calls: Sequence[Call], **kw: Any) -> list[Any]:
            replies = await real(client, scripts, calls, **kw)
            fetched = [P.parse_fetch(r) for c, r in zip(calls, replies) if c.script == "fetch"]
            if armed[0] and any(fetched):
                # the stop arrives after Redis locked the job, before the worker sees the reply
                armed[0] = False
                if stop == "close":
                    closing.append(asyncio.ensure_future(w.close()))
                else:
                    os.kill(os.getpid(), signal.SIGTERM)
                await asyncio.sleep(0.05)
            return replies

        monkeypatch.setattr(pipeline_mod, "run_calls_async", stop_during_fetch)
        # Given an idle worker, blocked on Redis
        task = asyncio.ensure_future(w.run())
        await asyncio.sleep(0.3)
        assert w.active == 0 and not task.done()
        # When a job wakes it and the stop comes while that job's fetch is in flight
        armed[0] = True
        await q.add("t", {}, job_id="j")
        code = await asyncio.wait_for(task, 10)
        if closing:
            assert await closing[0] == code
        # Then run() returned with the job handed back unstarted: waiting, no owner, no attempt counted
        assert code == 0 and not armed[0]
        info = await q.get_job("j")
        assert info.state == "waiting" and info.attempts_made == 0 and ran == []
        assert info.attempts == [] and info.started_at is None  # its fetch left no trace
        assert (await q.counts())["active"] == 0
        # and a later worker runs it at once
        w2 = Worker("q", handler, redis=redis_url, handle_signals=False)
        t2 = asyncio.ensure_future(w2.run())
        async with asyncio.timeout(10):
            while (await q.get_job("j")).state != "completed":
                await asyncio.sleep(0.02)
        await w2.close()
        await t2
        assert ran == ["j"]
        await q.close()

    asyncio.run(main())


def test_a_close_while_run_is_still_connecting_stops_the_worker_once_it_has_started(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q-early", redis=redis_url)
        await q.add("t", {}, job_id="waiting")
        ran: list[str] = []

        async def handler(job: Job) -> None:
            ran.append(job.id)

        w = Worker("q-early", handler, redis=redis_url, handle_signals=False)
        # Given run() has begun but has not yet reached Redis
        task = asyncio.ensure_future(w.run())
        await asyncio.sleep(0)
        # When close() comes at once
        async with asyncio.timeout(5):
            code = await w.close()
            await task
        # Then run() ends by itself with the normal exit code, holding no job
        assert code == 0 and task.result() == 0
        assert w.active == 0
        await q.close()

    asyncio.run(main())
