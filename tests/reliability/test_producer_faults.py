"""Producers and connection resets: an add whose reply is lost is never sent twice behind the
caller's back (an add without ``job_id`` is not idempotent); both producers follow the same policy."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from qsim.engine import AsyncQueue, Queue
from qsim.errors import RedisUnavailable
from redis_server import RedisServer

pytestmark = pytest.mark.redis


class DropReplyProxy:
    """A TCP proxy to Redis. Once armed, it forwards the next command holding ``EVALSHA`` and then
    cuts the client's connection instead of passing Redis's reply on: the script ran, its answer is lost."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.armed = threading.Event()
        self.fired = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            self.conns += [client, up]
            state = {"drop": False}
            threading.Thread(target=self._to_redis, args=(client, up, state), daemon=True).start()
            threading.Thread(target=self._to_client, args=(up, client, state), daemon=True).start()

    def _to_redis(self, client: socket.socket, up: socket.socket, state: dict[str, bool]) -> None:
        while (chunk := _recv(client)) is not None:
            if self.armed.is_set() and b"EVALSHA" in chunk.upper():
                self.armed.clear()
                state["drop"] = True
            up.sendall(chunk)
        _close(up)

    def _to_client(self, up: socket.socket, client: socket.socket, state: dict[str, bool]) -> None:
        while (chunk := _recv(up)) is not None:
            if state["drop"]:  # the reply to the armed command: swallow it and reset the connection
                _close(client)
                _close(up)
                self.fired.set()
                return
            client.sendall(chunk)
        _close(client)

    def close(self) -> None:
        _close(self.listener)
        for c in self.conns:
            _close(c)


def _recv(s: socket.socket) -> bytes | None:
    try:
        data = s.recv(65536)
    except OSError:
        return None
    return data or None


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


@pytest.fixture
def proxy(redis_server: RedisServer, redis_url: str) -> Iterator[DropReplyProxy]:
    p = DropReplyProxy(redis_server.port)
    yield p
    p.close()


def _add_with_lost_reply(producer: str, proxy: DropReplyProxy, redis_url: str) -> tuple[Any, dict[str, int]]:
    """Add one job without an id through the proxy, losing the reply; returns (the outcome, counts)."""
    async def run_async() -> tuple[Any, dict[str, int]]:
        q = AsyncQueue("q", redis=proxy.url)
        await q.add("warm", {}, job_id="warm")  # scripts loaded, connection made
        proxy.armed.set()
        try:
            outcome: Any = await q.add("t", {"n": 1})
        except RedisUnavailable as e:
            outcome = e
        after = await q.add("t2", {})  # the producer recovers on a new connection
        assert after.created
        await q.close()
        check = Queue("q", redis=redis_url)
        counts = check.counts()
        check.close()
        return outcome, counts

    if producer == "async":
        return asyncio.run(run_async())
    q = Queue("q", redis=proxy.url)
    q.add("warm", {}, job_id="warm")
    proxy.armed.set()
    try:
        outcome: Any = q.add("t", {"n": 1})
    except RedisUnavailable as e:
        outcome = e
    assert q.add("t2", {}).created
    q.close()
    check = Queue("q", redis=redis_url)
    counts = check.counts()
    check.close()
    return outcome, counts


@pytest.mark.parametrize("producer", ["sync", "async"])
def test_an_add_whose_reply_is_lost_is_not_resent(proxy: DropReplyProxy, redis_url: str, producer: str) -> None:
    # Given a connection reset right after add.lua ran (its reply lost)
    outcome, counts = _add_with_lost_reply(producer, proxy, redis_url)
    assert proxy.fired.is_set()
    # Then the caller is told (it may retry with a job_id), and exactly one job was written:
    # warm, the one whose reply was lost, and t2
    assert isinstance(outcome, RedisUnavailable), outcome
    assert counts["waiting"] == 3, counts
