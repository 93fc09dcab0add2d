"""Retrying flows from the DLQ: a retried parent waits for its outstanding children again; a retried
child takes its failure off its parent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis

from qsim.engine import AsyncQueue, FlowProducer, Job, Queue, Worker
from qsim.engine import protocol as P
from qsim.engine.scripts import ScriptSet, run_calls
from test_flow import FAST, run_workers

pytestmark = pytest.mark.redis


async def state(q: AsyncQueue, jid: str, want: str) -> bool:
    return (await q.get_job(jid)).state == want


async def _until(cond: Any, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not await cond():
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def invoice_flow(redis_url: str, inv_name: str, data_name: str,
                       child: Callable[[Job], Awaitable[str]]) -> AsyncIterator[tuple[AsyncQueue, AsyncQueue, list[str]]]:
    """A flow: parent p ("invoice", queue ``inv_name``) of "fail" children a and b (queue ``data_name``), with
    workers running ``child`` on the children and, on p, a handler that records its runs and returns the
    children's values; yields the two queues and the list of p's runs, then stops the workers."""
    flows = FlowProducer(redis=redis_url)
    inv, data = AsyncQueue(inv_name, redis=redis_url), AsyncQueue(data_name, redis=redis_url)
    await flows.add(parent=(inv_name, "invoice", {}, {"job_id": "p"}),
                    children=[(data_name, "a", {}, {"job_id": "a"}), (data_name, "b", {}, {"job_id": "b"})])
    ran: list[str] = []

    async def invoice(job: Job) -> Any:
        ran.append(job.id)
        return await job.children_values()

    ws = [Worker(data_name, child, redis=redis_url, concurrency=2, **FAST),
          Worker(inv_name, invoice, redis=redis_url, **FAST)]
    tasks = [asyncio.ensure_future(w.run()) for w in ws]
    try:
        yield inv, data, ran
    finally:
        for w in ws:
            await w.close()
        await asyncio.gather(*tasks)
        for c in (flows, inv, data):
            await c.close()


def test_a_retried_flow_parent_waits_for_its_children_and_then_sees_them_all(redis_url: str) -> None:
    async def main() -> None:
        # Given a flow: child a ("fail" policy) is broken, child b runs until a gate opens
        broken, gate = [True], asyncio.Event()

        async def child(job: Job) -> str:
            if job.name == "a" and broken[0]:
                raise RuntimeError("a is broken")
            if job.name == "b":
                await gate.wait()
            return job.name.upper()

        async with invoice_flow(redis_url, "inv", "data", child) as (inv, data, ran):
            # a dies, so p dies with ChildFailed while b still runs
            await _until(lambda: state(inv, "p", "dead"))
            # When p is retried while b has not finished
            assert await inv.retry_dead("p") == ["p"]
            await asyncio.sleep(0.5)
            # Then p waits for its children instead of running before them
            assert await state(inv, "p", "waiting_children") and ran == []
            # b finishes: p still waits, its "fail" child a is dead
            gate.set()
            await _until(lambda: state(data, "b", "completed"))
            await asyncio.sleep(0.3)
            assert await state(inv, "p", "waiting_children") and ran == []
            # a is fixed and retried: it completes and p runs once, with both values
            broken[0] = False
            assert await data.retry_dead("a") == ["a"]
            await _until(lambda: state(inv, "p", "completed"))
            p = await inv.get_job("p")
            assert ran == ["p"] and p.returnvalue == {"data:a": "A", "data:b": "B"}
            assert p.started_at >= (await data.get_job("a")).finished_at  # type: ignore[operator]

    asyncio.run(main())


@pytest.mark.parametrize("order", ["child-first", "parent-first", "all-at-once"])
def test_a_fan_out_parent_retried_after_its_fixed_child_completes(redis_url: str, order: str) -> None:
    async def main() -> None:
        # Given a fan-out parent whose only child failed, so its wait_children raised ChildFailed: both dead
        q = AsyncQueue("fan", redis=redis_url)
        await q.add("split", {}, job_id="p")
        broken, runs = [True], []

        async def handler(job: Job) -> Any:
            if job.name == "piece":
                if broken[0]:
                    raise RuntimeError("piece broken")
                return 7
            runs.append(job.attempt)
            await job.add_children([("fan", "piece", {}, {"job_id": "p-0"})])
            return await job.wait_children(progress=False)

        w = Worker("fan", handler, redis=redis_url, concurrency=2, **FAST)

        async def both_dead() -> bool:
            return (await q.counts())["dead"] == 2

        await run_workers([w], both_dead)
        assert (await q.get_job("p")).error == "ChildFailed: child fan:p-0: RuntimeError: piece broken"
        # When the child is fixed and both are retried (in either order, or together)
        broken[0] = False
        if order == "child-first":
            assert await q.retry_dead("p-0") == ["p-0"]
            assert await q.retry_dead("p") == ["p"]
        elif order == "parent-first":
            assert await q.retry_dead("p") == ["p"]
            assert (await q.get_job("p")).state == "waiting_children"
            assert await q.retry_dead("p-0") == ["p-0"]
        else:
            assert sorted(await q.retry_dead(all_jobs=True)) == ["p", "p-0"]

        async def done() -> bool:
            return (await q.counts())["completed"] == 2

        await run_workers([Worker("fan", handler, redis=redis_url, concurrency=2, **FAST)], done)
        # Then the parent completes with its child's value (its failure mark was cleared), run once more
        p = await q.get_job("p")
        assert p.state == "completed" and p.returnvalue == {"fan:p-0": 7} and runs == [1, 1]
        assert await q.dead() == []
        await q.close()

    asyncio.run(main())


def test_a_retried_child_clears_only_its_own_failure_mark(redis_url: str, redis_client: redis.Redis) -> None:
    # Given a flow with three "fail" children, two of which died (a first, then b)
    from qsim.engine.flow import SyncFlowProducer

    with SyncFlowProducer(redis=redis_url) as flows:
        flows.add(parent=("inv", "p", {}, {"job_id": "p"}),
                  children=[("data", "c", {}, {"job_id": j}) for j in ("a", "b", "c")])
    data, inv = Queue("data", redis=redis_client), Queue("inv", redis=redis_client)
    s = ScriptSet(redis_client)
    got = {f.id: f for f in P.parse_fetch(run_calls(redis_client, s, [P.fetch_call(data.keys, 3, 30000, "w", "t")])[0])}
    for jid in ("a", "b"):
        f = got[jid]
        assert run_calls(redis_client, s, [P.fail_call(data.keys, 100, [(jid, f.token, f"E: {jid}", "", -1)])])[0] == [3]
    assert inv.get_job("p").state == "dead"
    assert redis_client.hget(inv.keys.job("p"), "child_failed") == "data:a: E: a"
    # When a is retried: the mark moves to b, which is still dead
    assert data.retry_dead("a") == ["a"]
    assert redis_client.hget(inv.keys.job("p"), "child_failed") == "data:b: E: b"
    assert redis_client.hgetall(inv.keys.children_failed("p")) == {"data:b": "E: b"}
    assert redis_client.hget(inv.keys.job("p"), "pending_children") == "2"  # a and c
    # And when b is retried too, no mark is left, and p retried waits for its three children
    assert data.retry_dead("b") == ["b"]
    assert redis_client.hget(inv.keys.job("p"), "child_failed") is None
    assert inv.retry_dead("p") == ["p"]
    assert inv.get_job("p").state == "waiting_children" and inv.counts()["waiting"] == 0
    assert redis_client.hget(inv.keys.job("p"), "pending_children") == "3"
    data.close()
    inv.close()


def test_a_purged_fail_child_sends_its_waiting_parent_to_the_dlq_and_a_later_retry_runs_it(redis_url: str) -> None:
    async def main() -> None:
        # Given a flow whose "fail" child a is broken and whose child b works
        async def child(job: Job) -> str:
            if job.name == "a":
                raise RuntimeError("a is broken")
            return job.name.upper()

        async with invoice_flow(redis_url, "inv2", "data2", child) as (inv, data, ran):
            await _until(lambda: state(inv, "p", "dead"))
            await _until(lambda: state(data, "b", "completed"))
            # and p was retried: it waits for a's retry
            assert await inv.retry_dead("p") == ["p"]
            assert await state(inv, "p", "waiting_children")
            # When the dead a is purged instead of retried
            assert await data.purge_dead() == 1
            # Then p does not wait forever: it is back in the DLQ, saying why
            p = await inv.get_job("p")
            assert p.state == "dead" and p.error == "ChildFailed: child data2:a was purged from the dead-letter queue"
            assert [j.id for j in await inv.dead()] == ["p"] and ran == []
            # and retried once more it runs, with the values of the children that are left
            assert await inv.retry_dead("p") == ["p"]
            await _until(lambda: state(inv, "p", "completed"))
            assert ran == ["p"] and (await inv.get_job("p")).returnvalue == {"data2:b": "B"}

    asyncio.run(main())
