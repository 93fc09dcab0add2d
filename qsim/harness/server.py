"""A throwaway ``redis-server`` on a free port, in a folder of its own.

``qsim run`` and ``qsim compare`` start one when no ``--redis`` is given (the
embedded default: nothing existing is touched), and the test session starts
one for the whole run (never the developer's Redis on 6379).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

import redis

from qsim.errors import HarnessError

__all__ = ["RedisServer", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process the caller owns; start, stop, kill, restart it.

    ``workdir``: its folder (its log; no data is saved). None: a temporary folder of
    its own, removed when the object goes (a notebook's ``qsim.RedisServer().start()``);
    a server still running then, or at interpreter exit, is stopped.
    """

    def __init__(self, workdir: Path | None = None, *, port: int | None = None,
                 extra_args: list[str] | None = None, run_under: list[str] | None = None) -> None:
        if shutil.which("redis-server") is None:
            raise HarnessError("redis-server is not on PATH: install Redis >= 6.2 (e.g. apt-get install redis-server) or pass --redis URL")
        self.workdir = Path(tempfile.mkdtemp(prefix="qsim-redis-") if workdir is None else workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if workdir is None:
            weakref.finalize(self, shutil.rmtree, str(self.workdir), True)
        self.port = port or free_port()
        self.extra_args = list(extra_args or [])
        #: A command the server runs under, such as ``["valgrind", "--tool=callgrind"]`` (benchmarks).
        self.run_under = list(run_under or [])
        self.proc: subprocess.Popen[bytes] | None = None
        self._stop_at_exit: weakref.finalize[[subprocess.Popen[bytes]], RedisServer] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> "RedisServer":
        args = [
            *self.run_under, "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.workdir), "--save", "", "--appendonly", "no",
            "--logfile", str(self.workdir / "redis.log"), *self.extra_args,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._stop_at_exit = weakref.finalize(self, _terminate, self.proc)
        deadline = time.monotonic() + timeout
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        self.kill()  # a server that answers nothing must not outlive the caller
                        raise HarnessError(f"redis-server did not start on port {self.port}; see {self.workdir / 'redis.log'}")
                    time.sleep(0.02)
        finally:
            client.close()

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._stop_at_exit is not None:
            self._stop_at_exit.detach()

    def __repr__(self) -> str:
        return f"RedisServer({self.url}, {'running' if self.proc is not None else 'stopped'})"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server its owner forgot (the owner went, or the interpreter exits)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
