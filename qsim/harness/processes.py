"""The worker processes of a scenario's pools: start, wait until ready, signal, stop.

One manager for every runner that starts pools on this machine: ``qsim run``
(:mod:`qsim.harness.run`) and Locust's ``--start-workers``
(:mod:`qsim.loadtest.workers`). It owns

- :class:`PoolProcessSpec`: one process, its command line
  (``python -m qsim.harness.pool_worker``: :meth:`PoolProcessSpec.argv` writes
  it, :meth:`PoolProcessSpec.parse` reads it) made of the engine's
  :class:`~qsim.engine.settings.WorkerSettings` flags, the same as ``qsim worker``'s;
- :class:`WorkerProcesses`: starts processes (``<pool>-<n>``, numbered per
  pool), waits until each has pushed its id to a Redis list (the ready
  list), sends the scenario's events as real signals or new processes
  (:meth:`WorkerProcesses.apply`), and stops them all (SIGTERM, then SIGKILL
  after a timeout);
- :func:`apply_limits` / :func:`restore_limits`: the scenario's queue limits
  (``concurrency_limit``, ``rate_limit``, ``aging``), which live in Redis and
  are shared by every worker of a queue.

Everything here is blocking and thread-safe enough for one caller at a time:
asyncio callers run the waits in a thread (``asyncio.to_thread``); under
Locust, gevent's patched sockets and sleeps make them cooperative.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from qsim.engine import Queue
from qsim.engine.connection import connect
from qsim.engine.keys import QueueKeys
from qsim.engine.settings import WorkerSettings
from qsim.errors import HarnessError
from qsim.spec.scenario import EventSpec, Scenario
from qsim.spec.settings import SharedSettings

__all__ = ["PoolProcessSpec", "WorkerProcesses", "apply_limits", "restore_limits", "EVENT_SIGNALS"]

logger = logging.getLogger(__name__)

#: The signal each signalling event kind sends.
EVENT_SIGNALS = {"sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}


@dataclass(frozen=True, kw_only=True)
class PoolProcessSpec:
    """One pool worker process: its worker's settings and the Redis list it reports to once running.

    Its command line is ``python -m qsim.harness.pool_worker --ready-key KEY`` followed by the
    settings' flags (:meth:`WorkerSettings.to_argv <qsim.engine.settings.WorkerSettings.to_argv>`,
    the same flags as ``qsim worker``): :meth:`argv` writes it, :meth:`parse` reads it back.
    """

    settings: WorkerSettings
    ready_key: str
    take_work_at: float = 0.0  # Unix time before which the process takes no work (a cold start; 0: at once)

    @classmethod
    def for_pool(cls, scenario: Scenario, pool: str, *, redis: str, prefix: str, worker_id: str, ready_key: str,
                 grace: float, take_work_at: float = 0.0) -> PoolProcessSpec:
        """The process ``worker_id`` of ``scenario``'s pool ``pool``: the pool's queues, policy, weights and
        concurrency, every setting of the scenario's ``[engine]`` table that is a worker setting
        (:class:`~qsim.spec.settings.SharedSettings`), the run's Redis and prefix, every completed
        job kept (the run reads them all at the end)."""
        spec = scenario.pool(pool)
        shared = {f.name: getattr(scenario.engine, f.name) for f in fields(SharedSettings)}
        settings = WorkerSettings(**shared, queues=tuple(spec.queues), policy=spec.policy,
                                  weights={q: int(spec.weight(q)) for q in spec.queues}, concurrency=spec.concurrency,
                                  redis=redis, prefix=prefix, worker_id=worker_id, shutdown_grace=grace,
                                  keep_completed=None)
        return cls(settings=settings, ready_key=ready_key, take_work_at=take_work_at)

    def argv(self) -> list[str]:
        """The process's command line (``python -m qsim.harness.pool_worker ...``)."""
        return [sys.executable, "-m", "qsim.harness.pool_worker", f"--ready-key={self.ready_key}",
                f"--take-work-at={self.take_work_at!r}", *self.settings.to_argv()]

    @classmethod
    def parser(cls) -> argparse.ArgumentParser:
        """The argument parser of ``python -m qsim.harness.pool_worker``."""
        p = argparse.ArgumentParser(prog="python -m qsim.harness.pool_worker")
        p.add_argument("--ready-key", required=True, help="Redis list this process pushes its id to once running")
        p.add_argument("--take-work-at", type=float, default=0.0,
                       help="Unix time before which the process takes no work (its cold start; 0: at once)")
        WorkerSettings.add_arguments(p)
        return p

    @classmethod
    def parse(cls, argv: Sequence[str] | None = None) -> PoolProcessSpec:
        """Read a command line written by :meth:`argv` (without the interpreter and module)."""
        args = cls.parser().parse_args(argv)
        return cls(settings=WorkerSettings.from_args(args), ready_key=args.ready_key, take_work_at=args.take_work_at)


class WorkerProcesses:
    """The worker processes of every pool of a scenario, started and signalled like a deployment would.

    Args:
        scenario: Its pools say how many processes, which queues, concurrency, policy;
            its ``sigterm`` events set each pool's grace period.
        redis_url: Redis the workers use.
        prefix: Key prefix of the queues.
        ready_key: The Redis list each process pushes its id to once it runs.
        logdir: Where each process writes its log (default: a temporary folder, removed by :meth:`close`).
        default_grace: A pool's grace when no ``sigterm`` event names it.
    """

    #: Sent before a process that did not stop is killed, for its log (a qsim worker logs what each of its
    #: tasks awaits: :mod:`qsim.engine.eventloop`); None: nothing is sent.
    dump_signal: signal.Signals | None = signal.SIGUSR1

    def __init__(self, scenario: Scenario, redis_url: str, *, prefix: str, ready_key: str,
                 logdir: Path | None = None, default_grace: float = 30.0) -> None:
        if not default_grace >= 0:
            raise ValueError(f"grace must be >= 0 seconds, got {default_grace!r}")
        self.scenario, self.redis_url, self.prefix, self.ready_key = scenario, redis_url, prefix, ready_key
        self.default_grace = default_grace
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if not logdir:
            self._tmp = tempfile.TemporaryDirectory(prefix="qsim-workers-")
            logdir = Path(self._tmp.name)
        self.logdir = Path(logdir)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.pool_of: dict[str, str] = {}
        self._signalled: set[str] = set()
        self._next: dict[str, int] = {}

    def grace(self, pool: str) -> float:
        """Seconds a process of ``pool`` may drain after SIGTERM: its autoscaler's grace, else the longest
        grace of the pool's ``sigterm`` events, else ``default_grace``."""
        scaler = self.scenario.autoscaler(pool)
        if scaler is not None:
            return scaler.grace
        graces = [e.grace for e in self.scenario.events if e.pool == pool and e.kind == "sigterm"]
        return max(graces) if graces else self.default_grace

    def spec(self, pool: str, wid: str, *, ready_key: str | None = None, take_work_at: float = 0.0) -> PoolProcessSpec:
        """The process ``wid`` of ``pool``, as :meth:`start` starts it."""
        return PoolProcessSpec.for_pool(self.scenario, pool, redis=self.redis_url, prefix=self.prefix, worker_id=wid,
                                        ready_key=ready_key or self.ready_key, grace=self.grace(pool),
                                        take_work_at=take_work_at)

    def argv(self, pool: str, wid: str, *, ready_key: str, take_work_at: float) -> list[str]:
        """The command line of process ``wid`` of ``pool`` (here: a qsim pool worker, :meth:`spec`)."""
        return self.spec(pool, wid, ready_key=ready_key, take_work_at=take_work_at).argv()

    def env(self, pool: str, wid: str) -> dict[str, str] | None:
        """The environment of process ``wid`` of ``pool`` (None: this process's own)."""
        return None

    def start(self, pool: str, count: int, *, ready_key: str | None = None, take_work_at: float = 0.0) -> list[str]:
        """Start ``count`` processes of ``pool``; their ids (``<pool>-<n>``, numbered on per pool).

        ``ready_key``: the list they report to (default: the manager's); ``take_work_at``: the
        Unix time before which they take no work (a cold start; 0: at once).
        """
        ids = []
        for _ in range(count):
            n = self._next.get(pool, 0)
            self._next[pool] = n + 1
            wid = f"{pool}-{n}"
            with (self.logdir / f"{wid}.log").open("wb") as log:
                argv = self.argv(pool, wid, ready_key=ready_key or self.ready_key, take_work_at=take_work_at)
                self.procs[wid] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                   start_new_session=True, env=self.env(pool, wid))
            self.pool_of[wid] = pool
            ids.append(wid)
        return ids

    def start_all(self) -> list[str]:
        """Start every pool's ``workers`` processes; their ids."""
        ids = [w for p in self.scenario.pools for w in self.start(p.name, p.workers)]
        logger.info("started %d worker processes: %s", len(ids), ", ".join(ids))
        return ids

    def wait_ready(self, ids: Sequence[str] | None = None, timeout: float = 60.0) -> None:
        """Block until the processes ``ids`` (default: all) reported that they run.

        Raises:
            HarnessError: A process exited (its log tail is in the message) or
                did not start within ``timeout`` seconds.
        """
        want = set(self.procs if ids is None else ids)
        client: Any = connect(self.redis_url, socket_connect_timeout=5.0)
        deadline = time.monotonic() + timeout
        try:
            while want:
                got = client.blpop([self.ready_key], timeout=0.5)
                if got:
                    want.discard(got[1])
                for wid in sorted(want):
                    proc = self.procs[wid]
                    if proc.poll() is not None:
                        tail = self.log_tail(wid)
                        raise HarnessError(f"worker process {wid} exited with {proc.returncode} at start:\n{tail}")
                if want and time.monotonic() > deadline:
                    raise HarnessError(f"worker processes {sorted(want)} did not start within {timeout:.0f} s")
        finally:
            client.close()

    def log_tail(self, wid: str, chars: int = 2000) -> str:
        """The end of process ``wid``'s log."""
        path = self.logdir / f"{wid}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def alive(self, pool: str) -> list[str]:
        """The processes of ``pool`` that run and were not signalled, oldest first."""
        return [w for w, p in self.procs.items()
                if self.pool_of[w] == pool and p.poll() is None and w not in self._signalled]

    def send(self, wid: str, sig: signal.Signals) -> None:
        """Send ``sig`` to process ``wid`` (if it still runs); it counts as signalled."""
        proc = self.procs[wid]
        if proc.poll() is None:
            proc.send_signal(sig)
        self._signalled.add(wid)

    def signal(self, pool: str, count: int, sig: signal.Signals) -> list[str]:
        """Send ``sig`` to the ``count`` oldest live processes of ``pool``; their ids."""
        chosen = self.alive(pool)[:count]
        for wid in chosen:
            self.procs[wid].send_signal(sig)
            self._signalled.add(wid)
        return chosen

    def holding(self, pool: str) -> dict[str, int]:
        """How many jobs each process of ``pool`` holds now (the workers' ids on the active jobs of
        its queues, as ``fetch.lua`` writes them; a process holding none is absent)."""
        spec = next(p for p in self.scenario.pools if p.name == pool)
        client: Any = connect(self.redis_url, socket_connect_timeout=5.0)
        try:
            counts: dict[str, int] = {}
            for name in spec.queues:
                keys = QueueKeys(name, prefix=self.prefix)
                ids = client.zrange(keys.active, 0, -1)
                with client.pipeline(transaction=False) as pipe:
                    for job_id in ids:
                        pipe.hget(keys.job(job_id), "worker")
                    for wid in pipe.execute():
                        if wid is not None:
                            counts[wid] = counts.get(wid, 0) + 1
            return counts
        finally:
            client.close()

    def kill_busiest(self, pool: str, count: int) -> list[str]:
        """SIGKILL the ``count`` live processes of ``pool`` holding the most jobs, the oldest among
        equals (the kernel's OOM killer takes the largest process; a worker grows with what it
        holds); their ids. The model chooses the same way (:mod:`qsim.model.events`)."""
        held = self.holding(pool)
        chosen = sorted(self.alive(pool), key=lambda wid: -held.get(wid, 0))[:count]  # stable: oldest first
        for wid in chosen:
            self.send(wid, signal.SIGKILL)
        return chosen

    def apply(self, event: EventSpec, *, ready_timeout: float = 60.0) -> list[str]:
        """Carry out one scenario event now: ``start`` starts ``count`` processes and waits until
        they run; ``sigterm`` / ``sigkill`` signal ``count`` live ones. The processes' ids."""
        if event.kind == "start":
            ids = self.start(event.pool, event.count)
            self.wait_ready(ids, timeout=ready_timeout)
        elif event.kind == "sigkill":
            ids = self.kill_busiest(event.pool, event.count)
        else:
            ids = self.signal(event.pool, event.count, EVENT_SIGNALS[event.kind])
        logger.info("%s %s: %s", event.kind, event.pool, ", ".join(ids) or "no process left")
        return ids

    def stop_all(self, timeout: float | None = None) -> dict[str, int | None]:
        """SIGTERM every live process, wait up to ``timeout`` (default: the longest grace + 5 s),
        then SIGKILL the rest; the exit codes by worker id."""
        if timeout is None:
            timeout = max([self.grace(p.name) for p in self.scenario.pools] + [0.0]) + 5.0
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for wid, proc in self.procs.items():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                if self.dump_signal is not None:
                    proc.send_signal(self.dump_signal)
                    time.sleep(1.0)
                logger.warning("worker process %s did not stop within %.0f s: killed; the end of its log:\n%s",
                               wid, timeout, self.log_tail(wid, 6000))
                proc.kill()
                proc.wait()
        return self.exit_codes()

    def exit_codes(self) -> dict[str, int | None]:
        """Each process's exit code (None: still running)."""
        return {w: p.poll() for w, p in self.procs.items()}

    def close(self) -> None:
        """Remove the temporary log folder, if this manager made one (after :meth:`stop_all`)."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def apply_limits(scenario: Scenario, redis_url: str, prefix: str, *,
                 keep_completed: bool = False) -> dict[str, dict[str, Any]]:
    """Give each of the scenario's queues its limits; returns the limits they had (for :func:`restore_limits`).

    Args:
        keep_completed: Also keep every completed job (no retention trim): for a
            run that reads them all at the end, under a prefix of its own.
    """
    found: dict[str, dict[str, Any]] = {}
    for spec in scenario.queues:
        with Queue(spec.name, redis=redis_url, prefix=prefix) as q:
            found[spec.name] = q.limits()
            if keep_completed:
                q.set_retention(keep_count=None)
            q.set_concurrency_limit(spec.concurrency_limit)
            rl = spec.rate_limit
            q.set_rate_limit(rl.max if rl else None, rl.per if rl else 1.0, key=rl.key if rl else None)
            q.set_aging(spec.aging if spec.aging > 0 else None)
    return found


def restore_limits(redis_url: str, prefix: str, found: Mapping[str, Mapping[str, Any]]) -> None:
    """Put back the limits :func:`apply_limits` found."""
    for name, old in found.items():
        with Queue(name, redis=redis_url, prefix=prefix) as q:
            q.set_concurrency_limit(old["concurrency_limit"])
            rl = old["rate_limit"]
            q.set_rate_limit(rl["max"] if rl else None, rl["per"] if rl else 1.0, key=rl["key"] if rl else None)
            q.set_aging(old["aging"])
