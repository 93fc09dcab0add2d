"""A real BullMQ (Node.js) to test and benchmark against: install it, run its producer and worker.

``bullmq`` is installed with npm into a cache folder, one per version
(``${XDG_CACHE_HOME:-~/.cache}/qsim/node/bullmq-<version>``), the first time it
is asked for; ``tests/run.sh`` does it up front. The scripts are
``tests/node/producer.js`` (a schedule: a fixed plan or random arrivals) and
``tests/node/worker.js`` (a known service distribution, concurrency, failures).

    from bullmq_node import BullMQ
    bq = BullMQ("5")                                  # installs on first use
    with bq.worker(url, "orders", concurrency=4, service={"*": {"kind": "exponential", "mean": 0.05}}):
        bq.produce(url, "orders", types=[{"name": "cut", "rate": 20}], duration=5)
        bq.wait_drained(url, "orders", expected=100)

Command line: ``python tests/bullmq_node.py install`` installs every pinned
version when ``node`` and ``npm`` are on PATH (and says so when they are not).
Only the standard library is imported at module level (``redis`` when waiting).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["VERSIONS", "BESIDE", "NodeMissing", "node_missing", "cache_dir", "install", "BullMQ"]

#: Pinned BullMQ versions by major: the newest 6.x, the 5.x the benchmarks use, and a 4.x for its older layout.
VERSIONS = {"6": "6.7.0", "5": "5.81.5", "4": "4.18.3"}
#: npm packages installed beside a BullMQ version (6.x takes its Redis client as a peer dependency).
BESIDE = {"6": ["ioredis@6.0.0"]}
SCRIPTS = Path(__file__).resolve().parent / "node"


class NodeMissing(RuntimeError):
    """Raised when node or npm is not on PATH (tests skip on it, with its message as the reason)."""


def node_missing() -> str | None:
    """Why BullMQ cannot run here (None: node and npm are on PATH)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH: the BullMQ (Node.js) tests need Node.js >= 18 and npm"
    return None


def cache_dir() -> Path:
    """Where BullMQ installs live: ``${XDG_CACHE_HOME:-~/.cache}/qsim/node``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qsim" / "node"


def install(version: str = VERSIONS["5"], *, quiet: bool = True) -> Path:
    """Install ``bullmq@version`` into the cache once (file-locked); returns its ``node_modules``."""
    why = node_missing()
    if why:
        raise NodeMissing(why)
    folder = cache_dir() / f"bullmq-{version}"
    modules = folder / "node_modules"
    beside = BESIDE.get(version.split(".")[0], [])
    wanted = ["bullmq", *(spec.rsplit("@", 1)[0] for spec in beside)]

    def installed() -> bool:
        return all((modules / name / "package.json").exists() for name in wanted)

    if installed():
        return modules
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed():
            (folder / "package.json").write_text('{"name": "qsim-bullmq-cache", "private": true}\n')
            cmd = ["npm", "install", "--no-audit", "--no-fund", "--no-save", f"bullmq@{version}", *beside]
            done = subprocess.run(cmd, cwd=folder, capture_output=quiet, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"npm install bullmq@{version} failed in {folder}:\n{done.stderr[-2000:]}")
    return modules


class BullMQ:
    """One installed BullMQ version and the scripts that drive it."""

    def __init__(self, major: str = "5") -> None:
        self.version = VERSIONS.get(major, major)
        self.modules = install(self.version)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "NODE_PATH": str(self.modules)}

    def _config(self, url: str, queue: str, prefix: str, **extra: Any) -> str:
        return json.dumps({"redis": url, "queue": queue, "prefix": prefix, **extra})

    @contextlib.contextmanager
    def worker(self, url: str, queue: str, *, prefix: str = "bull", concurrency: int = 1, name: str | None = None,
               service: dict[str, Any] | None = None, fail_prob: dict[str, float] | None = None,
               poison_prob: dict[str, float] | None = None, seed: int = 1,
               ready_timeout: float = 30.0) -> Iterator[subprocess.Popen[str]]:
        """A running worker process (see tests/node/worker.js); SIGTERM and a graceful close at exit."""
        cfg = self._config(url, queue, prefix, concurrency=concurrency, name=name, service=service or {},
                           fail_prob=fail_prob or {}, poison_prob=poison_prob or {}, seed=seed)
        proc = subprocess.Popen(["node", str(SCRIPTS / "worker.js"), cfg], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self._env(), start_new_session=True)
        try:
            deadline = time.monotonic() + ready_timeout
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready" or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"BullMQ worker did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()

    def produce(self, url: str, queue: str, *, prefix: str = "bull", plan: list[list[Any]] | None = None,
                types: list[dict[str, Any]] | None = None, duration: float = 10.0, seed: int = 1,
                opts: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Run the producer to the end (see tests/node/producer.js); returns its summary line."""
        cfg = self._config(url, queue, prefix, plan=plan, types=types, duration=duration, seed=seed, opts=opts or {})
        limit = timeout if timeout is not None else (max((p[0] for p in plan), default=0) if plan else duration) + 60
        done = subprocess.run(["node", str(SCRIPTS / "producer.js"), cfg], capture_output=True, text=True,
                              env=self._env(), timeout=limit)
        if done.returncode != 0:
            raise RuntimeError(f"BullMQ producer failed ({done.returncode}): {done.stderr[-2000:]}")
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    @staticmethod
    def wait_drained(url: str, queue: str, *, prefix: str = "bull", expected: int, timeout: float = 60.0) -> bool:
        """Wait until ``expected`` jobs are completed or failed and none is waiting, delayed or active."""
        import redis

        client = redis.Redis.from_url(url)
        base = f"{prefix}:{queue}:"
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                pipe = client.pipeline()
                for key in ("completed", "failed", "delayed", "prioritized", "waiting-children"):
                    pipe.zcard(base + key)
                for key in ("wait", "active", "paused"):
                    pipe.llen(base + key)
                done, failed, delayed, prio, kids, wait, active, paused = pipe.execute()
                if done + failed >= expected and not (delayed + prio + kids + wait + active + paused):
                    return True
                time.sleep(0.1)
            return False
        finally:
            client.close()


def main(argv: list[str]) -> int:
    if argv[1:2] != ["install"]:
        print("usage: python tests/bullmq_node.py install", file=sys.stderr)
        return 2
    why = node_missing()
    if why:
        print(f"skipping the BullMQ install: {why}", file=sys.stderr)
        return 0
    for version in VERSIONS.values():
        print(f"bullmq@{version}: {install(version, quiet=False)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
