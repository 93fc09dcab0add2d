"""A stepped load on the real engine with ``qsim advise --watch`` following it.

Used by ``tests/e2e/test_advise_step.py`` (short) and ``benchmarks/advise.py``
(long): a Poisson producer (a thread, the sync :class:`~qsim.engine.Queue`)
whose rate can be changed while it runs, ``qsim worker`` processes running
:func:`sleep_handler` (each job sleeps the service time in its payload), and
``qsim advise --watch S --json --out FILE`` in a process of its own whose JSON
lines are collected. tests/ is on sys.path (conftest; benchmarks add it).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from qsim.calibrate.qsim_source import read_qsim
from qsim.engine import Job, Queue

__all__ = ["sleep_handler", "Producer", "Workers", "AdviceWatch", "waits", "settled", "HERE"]

HERE = Path(__file__).resolve().parent


async def sleep_handler(job: Job) -> None:
    """The workers' handler: sleep the service time the producer drew (``job.data["s"]``)."""
    await asyncio.sleep(float(job.data["s"]))


class Producer(threading.Thread):
    """Adds jobs at Poisson times of ``rate`` per second (changeable while it runs), exponential service."""

    def __init__(self, url: str, queue: str, prefix: str, *, rate: float, mean: float, seed: int = 1) -> None:
        super().__init__(name="stepped-producer", daemon=True)
        self.q = Queue(queue, redis=url, prefix=prefix)
        self.rate, self.mean = rate, mean
        self.rng = np.random.default_rng(seed)
        self.stop_event = threading.Event()
        self.added = 0

    def run(self) -> None:
        due = time.monotonic()
        while not self.stop_event.is_set():
            due += float(self.rng.exponential(1.0 / self.rate))
            pause = due - time.monotonic()
            if pause > 0 and self.stop_event.wait(pause):
                break
            self.q.add("work", {"s": round(float(self.rng.exponential(self.mean)), 6)})
            self.added += 1

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)
        self.q.close()


class Workers:
    """``qsim worker`` processes on one queue (started in this folder, so the handler imports)."""

    def __init__(self, url: str, queue: str, prefix: str, *, concurrency: int, logdir: Path) -> None:
        self.url, self.queue, self.prefix, self.concurrency, self.logdir = url, queue, prefix, concurrency, logdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, count: int) -> None:
        for _ in range(count):
            log = (self.logdir / f"worker-{len(self.procs)}.log").open("wb")
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "qsim", "worker", "stepped_load:sleep_handler", "--queue", self.queue,
                 "--redis", self.url, "--prefix", self.prefix, "--concurrency", str(self.concurrency),
                 "--shutdown-grace", "5"], cwd=HERE, stdout=log, stderr=subprocess.STDOUT))
            log.close()

    def stop(self) -> list[int | None]:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return [p.returncode for p in self.procs]


def _interruptible() -> None:  # a shell may start us with Ctrl-C ignored: the watch must see it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class AdviceWatch(threading.Thread):
    """``qsim advise --watch`` in a process group of its own; ``lines`` holds ``(seconds since start, doc)``."""

    def __init__(self, url: str, queue: str, prefix: str, *, slo: str, window: str, every: float, out: Path,
                 extra: tuple[str, ...] = ()) -> None:
        super().__init__(name="advise-watch", daemon=True)
        self.args = [sys.executable, "-m", "qsim", "advise", "--redis", url, "--queue", queue, "--prefix", prefix,
                     "--slo", slo, "--window", window, "--watch", str(every), "--json", "--out", str(out), *extra]
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self.t0 = time.monotonic()
        self.proc: subprocess.Popen[str] | None = None
        self.stderr = ""

    def run(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, preexec_fn=_interruptible, env=dict(os.environ))
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.append((time.monotonic() - self.t0, json.loads(line)))

    def interrupt(self, timeout: float = 30.0) -> int:
        """Ctrl-C (SIGINT to the whole process group, as a terminal sends it); returns the exit code."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout)
        self.join(5)
        assert self.proc.stderr is not None and self.proc.stdout is not None
        self.stderr = self.proc.stderr.read()
        self.proc.stderr.close()
        self.proc.stdout.close()
        return code

    def latest(self) -> dict[str, Any] | None:
        """The last line with a recommendation (or an explicit none)."""
        for _, doc in reversed(self.lines):
            if "recommended_workers" in doc and doc.get("available", True):
                return doc
        return None


def waits(url: str, queue: str, prefix: str, since: float, until: float) -> np.ndarray:
    """Waits (start of first attempt - enqueue, s) of the jobs enqueued in ``[since, until)`` (Unix time)."""
    m, _, _ = read_qsim(url, [queue], prefix=prefix, since=since)
    j = m.jobs
    j = j[(j["enqueued"] >= since) & (j["enqueued"] < until)]
    return (j["started"] - j["enqueued"]).dropna().to_numpy(float)


def settled(url: str, queue: str, prefix: str, since: float, workers: int, backlog: int = 3) -> bool:
    """True once ``workers`` distinct workers started jobs after ``since`` (Unix time) and at most
    ``backlog`` jobs wait: the new workers run and what piled up before them is gone."""
    m, _, _ = read_qsim(url, [queue], prefix=prefix, since=since)
    j = m.jobs
    running = j[j["started"] >= since]["worker"]
    waiting = int(((j["outcome"] == "unfinished") & j["started"].isna()).sum())
    return bool(running[running != ""].nunique() >= workers and waiting <= backlog)
