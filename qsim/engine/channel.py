"""A lean round trip for script calls on a single-server asyncio client.

redis-py's pipeline is general: a command stack, every argument through its
encoder, response callbacks, script checks and observability hooks on each
``execute``. The worker sends a few script calls per round trip, thousands
of times a second, and that machinery cost more of its CPU than the rest of
the job's path (``benchmarks/worker_cpu.py``). Here the calls are packed in
one go (the engine's arguments are only ``str``, ``int`` and ``float``),
written on a connection borrowed from the client's own pool, and their
replies read with the connection's parser (hiredis when it is installed).

* A ``NOSCRIPT`` reply (Redis restarted, ``SCRIPT FLUSH``) loads the scripts
  and resends only the calls that failed: still one round trip normally.
* Connection errors follow the client's retry policy, as redis-py's own
  pipeline does: the connection is dropped and the calls sent again.
* A round trip cut short (cancelled, or failed half-way) drops its
  connection, so no unread reply is left for the pool's next user.

Each call stays one EVALSHA of one script: every job state change is still
one atomic Lua script; only the client-side packing is ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.exceptions import DataError, NoScriptError, ResponseError

__all__ = ["ScriptCall", "pack_calls", "send_calls"]

#: ``(script name, keys, args)``: a :class:`qsim.engine.scripts.Call` of a script.
ScriptCall = tuple[str, Sequence[Any], Sequence[Any]]


def _arg(value: Any, encoding: str, errors: str) -> bytes:
    if isinstance(value, str):
        return value.encode(encoding, errors)
    if isinstance(value, bytes):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value).encode()
    raise DataError(f"invalid argument {value!r} of type {type(value).__name__}: use str, bytes, int or float")


def pack_calls(calls: Sequence[ScriptCall], shas: Mapping[str, str], encoding: str = "utf-8",
               errors: str = "strict") -> bytes:
    """The RESP bytes of ``calls``, each an ``EVALSHA sha numkeys *keys *args``.

    Raises:
        DataError: An argument is not ``str``, ``bytes``, ``int`` or ``float`` (as redis-py would).
    """
    out: list[bytes] = []
    for script, keys, args in calls:
        out.append(b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n$%d\r\n%d\r\n"
                   % (3 + len(keys) + len(args), shas[script].encode(), len(str(len(keys))), len(keys)))
        for a in (*keys, *args):
            b = a.encode(encoding, errors) if type(a) is str else _arg(a, encoding, errors)
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


async def _exchange(conn: Any, payload: bytes, n: int) -> list[Any]:
    """Write ``payload`` and read its ``n`` replies (an error reply in its place as an exception)."""
    done = False
    try:
        await conn.send_packed_command(payload)
        replies: list[Any] = []
        for _ in range(n):
            try:
                replies.append(await conn.read_response())
            except ResponseError as e:
                replies.append(e)
        done = True
        return replies
    finally:
        if not done:  # replies may be left unread on this socket: never hand it back as it is
            await conn.disconnect(nowait=True)


async def _round_trip(client: Any, calls: Sequence[ScriptCall], shas: Mapping[str, str]) -> list[Any]:
    pool = client.connection_pool
    conn = await pool.get_connection()
    try:
        enc = conn.encoder
        payload = pack_calls(calls, shas, enc.encoding, enc.encoding_errors)

        async def drop(error: Exception) -> None:
            await conn.disconnect()

        replies: list[Any] = await conn.retry.call_with_retry(lambda: _exchange(conn, payload, len(calls)), drop)
        return replies
    finally:
        await pool.release(conn)


async def send_calls(client: Any, calls: Sequence[ScriptCall], shas: Mapping[str, str],
                     sources: Mapping[str, str]) -> list[Any]:
    """Send the script ``calls`` in one round trip on a single-server asyncio client; replies in order.

    ``shas`` and ``sources`` map each script name to its SHA1 and its Lua text (loaded on NOSCRIPT).

    Raises:
        redis.exceptions.ResponseError: A call failed in Redis (the first such reply).
        redis.exceptions.ConnectionError: Redis could not be reached (after the client's retries).
    """
    replies = await _round_trip(client, calls, shas)
    missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if missing:
        for src in sources.values():
            await client.script_load(src)
        for i, r in zip(missing, await _round_trip(client, [calls[i] for i in missing], shas)):
            replies[i] = r
    for r in replies:
        if isinstance(r, Exception):
            raise r
    return replies
