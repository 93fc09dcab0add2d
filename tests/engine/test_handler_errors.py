"""Handlers that fail in awkward ways: every attempt is recorded as failed, none loops or is lost to a stall."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
import redis

from engine_helpers import run_worker_until
from qsim.engine import AsyncQueue, Backoff, Job, Worker
from qsim.engine import protocol as P
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import ScriptSet, run_calls

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.3, "handle_signals": False}


def dead(q: AsyncQueue, n: int) -> Any:
    async def cond() -> bool:
        return (await q.counts())["dead"] >= n

    return cond


def test_a_handler_raising_cancelled_error_fails_its_attempt_and_is_not_handed_back_forever(redis_url: str) -> None:
    # Given a handler that raises CancelledError itself (the worker did not cancel it)
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {}, job_id="c", attempts=2)
        runs = [0]

        async def handler(job: Job) -> None:
            runs[0] += 1
            raise asyncio.CancelledError("the handler's own cancellation")

        w = Worker("q", handler, redis=redis_url, **FAST)
        # When the worker runs it
        assert await run_worker_until(w, dead(q, 1), timeout=10) == 0
        await asyncio.sleep(0.3)
        # Then each run was a failed attempt: two runs, then the DLQ with the error, never a hand-back
        assert runs[0] == 2
        info = await q.get_job("c")
        assert info.state == "dead" and info.attempts_made == 2 and info.stalled == 0
        assert info.error is not None and info.error.startswith("CancelledError")
        assert [a.outcome for a in info.attempts] == ["failed", "failed"]
        await q.close()

    asyncio.run(main())


def test_a_handler_cancelled_by_the_worker_at_shutdown_is_still_handed_back(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {}, job_id="slow", attempts=1)
        started = asyncio.Event()

        async def handler(job: Job) -> None:
            started.set()
            await asyncio.sleep(30)

        w = Worker("q", handler, redis=redis_url, **FAST)
        task = asyncio.ensure_future(w.run())
        await asyncio.wait_for(started.wait(), 10)
        assert await w.close(0.1) == 3
        await task
        info = await q.get_job("slow")
        assert info.state == "waiting" and info.attempts_made == 0
        assert [a.outcome for a in info.attempts] == ["released"]
        await q.close()

    asyncio.run(main())


def test_the_attempt_log_is_capped(redis_client: redis.Redis) -> None:
    # Given a job fetched and handed back many times (each hand-back appends to its log)
    k = QueueKeys("q")
    scripts = ScriptSet(redis_client)
    run_calls(redis_client, scripts, [P.add_call(k, [P.JobSpec("j", "t", "{}", 0, 0, 1, "", 0.0)])])
    for i in range(600):
        (f,) = P.parse_fetch(run_calls(redis_client, scripts, [P.fetch_call(k, 1, 30000, "w" * 20, f"t{i}")])[0])
        assert run_calls(redis_client, scripts, [P.release_call(k, 100, [(f.id, f.token)])]) == [1]
    # Then the log keeps its latest entries only, whole ones
    log = redis_client.hget(k.job("j"), "log") or ""
    assert len(log) <= 16 * 1024
    entries = log.rstrip(";").split(";")
    assert 100 < len(entries) < 600 and all(e.count(",") == 3 and e.endswith("released," + "w" * 20) for e in entries)


class BadStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


class NotText(Exception):
    def __str__(self) -> Any:
        return 42


def _bad_notes() -> Exception:
    e = RuntimeError("with bad notes")
    e.__notes__ = 42  # type: ignore[attr-defined] - traceback formatting raises on this
    return e


@pytest.mark.parametrize("make, error", [
    (lambda: BadStr("x"), "BadStr: <str() failed"),
    (lambda: NotText(), "NotText: <str() failed"),
    (_bad_notes, "RuntimeError: with bad notes"),
], ids=["str-raises", "str-not-text", "traceback-raises"])
def test_an_exception_that_cannot_be_described_still_fails_the_attempt(redis_url: str, make: Any, error: str) -> None:
    # Given a handler whose exception breaks str() or traceback formatting
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {}, job_id="x", attempts=2)

        async def handler(job: Job) -> None:
            raise make()

        w = Worker("q", handler, redis=redis_url, **FAST)
        await run_worker_until(w, dead(q, 1), timeout=10)
        # Then both attempts were recorded as failed with a best-effort text, not lost to the stalled check
        info = await q.get_job("x")
        assert info.attempts_made == 2 and info.stalled == 0, info
        assert info.error is not None and info.error.startswith(error), info.error
        assert [a.outcome for a in info.attempts] == ["failed", "failed"]
        await q.close()

    asyncio.run(main())


@pytest.mark.parametrize("make", [
    lambda: Backoff.fixed(math.inf),
    lambda: Backoff.fixed(math.nan),
    lambda: Backoff.exponential(1.0, max=math.inf),
    lambda: Backoff.exponential(math.inf),
    lambda: Backoff.fixed(1e300),
    lambda: Backoff("fixed", "1", None, 0.0),  # type: ignore[arg-type]
    lambda: Backoff("fixed", 1.0, "60", 0.0),  # type: ignore[arg-type]
    lambda: Backoff.fixed(1.0, jitter=math.nan),
])
def test_backoff_values_must_be_finite_and_capped(make: Any) -> None:
    with pytest.raises(ValueError, match="backoff"):
        make()


def test_backoff_delays_never_exceed_the_cap() -> None:
    from qsim.engine.backoff import MAX_BACKOFF

    b = Backoff.exponential(10.0)
    assert b.delay_for(1) == 10.0 and b.delay_for(10_000) == MAX_BACKOFF
    assert Backoff.fixed(MAX_BACKOFF).delay_for(3) == MAX_BACKOFF
    assert int(Backoff.exponential(1.0, max=MAX_BACKOFF).delay_for(10**9) * 1000) == int(MAX_BACKOFF * 1000)
