"""The lean round trip for script calls (qsim.engine.channel) on a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.asyncio.connection import Connection

from qsim.engine import Queue
from qsim.engine import protocol as P
from qsim.engine.channel import pack_calls, send_calls
from qsim.engine.connection import connect_async
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call, ScriptSet, run_calls_async

pytestmark = pytest.mark.redis


def test_packing_matches_redis_py() -> None:
    calls = [Call("a", ("k1", "{q}:k2"), ("x", 1, 2.5, -7, "é", b"raw")), Call("b", (), ())]
    shas = {"a": "1" * 40, "b": "2" * 40}
    ref = Connection()
    expected = b"".join(b"".join(ref.pack_command("EVALSHA", shas[c.script], len(c.keys), *c.keys, *c.args))
                        for c in calls)
    assert pack_calls(calls, shas) == expected
    with pytest.raises(redis.exceptions.DataError):
        pack_calls([Call("a", (), (None,))], shas)
    with pytest.raises(redis.exceptions.DataError):
        pack_calls([Call("a", (), (True,))], shas)


def test_a_batch_works_again_after_script_flush(redis_url: str) -> None:
    # Given a waiting job and a client whose scripts Redis forgot (SCRIPT FLUSH, as after a restart)
    q = Queue("q", redis=redis_url)
    q.add("t", {"n": 1}, job_id="j1")
    q.close()
    k = QueueKeys("q")

    async def main() -> list[Any]:
        client = connect_async(redis_url)
        scripts = ScriptSet(client)
        try:
            await client.script_flush()
            # When a batch of two script calls is sent
            return await run_calls_async(client, scripts, [P.promote_call(k), P.fetch_call(k, 5, 30000, "w", "tok")])
        finally:
            await client.aclose()

    # Then the scripts are loaded again and each call gets its own reply: the job is fetched
    promoted, fetched = asyncio.run(main())
    assert promoted == -1
    assert [f.id for f in P.parse_fetch(fetched)] == ["j1"]


def test_a_failing_call_raises_and_the_connection_stays_usable(redis_url: str) -> None:
    boom, echo = "return redis.error_reply('BOOM no luck')", "return ARGV[1]"

    async def main() -> tuple[str, list[Any]]:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True, max_connections=1)
        try:
            shas = {"boom": await client.script_load(boom), "echo": await client.script_load(echo)}
            srcs = {"boom": boom, "echo": echo}
            # When a batch holds a call that fails in Redis and one that does not
            with pytest.raises(redis.exceptions.ResponseError) as e:
                await send_calls(client, [("boom", (), ()), ("echo", (), ("late",))], shas, srcs)
            # Then the error is raised, and the next round trip reads its own reply (none was left unread)
            return str(e.value), await send_calls(client, [("echo", (), ("next",))], shas, srcs)
        finally:
            await client.aclose()

    err, ok = asyncio.run(main())
    assert "BOOM" in err
    assert ok == ["next"]


def test_a_cancelled_round_trip_leaves_no_reply_for_the_next_user(redis_url: str) -> None:
    # Given a round trip cancelled while Redis is busy with it (a slow script call)
    async def main() -> Any:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True, max_connections=1)
        slow = "local t = redis.call('TIME'); while true do local n = redis.call('TIME'); " \
               "if (n[1] - t[1]) * 1000000 + n[2] - t[2] > 200000 then return 'slow' end end"
        sha = await client.script_load(slow)
        try:
            task = asyncio.ensure_future(send_calls(client, [("slow", (), ())], {"slow": sha}, {"slow": slow}))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # When the pool's only connection is used again, Then it reads its own reply, not the slow one's
            return await send_calls(client, [("echo", (), ("mine",))], {"echo": await client.script_load(
                "return ARGV[1]")}, {"echo": "return ARGV[1]"})
        finally:
            await client.aclose()

    assert asyncio.run(main()) == ["mine"]
