"""A throwaway local Redis Cluster for tests: 3 masters, no replicas, free ports, a temp dir."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis

from redis_server import RedisServer


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port(taken: set[int]) -> int:
    """A free port P <= 55535 whose cluster bus port P + 10000 is free too."""
    for _ in range(1000):
        p = random.randint(20000, 55000)
        if p not in taken and p + 10000 not in taken and _bindable(p) and _bindable(p + 10000):
            return p
    raise RuntimeError("no free port pair for a cluster node")


class RedisClusterServers:
    """Three ``redis-server --cluster-enabled yes`` joined by ``redis-cli --cluster create``."""

    def __init__(self, workdir: Path, masters: int = 3) -> None:
        if shutil.which("redis-cli") is None:
            raise RuntimeError("redis-cli is not on PATH: install Redis >= 6.2 (e.g. apt-get install redis-tools)")
        self.workdir = Path(workdir)
        self.nodes: list[RedisServer] = []
        taken: set[int] = set()
        for i in range(masters):
            port = cluster_port(taken)
            taken |= {port, port + 10000}
            d = self.workdir / f"node{i}"
            self.nodes.append(RedisServer(d, port=port, extra_args=[
                "--cluster-enabled", "yes", "--cluster-config-file", str(d / "nodes.conf"),
                "--cluster-node-timeout", "5000"]))

    @property
    def url(self) -> str:
        """The engine's URL for this cluster (any node; the client discovers the rest)."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def start(self, timeout: float = 20.0) -> RedisClusterServers:
        try:
            for n in self.nodes:
                n.start()
            addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
            subprocess.run(["redis-cli", "--cluster", "create", *addrs, "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, capture_output=True, timeout=timeout)
            deadline = time.monotonic() + timeout
            for n in self.nodes:
                c = redis.Redis(port=n.port, decode_responses=True)
                try:
                    while c.execute_command("CLUSTER", "INFO").find("cluster_state:ok") < 0:
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"cluster not ok after {timeout} s (node {n.port})")
                        time.sleep(0.05)
                finally:
                    c.close()
        except BaseException:
            self.stop()
            raise
        return self

    def flush(self) -> None:
        for n in self.nodes:
            c = redis.Redis(port=n.port)
            try:
                c.flushall()
                c.script_flush()
            finally:
                c.close()

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
