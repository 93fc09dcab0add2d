"""Loading the ``lua/*.lua`` scripts and running script calls on a client.

Scripts are read with :mod:`importlib.resources` and registered per client
(``client.register_script``), so redis-py's script objects handle EVALSHA and
the NOSCRIPT reload for single calls. Several calls go out as one pipeline
(one round trip); there a NOSCRIPT reply makes us load the scripts and resend
only the calls that failed (redis-py's own pipeline would first send SCRIPT
EXISTS on every execute, a second round trip).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Generic, NamedTuple, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import NoScriptError

from qsim.errors import EngineError, RedisUnavailable

__all__ = [
    "SCRIPT_NAMES",
    "Call",
    "Op",
    "ScriptSet",
    "lua_source",
    "command",
    "run_op",
    "run_op_async",
    "run_calls",
    "run_calls_async",
    "redis_errors",
    "CONNECTION_ERRORS",
    "REDIS_ERRORS",
    "is_cluster",
]

logger = logging.getLogger(__name__)

SCRIPT_NAMES: tuple[str, ...] = (
    "add",
    "promote",
    "fetch",
    "complete",
    "fail",
    "extend_lock",
    "recover_stalled",
    "release",
    "retry_dead",
    "purge_dead",
    "progress",
    "add_flow",
    "add_children",
    "park",
    "queue_stats",
    "set_rate_limit",
)

#: Lua files pasted into scripts at a line ``-- @include <name>`` (not scripts themselves).
LUA_INCLUDES: tuple[str, ...] = ("job_lib", "flow_lib")

#: Errors after which a retry on a fresh connection may succeed.
CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    OSError,
)

#: Every error redis-py raises for a command (connection trouble, and errors Redis replied with).
REDIS_ERRORS: tuple[type[Exception], ...] = (*CONNECTION_ERRORS, redis.exceptions.RedisError)

T = TypeVar("T")


@functools.cache
def lua_source(name: str) -> str:
    """The text of ``lua/<name>.lua``, with its ``-- @include`` lines filled in.

    An include brings only the library's definitions the script uses (directly or through another
    definition it brings): every ``local function`` of a script is made again on each call, at a cost
    to Redis of about a third of a µs each, so the helpers a script never calls stay out of it."""
    if name not in SCRIPT_NAMES:
        raise ValueError(f"unknown script {name!r}; known: {', '.join(SCRIPT_NAMES)}")
    text = _lua_file(name)
    libs = {inc: _definitions(_lua_file(inc)) for inc in LUA_INCLUDES if f"-- @include {inc}\n" in text}
    used = set(re.findall(r"\w+", text))
    kept: set[tuple[str, int]] = set()
    grew = True
    while grew:  # a definition kept may use others
        grew = False
        for inc, pieces in libs.items():
            for i, (names, piece) in enumerate(pieces):
                if (inc, i) not in kept and names & used:
                    kept.add((inc, i))
                    used |= set(re.findall(r"\w+", piece))
                    grew = True
    for inc, pieces in libs.items():
        lib = "".join(piece for i, (_, piece) in enumerate(pieces) if (inc, i) in kept)
        text = text.replace(f"-- @include {inc}\n", lib, 1)
    return text


def _lua_file(name: str) -> str:
    return resources.files("qsim.engine.lua").joinpath(f"{name}.lua").read_text(encoding="utf-8")


_DEFINES = re.compile(r"^local (?:function )?(\w+(?:\s*,\s*\w+)*)", re.M)


def _definitions(lib: str) -> list[tuple[set[str], str]]:
    """A library's top-level pieces, each a ``local`` statement (a function with its body) with the comment
    lines above it: the names it defines, its text (the library's opening comment defines none)."""
    pieces: list[list[str]] = [[]]
    for line in lib.splitlines(keepends=True):
        opens = line.startswith(("local ", "--"))
        if opens and any(s.startswith("local ") for s in pieces[-1]):
            pieces.append([])
        pieces[-1].append(line)
    out = []
    for lines in pieces:
        piece = "".join(lines)
        names = {n.strip() for m in _DEFINES.findall(piece) for n in m.split(",")}
        out.append((names, piece))
    return out


class Call(NamedTuple):
    """One script call (``script`` set) or one plain command (``script == ""``)."""

    script: str
    keys: Sequence[str]
    args: Sequence[Any]


def command(*args: Any) -> Call:
    """A plain Redis command as a :class:`Call`."""
    return Call("", (), args)


@dataclass
class Op(Generic[T]):
    """Calls sent in one round trip and the function that reads their replies.

    ``parse`` may return another :class:`Op` to continue (e.g. list ids, then
    read their hashes); the sync and async executors follow the chain. ``T`` is
    what the chain ends with: :func:`run_op` returns it.
    """

    calls: list[Call]
    parse: Callable[[list[Any]], T | Op[T]]
    #: Hand an error Redis replied to a call to ``parse`` in that call's place instead of raising it.
    errors_in_replies: bool = False


class ScriptSet:
    """The engine's scripts registered on one client (sync or asyncio)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sources = {name: lua_source(name) for name in SCRIPT_NAMES}
        #: redis-py script objects (``Script`` on a sync client, ``AsyncScript`` on an asyncio one).
        self.scripts: dict[str, Any] = {name: client.register_script(src) for name, src in self.sources.items()}

    def sha(self, name: str) -> str:
        return str(self.scripts[name].sha)


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is a (sync or asyncio) Redis Cluster client."""
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


def _queue_call(pipe: Any, scripts: ScriptSet, call: Call) -> None:
    if call.script:
        pipe.evalsha(scripts.sha(call.script), len(call.keys), *call.keys, *call.args)
    else:
        pipe.execute_command(*call.args)


def run_calls(client: Any, scripts: ScriptSet, calls: Sequence[Call], *, errors_in_replies: bool = False) -> list[Any]:
    """Send ``calls`` in one round trip on a sync client; replies in order.

    On Redis Cluster (whose pipelines refuse EVALSHA) the calls go one after
    another, each to the node of its keys' slot. An error Redis replied to a
    call is raised (the first one), or, with ``errors_in_replies``, returned
    in that call's place. Connection errors always raise.
    """
    if len(calls) != 1 and is_cluster(client):
        return [r for c in calls for r in run_calls(client, scripts, [c], errors_in_replies=errors_in_replies)]
    if len(calls) == 1:
        c = calls[0]
        try:
            if c.script:
                return [scripts.scripts[c.script](keys=list(c.keys), args=list(c.args), client=client)]
            return [client.execute_command(*c.args)]
        except redis.exceptions.ResponseError as e:
            if errors_in_replies:
                return [e]
            raise
    pipe = client.pipeline(transaction=False)
    for c in calls:
        _queue_call(pipe, scripts, c)
    replies = list(pipe.execute(raise_on_error=False))
    missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if missing:
        for name, src in scripts.sources.items():
            client.script_load(src)
        pipe = client.pipeline(transaction=False)
        for i in missing:
            _queue_call(pipe, scripts, calls[i])
        for i, r in zip(missing, pipe.execute(raise_on_error=False)):
            replies[i] = r
    if not errors_in_replies:
        for r in replies:
            if isinstance(r, Exception):
                raise r
    return replies


async def run_calls_async(client: Any, scripts: ScriptSet, calls: Sequence[Call], *,
                          errors_in_replies: bool = False) -> list[Any]:
    """Send ``calls`` in one round trip on an asyncio client; replies in order (Cluster: one by one).

    An error Redis replied to a call is raised (the first one), or, with ``errors_in_replies``, returned in
    that call's place while the other calls' replies are kept. Connection errors always raise.
    """
    if len(calls) != 1 and is_cluster(client):
        out = []
        for c in calls:
            out += await run_calls_async(client, scripts, [c], errors_in_replies=errors_in_replies)
        return out
    if len(calls) == 1:
        c = calls[0]
        try:
            if c.script:
                return [await scripts.scripts[c.script](keys=list(c.keys), args=list(c.args), client=client)]
            return [await client.execute_command(*c.args)]
        except redis.exceptions.ResponseError as e:
            if errors_in_replies:
                return [e]
            raise
    pipe = client.pipeline(transaction=False)
    for c in calls:
        _queue_call(pipe, scripts, c)
    replies = list(await pipe.execute(raise_on_error=False))
    missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if missing:
        for name, src in scripts.sources.items():
            await client.script_load(src)
        pipe = client.pipeline(transaction=False)
        for c in (calls[i] for i in missing):
            _queue_call(pipe, scripts, c)
        for i, r in zip(missing, await pipe.execute(raise_on_error=False)):
            replies[i] = r
    if not errors_in_replies:
        for r in replies:
            if isinstance(r, Exception):
                raise r
    return replies


@contextlib.contextmanager
def redis_errors(where: str) -> Iterator[None]:
    """Wrap redis-py errors: connection trouble -> RedisUnavailable, else EngineError."""
    try:
        yield
    except CONNECTION_ERRORS as e:
        raise RedisUnavailable(f"Redis unavailable ({where}): {e}") from e
    except redis.exceptions.OutOfMemoryError as e:
        raise EngineError(f"Redis refused the write ({where}): it is at its maxmemory (maxmemory-policy "
                          f"noeviction) and nothing was written; retry later (with the same job_id), after "
                          f"freeing memory or raising maxmemory ({e})") from e
    except redis.exceptions.RedisError as e:
        raise EngineError(f"Redis error ({where}): {e}") from e


def run_op(client: Any, scripts: ScriptSet, op: Op[T], where: str) -> T:
    """Run an :class:`Op` (and its continuations) on a sync client."""
    with redis_errors(where):
        while True:
            result = op.parse(run_calls(client, scripts, op.calls, errors_in_replies=op.errors_in_replies))
            if not isinstance(result, Op):
                return result
            op = result


async def run_op_async(client: Any, scripts: ScriptSet, op: Op[T], where: str) -> T:
    """Run an :class:`Op` (and its continuations) on an asyncio client."""
    with redis_errors(where):
        while True:
            result = op.parse(await run_calls_async(client, scripts, op.calls, errors_in_replies=op.errors_in_replies))
            if not isinstance(result, Op):
                return result
            op = result
