"""Session fixtures: one throwaway redis-server on a free port for the whole run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).parent))
from bullmq_node import node_missing  # noqa: E402
from hypothesis_budget import register_profiles  # noqa: E402
from redis_server import RedisServer  # noqa: E402

register_profiles()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--long", action="store_true",
                     help="also run the long end-to-end tests (marker 'long'); `-m long` runs only them")


def pytest_configure(config: pytest.Config) -> None:
    """Under CI (``CI=true``) the BullMQ tests must run: a missing Node.js fails the run instead of skipping them."""
    why = node_missing()
    if os.environ.get("CI") == "true" and why:
        raise pytest.UsageError(f"CI runs the BullMQ tests, but {why} (tests/run.sh installs them with apt-get)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The default run leaves the ``long`` tests out (they show as deselected) unless ``--long`` is given."""
    if config.getoption("--long"):
        return
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if item.get_closest_marker("long") is None]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The session's redis-server (started on first use, stopped at the end)."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """URL of the session's server, flushed before each test."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A sync client on the flushed session server."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of the test's own, which the test may kill, pause or restart."""
    server = RedisServer(tmp_path / "own-redis").start()
    yield server
    server.stop()
