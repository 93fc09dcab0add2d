"""The worker's seams through a real worker: attempt hooks, the job's context, the handler left alone."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engine_helpers import run_worker_until
from qsim.engine import EXIT_DRAINED, AsyncQueue, Job, JobContext, Worker
from qsim.engine.context import RunContext
from qsim.engine.hooks import ColdStart
from qsim.engine.metrics import WorkerMetrics
from qsim.errors import UnrecoverableError

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.5, "handle_signals": False}


class Recorder:
    """An attempt hook that notes what it saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def before_attempt(self, job: Job) -> None:
        self.calls.append(("before", job.id, job.wait is not None))

    def after_attempt(self, job: Job, seconds: float, error: BaseException | None) -> None:
        assert seconds >= 0
        self.calls.append(("after", job.id, None if error is None else type(error).__name__))


class Broken:
    def before_attempt(self, job: Job) -> None:
        raise RuntimeError("hook bug")

    def after_attempt(self, job: Job, seconds: float, error: BaseException | None) -> None:
        raise RuntimeError("hook bug")


def done(q: AsyncQueue, n: int, state: str) -> Any:
    async def cond() -> bool:
        return (await q.counts())[state] >= n

    return cond


def test_hooks_run_around_every_attempt_however_it_ends(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("ok", None, job_id="ok")
        await q.add("boom", None, job_id="boom")
        await q.add("slow", None, job_id="slow", timeout=0.05)

        async def handler(job: Job) -> str:
            if job.name == "boom":
                raise UnrecoverableError("no")
            if job.name == "slow":
                await asyncio.sleep(5)
            return "fine"

        # Given a worker with a recording hook and a broken one
        rec = Recorder()
        w = Worker("q", handler, redis=redis_url, concurrency=1, **FAST)
        w.add_hook(Broken())
        w.add_hook(rec)
        # When it runs one job that completes, one that fails and one that times out
        assert await run_worker_until(w, done(q, 2, "dead")) == EXIT_DRAINED
        # Then each attempt saw before (a first attempt: wait known) and after (its error), in order
        by_job = {jid: [c for c in rec.calls if c[1] == jid] for jid in ("ok", "boom", "slow")}
        assert by_job["ok"] == [("before", "ok", True), ("after", "ok", None)]
        assert by_job["boom"] == [("before", "boom", True), ("after", "boom", "UnrecoverableError")]
        # (a timed-out attempt: AttemptTimeout, a TimeoutError the worker logs as "timeout")
        assert by_job["slow"] == [("before", "slow", True), ("after", "slow", "AttemptTimeout")]
        # and the broken hook changed no outcome
        assert (await q.get_job("ok")).state == "completed"
        assert "timed out" in ((await q.get_job("slow")).error or "")
        await q.close()

    asyncio.run(main())


def test_a_job_gets_a_context_not_the_worker_and_metrics_leave_the_handler_alone(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("ctx", redis=redis_url)
        await q.add("t", {"n": 1})
        seen: list[Any] = []

        async def handler(job: Job) -> int:
            ctx = job.context
            seen.append(ctx)
            await job.progress({"half": True})
            assert ctx.keys(job.queue) == q.keys
            return int(job.data["n"])

        w = Worker("ctx", handler, redis=redis_url, **FAST)
        metrics = WorkerMetrics(w, queue_stats=False)
        assert w.handler is handler  # metrics time attempts with a hook, not by wrapping the handler
        progress: list[Any] = []
        w.on("progress", lambda job, value: progress.append(value))
        assert await run_worker_until(w, done(q, 1, "completed")) == EXIT_DRAINED
        # Given the handler's job, Then its context is the worker's run context (a JobContext), not the worker
        (ctx,) = seen
        assert isinstance(ctx, RunContext) and not isinstance(ctx, Worker)
        typed: JobContext = ctx  # (mypy checks that RunContext is a JobContext)
        assert typed.limits.max_payload == w.settings.max_payload
        assert progress == [{"half": True}]
        assert metrics.registry.get_sample_value("qsim_job_duration_seconds_count", {"queue": "ctx", "job": "t"}) == 1
        assert w.processed == 1
        await q.close()

    asyncio.run(main())


def test_a_job_without_a_worker_says_so() -> None:
    job = Job("1", "t", None, 1, "q", 1, 0.0, None, "tok")
    with pytest.raises(RuntimeError, match="needs a job run by a Worker"):
        asyncio.run(job.progress(1))
    with pytest.raises(RuntimeError, match="needs a job run by a Worker"):
        asyncio.run(job.children_values())


class Lifecycle:
    """A lifecycle hook that notes when it starts and stops, and what the worker was doing then."""

    def __init__(self, name: str, calls: list[tuple[str, str, int]], fail: bool = False) -> None:
        self.name, self.calls, self.fail = name, calls, fail

    async def on_start(self, worker: Any) -> None:
        self.calls.append(("start", self.name, worker.processed))
        if self.fail:
            raise RuntimeError(f"{self.name} cannot start")

    async def on_stop(self, worker: Any) -> None:
        self.calls.append(("stop", self.name, worker.processed))


def test_lifecycle_hooks_start_before_the_work_and_stop_after_it_in_reverse(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("life", redis=redis_url)
        for i in range(3):
            await q.add("t", i)

        async def handler(job: Job) -> int:
            return int(job.data)

        # Given a worker with two lifecycle hooks and an attempt hook
        calls: list[tuple[str, str, int]] = []
        w = Worker("life", handler, redis=redis_url, **FAST)
        w.add_hook(Lifecycle("a", calls))
        w.add_hook(Lifecycle("b", calls))
        rec = Recorder()
        w.add_hook(rec)
        # When it runs three jobs and is closed
        assert await run_worker_until(w, done(q, 3, "completed")) == EXIT_DRAINED
        # Then the hooks started in order before any job, and stopped in reverse after the last
        assert calls == [("start", "a", 0), ("start", "b", 0), ("stop", "b", 3), ("stop", "a", 3)]
        assert len(rec.calls) == 6  # the attempt hook is not a lifecycle one (and the other way round)
        await q.close()

    asyncio.run(main())


def test_a_lifecycle_hook_that_fails_to_start_ends_the_run_and_the_started_ones_stop(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("life2", redis=redis_url)
        await q.add("t", 1)

        async def handler(job: Job) -> int:
            return 1

        calls: list[tuple[str, str, int]] = []
        w = Worker("life2", handler, redis=redis_url, **FAST)
        for hook in (Lifecycle("a", calls), Lifecycle("b", calls, fail=True), Lifecycle("c", calls)):
            w.add_hook(hook)
        with pytest.raises(RuntimeError, match="b cannot start"):
            await w.run()
        # only the hooks that started are stopped; no job was taken, and the worker can run again
        assert calls == [("start", "a", 0), ("start", "b", 0), ("stop", "a", 0)]
        assert (await q.counts())["waiting"] == 1
        assert await w.close() == EXIT_DRAINED
        await q.close()

    asyncio.run(main())


def test_a_cold_start_says_it_is_ready_only_once_it_takes_work(redis_url: str) -> None:
    # (the harness adds jobs the moment its processes say so: said before the worker connected and loaded its
    # scripts, the first jobs of every run waited about 0.1 s more on a loaded machine than the model said)
    async def main() -> None:
        import redis.asyncio

        from qsim.engine.scripts import ScriptSet

        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
        fetch_sha = ScriptSet(client).sha("fetch")
        # Given a Redis that holds none of the engine's scripts, and a worker told to say when it is ready
        await client.script_flush()
        w = Worker("ready-when-taking", lambda job: asyncio.sleep(0), redis=redis_url, **FAST)
        w.add_hook(ColdStart(0.0, "ready-when-taking:ready"))
        run = asyncio.ensure_future(w.run())
        # When it says so
        said = await client.blpop(["ready-when-taking:ready"], timeout=30)
        # Then Redis had already answered its fetch: the fetch script is loaded, and a job added now is taken
        assert said is not None and said[1] == w.id
        assert await client.script_exists(fetch_sha) == [True]
        await w.wait_taking_work()  # (returns at once while it runs)
        assert await w.close() == EXIT_DRAINED and await run == EXIT_DRAINED
        # and a worker that is not running does not take work
        with pytest.raises(RuntimeError, match="not running"):
            await w.wait_taking_work()
        await client.aclose()

    asyncio.run(main())


def test_a_cold_start_takes_no_work_before_its_time_then_says_it_is_ready(redis_url: str) -> None:
    async def main() -> None:
        import redis.asyncio

        q = AsyncQueue("cold", redis=redis_url)
        await q.add("t", 1)
        started: list[float] = []

        async def handler(job: Job) -> int:
            started.append(time.time())
            return 1

        at = time.time() + 0.5
        w = Worker("cold", handler, redis=redis_url, **FAST)
        w.add_hook(ColdStart(at, "cold:ready"))
        assert await run_worker_until(w, done(q, 1, "completed")) == EXIT_DRAINED
        assert started and started[0] >= at
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
        assert await client.lrange("cold:ready", 0, -1) == [w.id]
        await client.aclose()
        await q.close()

    asyncio.run(main())
