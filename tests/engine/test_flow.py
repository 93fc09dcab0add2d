"""Flows (FlowProducer: a parent after its children) and fan-out from a handler, on real Redis."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from qsim.engine import AsyncQueue, FlowProducer, Job, Queue, Worker
from qsim.errors import FlowError, UnrecoverableError

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 2.0, "stalled_interval": 0.5, "handle_signals": False}


async def run_workers(workers: list[Worker], cond: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    """Run several workers in this loop until ``cond()``; then close them all."""
    tasks = [asyncio.ensure_future(w.run()) for w in workers]
    try:
        async with asyncio.timeout(timeout):
            while not await cond():
                for t in tasks:
                    if t.done():
                        t.result()
                        raise AssertionError("a worker stopped early")
                await asyncio.sleep(0.01)
    finally:
        await asyncio.gather(*(w.close(5) for w in workers))
        await asyncio.gather(*tasks)


def test_flow_across_two_queues_parent_runs_after_its_last_child(redis_url: str) -> None:
    async def main() -> None:
        flows = FlowProducer(redis=redis_url)
        inv, data = AsyncQueue("invoicing", redis=redis_url), AsyncQueue("data", redis=redis_url)
        added = []
        for o in range(6):
            added.append(await flows.add(
                parent=("invoicing", "invoice", {"order": o}, {"job_id": f"inv-{o}"}),
                children=[("data", "line", {"order": o, "k": k}) for k in range(4)]))
        # Given: parents wait for their children, children wait to run
        assert (await inv.counts())["waiting_children"] == 6 and (await inv.counts())["waiting"] == 0
        assert (await data.counts())["waiting"] == 24
        assert all(a.created and len(a.refs) == 4 and a.refs[0].startswith("data:") for a in added)

        async def line(job: Job) -> dict[str, int]:
            await asyncio.sleep(random.uniform(0, 0.05))
            return {"amount": job.data["order"] * 10 + job.data["k"]}

        async def invoice(job: Job) -> dict[str, Any]:
            return await job.children_values()

        # When a worker per queue runs them
        ws = [Worker("data", line, redis=redis_url, concurrency=5, **FAST),
              Worker("invoicing", invoice, redis=redis_url, concurrency=3, **FAST)]

        async def all_done() -> bool:
            return (await inv.counts())["completed"] == 6

        await run_workers(ws, all_done)
        # Then no parent started before its last child finished, and it saw every child's value
        recs = {r.id: r for r in await data.job_records()}
        assert {r.parent for r in recs.values()} == {f"invoicing:inv-{o}" for o in range(6)}
        for a in added:
            parent = await inv.get_job(a.parent.id)
            kids = [recs[c.id] for c in a.children]
            assert parent.started_at >= max(k.finished_at for k in kids)  # type: ignore[operator, type-var]
            o = parent.data["order"]
            assert parent.returnvalue == {f"data:{c.id}": {"amount": o * 10 + i} for i, c in enumerate(a.children)}
        assert (await inv.counts())["waiting_children"] == 0
        # Adding the same parent id again is a no-op
        again = await flows.add(parent=("invoicing", "invoice", {}, {"job_id": "inv-0"}), children=[("data", "x", {})])
        assert not again.created and again.children == [] and (await data.counts())["waiting"] == 0
        await flows.close()
        await inv.close()
        await data.close()

    asyncio.run(main())


def test_failing_child_fails_the_parent_under_fail_but_not_under_ignore(redis_url: str) -> None:
    async def main() -> None:
        flows = FlowProducer(redis=redis_url)
        inv, data = AsyncQueue("invoicing", redis=redis_url), AsyncQueue("data", redis=redis_url)
        for policy in ("fail", "ignore"):
            await flows.add(parent=("invoicing", "invoice", {}, {"job_id": f"p-{policy}"}),
                            children=[("data", "ok", {}, {"job_id": f"ok-{policy}"}),
                                      ("data", "bad", {}, {"job_id": f"bad-{policy}", "attempts": 2}),
                                      ("data", "ok", {}, {"job_id": f"ok2-{policy}"})],
                            on_child_failure=policy)
        ran: list[str] = []

        async def child(job: Job) -> str:
            if job.name == "bad":
                raise RuntimeError(f"broken attempt {job.attempt}")
            await asyncio.sleep(0.05)
            return job.id

        async def invoice(job: Job) -> dict[str, Any]:
            ran.append(job.id)
            return {"values": await job.children_values(), "failures": await job.children_failures()}

        ws = [Worker("data", child, redis=redis_url, concurrency=2, **FAST),
              Worker("invoicing", invoice, redis=redis_url, **FAST)]

        async def settled() -> bool:
            c = await inv.counts()
            return c["dead"] == 1 and c["completed"] == 1 and (await data.counts())["completed"] == 4

        await run_workers(ws, settled)
        # fail: the parent went to the DLQ with the child's error and never ran
        p = await inv.get_job("p-fail")
        assert p.state == "dead" and p.error == "ChildFailed: child data:bad-fail failed: RuntimeError: broken attempt 2"
        assert p.started_at is None and "p-fail" not in ran
        assert [e["job"] for e in await inv.events() if e["event"] == "dead"] == ["p-fail"]
        # ignore: the parent ran once the others were done; the dead child is listed apart
        q = await inv.get_job("p-ignore")
        assert q.state == "completed" and ran == ["p-ignore"]
        assert q.returnvalue == {"values": {"data:ok-ignore": "ok-ignore", "data:ok2-ignore": "ok2-ignore"},
                                 "failures": {"data:bad-ignore": "RuntimeError: broken attempt 2"}}
        assert q.started_at >= (await data.get_job("ok2-ignore")).finished_at  # type: ignore[operator]
        await flows.close()
        await inv.close()
        await data.close()

    asyncio.run(main())


def test_fan_out_of_50_children_with_progress(redis_url: str) -> None:
    async def main() -> None:
        fan, parts = AsyncQueue("fan", redis=redis_url), AsyncQueue("parts", redis=redis_url)
        await fan.add("split", {"n": 50}, job_id="big")
        progress: list[Any] = []

        async def split(job: Job) -> int:
            kids = await job.add_children([("parts", "render", {"page": p}) for p in range(job.data["n"])])
            assert len(kids) == 50 and len({k.id for k in kids}) == 50
            values = await job.wait_children()
            return sum(values.values())

        async def render(job: Job) -> int:
            await asyncio.sleep(random.uniform(0, 0.02))
            return int(job.data["page"])

        w_fan = Worker("fan", split, redis=redis_url, **FAST)
        w_fan.on("progress", lambda job, value: progress.append(value))

        async def done() -> bool:
            return (await fan.counts())["completed"] == 1

        await run_workers([w_fan, Worker("parts", render, redis=redis_url, concurrency=10, **FAST)], done)
        big = await fan.get_job("big")
        assert big.returnvalue == sum(range(50))
        kids = await parts.job_records()
        assert len(kids) == 50 and all(k.state == "completed" for k in kids)
        assert big.finished_at >= max(k.finished_at for k in kids)  # type: ignore[operator, type-var]
        assert progress and progress[-1] == {"children_done": 50, "children_total": 50}
        done_counts = [p["children_done"] for p in progress]
        assert done_counts == sorted(done_counts) and all(p["children_total"] == 50 for p in progress)
        await fan.close()
        await parts.close()

    asyncio.run(main())


def test_fan_out_child_failure_raises_in_the_parent(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("fan", redis=redis_url)
        await q.add("split", {}, job_id="p")

        async def handler(job: Job) -> Any:
            if job.name == "piece":
                if job.data["i"] == 3:
                    raise UnrecoverableError("piece 3 is poison")
                return job.data["i"]
            await job.add_children([("fan", "piece", {"i": i}, {"job_id": f"c{i}"}) for i in range(5)])
            return await job.wait_children(progress=False)

        async def dead() -> bool:
            return (await q.counts())["dead"] == 2

        await run_workers([Worker("fan", handler, redis=redis_url, concurrency=3, **FAST)], dead)
        p = await q.get_job("p")
        assert p.error == "ChildFailed: child fan:c3: UnrecoverableError: piece 3 is poison"
        await q.close()

    asyncio.run(main())


def test_flow_refuses_a_taken_child_id_and_writes_nothing(redis_url: str) -> None:
    async def main() -> None:
        data = Queue("data", redis=redis_url)
        data.add("x", {}, job_id="taken")
        flows = FlowProducer(redis=redis_url)
        with pytest.raises(FlowError, match="data:taken"):
            await flows.add(parent=("inv", "p", {}), children=[("data", "y", {}), ("data", "x", {}, {"job_id": "taken"})])
        assert Queue("inv", redis=data.client).counts()["waiting_children"] == 0
        assert data.counts()["waiting"] == 1
        with pytest.raises(ValueError, match="on_failure"):
            await flows.add(parent=("inv", "p", {}), children=[("data", "y", {}, {"on_failure": "explode"})])
        with pytest.raises(ValueError, match="delay"):
            await flows.add(parent=("inv", "p", {}, {"delay": 1.0}), children=[])
        await flows.close()
        data.close()

    asyncio.run(main())


@pytest.mark.cluster
def test_flow_on_redis_cluster_one_slot_runs_and_cross_slot_is_refused(cluster_url: str) -> None:
    async def main() -> None:
        flows = FlowProducer(redis=cluster_url)
        # "orders" and "billing" live on different masters: refused before anything is written
        with pytest.raises(FlowError, match="share one hash slot"):
            await flows.add(parent=("orders", "p", {}), children=[("billing", "c", {})])
        q = AsyncQueue("orders", redis=cluster_url)
        assert (await q.counts())["waiting_children"] == 0
        added = await flows.add(parent=("orders", "total", {}), children=[("orders", "part", {"v": v}) for v in range(5)])

        async def handler(job: Job) -> Any:
            if job.name == "part":
                return job.data["v"]
            return sum((await job.children_values()).values())

        async def done() -> bool:
            return (await q.counts())["completed"] == 6

        await run_workers([Worker("orders", handler, redis=cluster_url, concurrency=4, **FAST)], done)
        assert (await q.get_job(added.parent.id)).returnvalue == 10
        await flows.close()
        await q.close()

    asyncio.run(main())


@pytest.mark.cluster
def test_flow_and_fan_out_across_queues_of_one_group_on_redis_cluster(cluster_url: str) -> None:
    async def main() -> None:
        # Given two queues sharing the group "shop" (one hash tag, one slot)
        flows = FlowProducer(redis=cluster_url, group="shop")
        inv = AsyncQueue("invoicing", redis=cluster_url, group="shop")
        data = AsyncQueue("data", redis=cluster_url, group="shop")
        assert inv.keys.wait.startswith("qsim:{shop}:") and data.keys.wait.startswith("qsim:{shop}:")
        added = await flows.add(parent=("invoicing", "invoice", {}),
                                children=[("data", "line", {"v": v}) for v in range(4)])
        await inv.add("split", {}, job_id="fan")
        assert (await inv.counts())["waiting_children"] == 1

        async def handler(job: Job) -> Any:
            if job.name == "line":
                return job.data["v"]
            if job.name == "split":
                await job.add_children([("data", "line", {"v": 10 + v}) for v in range(20)])
                return sum((await job.wait_children(progress=False)).values())
            return await job.children_values()

        async def done() -> bool:
            return (await inv.counts())["completed"] == 2

        # When one worker serves both queues
        w = Worker(["invoicing", "data"], handler, redis=cluster_url, group="shop", concurrency=6, **FAST)
        await run_workers([w], done)
        # Then the flow's parent saw its children's values and the fan-out summed its 20 children
        parent = await inv.get_job(added.parent.id)
        assert parent.returnvalue == {ref: v for v, ref in enumerate(added.refs)}
        assert (await inv.get_job("fan")).returnvalue == sum(range(10, 30))
        assert (await data.counts())["completed"] == 24
        assert {r.parent for r in await data.job_records()} == {f"invoicing:{added.parent.id}", "invoicing:fan"}
        await flows.close()
        await inv.close()
        await data.close()

    asyncio.run(main())


def _flow(url: str, children: list[tuple[Any, ...]], policy: str = "fail") -> Any:
    async def add() -> Any:
        async with FlowProducer(redis=url) as flows:
            return await flows.add(parent=("inv", "p", {}, {"job_id": "p"}), children=children,
                                   on_child_failure=policy)

    return asyncio.run(add())


def test_child_that_stalls_too_often_fails_its_parent(redis_url: str, redis_client: Any) -> None:
    from qsim.engine import protocol as P
    from qsim.engine.scripts import ScriptSet, run_calls

    # Given a flow whose only child is fetched by a worker that dies (lock 1 ms)
    _flow(redis_url, [("data", "c", {}, {"job_id": "c"})])
    data, inv = Queue("data", redis=redis_client), Queue("inv", redis=redis_client)
    s = ScriptSet(redis_client)
    (got,) = P.parse_fetch(run_calls(redis_client, s, [P.fetch_call(data.keys, 1, 1, "w", "t")])[0])
    assert got.id == "c"
    time.sleep(0.01)
    # When the stalled check finds it with max_stalled = 0
    requeued, dead, _ = run_calls(redis_client, s, [P.recover_stalled_call(data.keys, 100, 0)])[0]
    # Then the child is dead and so is its parent, with the child's error
    assert dead == ["c"] and requeued == []
    p = inv.get_job("p")
    assert p.state == "dead" and p.error.startswith("ChildFailed: child data:c failed: StalledError")  # type: ignore[union-attr]
    assert inv.counts()["waiting_children"] == 0 and inv.counts()["dead"] == 1


def test_ignored_dead_child_retried_later_is_counted_once(redis_url: str, redis_client: Any) -> None:
    from qsim.engine import protocol as P
    from qsim.engine.scripts import ScriptSet, run_calls

    _flow(redis_url, [("data", "c", {}, {"job_id": "a"}), ("data", "c", {}, {"job_id": "b"})], policy="ignore")
    data, inv = Queue("data", redis=redis_client), Queue("inv", redis=redis_client)
    s = ScriptSet(redis_client)

    def fetch(n: int = 1) -> Any:
        return {j.id: j for j in P.parse_fetch(run_calls(redis_client, s, [P.fetch_call(data.keys, n, 30000, "w",
                                                                                        f"t{n}")])[0])}

    a = fetch()["a"]
    assert run_calls(redis_client, s, [P.fail_call(data.keys, 100, [(a.id, a.token, "E: a broke", "", -1)])])[0] == [3]
    assert redis_client.hgetall(inv.keys.children_failed("p")) == {"data:a": "E: a broke"}
    assert inv.get_job("p").state == "waiting_children"
    # a is retried from the DLQ and completes before b: recorded as a value, not counted twice
    assert data.retry_dead("a") == ["a"]
    got = fetch(2)
    a2, b = got["a"], got["b"]
    assert run_calls(redis_client, s, [P.complete_call(data.keys, 100, -1, -1, [("a", a2.token, '"A"')])])[0] == [1]
    assert redis_client.hgetall(inv.keys.children_failed("p")) == {}
    assert inv.get_job("p").state == "waiting_children"
    assert run_calls(redis_client, s, [P.complete_call(data.keys, 100, -1, -1, [("b", b.token, '"B"')])])[0] == [1]
    assert inv.get_job("p").state == "waiting" and inv.counts()["waiting"] == 1
    assert redis_client.hgetall(inv.keys.children("p")) == {"data:a": '"A"', "data:b": '"B"'}
    assert redis_client.hget(inv.keys.job("p"), "pending_children") == "0"


def test_trimmed_completed_parent_takes_its_children_hash_along(redis_url: str, redis_client: Any) -> None:
    from qsim.engine import protocol as P
    from qsim.engine.scripts import ScriptSet, run_calls

    _flow(redis_url, [("inv", "c", {}, {"job_id": "c"})])
    inv = Queue("inv", redis=redis_client)
    s = ScriptSet(redis_client)

    def run_one() -> str:
        (j,) = P.parse_fetch(run_calls(redis_client, s, [P.fetch_call(inv.keys, 1, 30000, "w", "t")])[0])
        assert run_calls(redis_client, s, [P.complete_call(inv.keys, 100, 0, -1, [(j.id, j.token, "1")])])[0] == [1]
        return j.id

    # keep_count = 0: every completed job is trimmed at once
    assert run_one() == "c" and redis_client.exists(inv.keys.children("p")) == 1
    assert run_one() == "p"
    assert redis_client.exists(inv.keys.job("p"), inv.keys.children("p"), inv.keys.job("c")) == 0


def test_retried_fan_out_parent_does_not_add_or_count_its_children_twice(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("fan", redis=redis_url)
        await q.add("split", {}, job_id="p", attempts=2)
        runs: list[int] = []
        created: list[list[bool]] = []

        async def handler(job: Job) -> Any:
            if job.name == "piece":
                return job.data["i"]
            runs.append(job.attempt)
            added = await job.add_children([("fan", "piece", {"i": i}, {"job_id": f"{job.id}-{i}"}) for i in range(10)])
            created.append([c.created for c in added])
            if job.attempt == 1:
                raise RuntimeError("crashed after fanning out")
            return sum((await job.wait_children(progress=False)).values())

        async def done() -> bool:
            return (await q.counts())["completed"] == 11

        await run_workers([Worker("fan", handler, redis=redis_url, concurrency=4, **FAST)], done)
        p = await q.get_job("p")
        assert runs == [1, 2] and p.returnvalue == sum(range(10))
        assert created == [[True] * 10, [False] * 10]  # the retried attempt's children existed already
        assert len(await q.job_records()) == 11
        await q.close()

    asyncio.run(main())


def test_stats_command_shows_parents_waiting_for_children(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from qsim.cli import worker as worker_cli

    _flow(redis_url, [("data", "c", {}), ("data", "c", {})])
    p = argparse.ArgumentParser(prog="qsim")
    worker_cli.register(p.add_subparsers(required=True))
    args = p.parse_args(["stats", "--redis", redis_url])
    assert args.func(args) == 0
    head, *rows = capsys.readouterr().out.splitlines()
    assert head.split() == ["queue", "waiting", "active", "delayed", "completed", "dead", "children", "paused"]
    assert sorted(r.split() for r in rows) == [["data", "2", "0", "0", "0", "0", "0", "no"],
                                               ["inv", "0", "0", "0", "0", "0", "1", "no"]]


def test_sync_flow_producer_adds_the_same_flow(redis_url: str) -> None:
    from qsim.engine import SyncFlowProducer

    # Given a flow added from sync code (a web app, a Locust user)
    with SyncFlowProducer(redis=redis_url, on_child_failure="ignore") as flows:
        added = flows.add(parent=("inv", "total", {}, {"priority": 2, "job_id": "t1"}),
                          children=[("data", "part", {"v": v}, {"attempts": 2}) for v in range(3)])
        again = flows.add(parent=("inv", "again", {}, {"job_id": added.parent.id}), children=[("data", "part", {})])
    assert added.created and len(added.children) == 3 and not again.created and again.parent.name == "total"
    inv = Queue("inv", redis=redis_url)
    p = inv.get_job(added.parent.id)
    assert p.state == "waiting_children" and p.priority == 2

    async def main() -> None:
        async def handler(job: Job) -> Any:
            return job.data["v"] if job.name == "part" else await job.children_values()

        aq = AsyncQueue("inv", redis=redis_url)

        async def done() -> bool:
            return (await aq.counts())["completed"] == 1

        await run_workers([Worker(["inv", "data"], handler, redis=redis_url, **FAST)], done)
        await aq.close()

    asyncio.run(main())
    assert inv.get_job(added.parent.id).returnvalue == {ref: v for v, ref in enumerate(added.refs)}
    inv.close()



def test_move_to_waiting_children_frees_the_slot_and_resumes_once_children_are_done(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("fan", redis=redis_url)
        await q.add("split", {"n": 50}, job_id="big")
        runs: list[tuple[int, float]] = []
        pieces: dict[int, int] = {}

        async def handler(job: Job) -> Any:
            if job.name == "piece":
                pieces[job.data["i"]] = pieces.get(job.data["i"], 0) + 1
                return job.data["i"]
            runs.append((job.attempt, time.time()))
            await job.add_children([("fan", "piece", {"i": i}, {"job_id": f"{job.id}-{i}"})
                                    for i in range(job.data["n"])])
            await job.move_to_waiting_children()
            return sum((await job.children_values()).values())

        results: dict[str, Any] = {}

        async def done() -> bool:
            return "big" in results

        # concurrency 1, one queue: a parent holding its slot would wait forever; completed
        # jobs are trimmed at once (keep_completed=0), so only the parent's hash remembers its children
        w = Worker("fan", handler, redis=redis_url, concurrency=1, keep_completed=0, **FAST)
        w.on("completed", lambda job, result: results.__setitem__(job.id, result) if job.name == "split" else None)
        await run_workers([w], done)
        assert results == {"big": sum(range(50))}
        assert [a for a, _ in runs] == [1, 1]  # ran twice, in the same attempt
        assert pieces == {i: 1 for i in range(50)}  # every child ran once, none re-added on resume
        big_events = [e["event"] for e in await q.events(1000) if e["job"] == "big"]
        assert big_events == ["completed"]
        c = await q.counts()
        assert c["waiting"] == c["active"] == c["waiting_children"] == c["dead"] == 0
        await q.close()

    asyncio.run(main())


def test_parked_parent_fails_when_a_fail_child_dies(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("fan", redis=redis_url)
        await q.add("split", {}, job_id="p")
        parent_runs = [0]

        async def handler(job: Job) -> Any:
            if job.name == "piece":
                if job.data["i"] == 2:
                    raise UnrecoverableError("piece 2 is poison")
                await asyncio.sleep(0.05)
                return job.data["i"]
            parent_runs[0] += 1
            await job.add_children([("fan", "piece", {"i": i}, {"job_id": f"c{i}"}) for i in range(4)])
            await job.move_to_waiting_children()
            return "unreachable"

        async def dead() -> bool:
            return (await q.counts())["dead"] == 2 and (await q.counts())["completed"] == 3

        await run_workers([Worker("fan", handler, redis=redis_url, concurrency=2, **FAST)], dead)
        p = await q.get_job("p")
        assert p.state == "dead" and p.error == "ChildFailed: child fan:c2 failed: UnrecoverableError: piece 2 is poison"
        assert parent_runs == [1] and (await q.counts())["waiting_children"] == 0
        await q.close()

    asyncio.run(main())
