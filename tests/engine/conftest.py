"""Engine test helpers: queues on the session's Redis and worker subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from qsim.engine import Queue

from cluster import RedisClusterServers
from engine_helpers import HELPER, ROOT


@pytest.fixture
def queue(redis_url: str) -> Iterator[Queue]:
    """A sync Queue named 'q' on the flushed session server."""
    q = Queue("q", redis=redis_url)
    yield q
    q.close()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    """A local 3-master Redis Cluster for the session (started on first use)."""
    cluster = RedisClusterServers(tmp_path_factory.mktemp("cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_url(redis_cluster: RedisClusterServers) -> str:
    """``redis+cluster://`` URL of the session's cluster, every node flushed before the test."""
    redis_cluster.flush()
    return redis_cluster.url


@pytest.fixture
def spawn_worker() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start ``worker_proc.py`` subprocesses; kills leftovers at teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(url: str, queue: str = "q", **opts: Any) -> subprocess.Popen[bytes]:
        args = [sys.executable, str(HELPER), url, queue]
        for k, v in opts.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        return p

    yield spawn
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate()
