"""The scenario's worker pools as local processes, for a self-contained load test.

Against staging the workers are already deployed; on a laptop
``--start-workers`` starts each pool of the scenario as
``python -m qsim.harness.pool_worker`` processes (the synthetic handler that
sleeps the planned service time), like ``qsim run`` does. It also gives the
scenario's queues their limits (``concurrency_limit``, ``rate_limit``,
``aging``: settings stored in Redis, shared by every worker of the queue),
and puts back the limits it found when it stops. Nothing here imports Locust.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from qsim.engine import Queue
from qsim.engine.connection import connect
from qsim.errors import HarnessError, QsimError
from qsim.scenario import Scenario

__all__ = ["WorkerPool"]

logger = logging.getLogger(__name__)


class WorkerPool:
    """Starts, waits for and stops the worker processes of every pool of a scenario.

    Args:
        scenario: Its ``pools`` say how many processes, which queues, concurrency, policy.
        redis_url: Redis the workers use.
        prefix: Key prefix of the queues.
        run_id: Names the ready list ``<prefix>:loadtest:<run_id>:ready`` (emptied by :meth:`wait_ready`).
        grace: Seconds a worker may drain its active jobs when stopped.
        logdir: Where each process writes its log (default: a temporary folder).
    """

    def __init__(self, scenario: Scenario, redis_url: str, *, prefix: str, run_id: str, grace: float = 5.0,
                 logdir: Path | None = None) -> None:
        if not grace >= 0:
            raise ValueError(f"grace must be >= 0 seconds, got {grace!r}")
        self.scenario, self.redis_url, self.prefix, self.grace = scenario, redis_url, prefix, grace
        self.ready_key = f"{prefix}:loadtest:{run_id}:ready"
        self._tmp = None if logdir else tempfile.TemporaryDirectory(prefix="qsim-loadtest-")
        self.logdir = logdir or Path(self._tmp.name)  # type: ignore[union-attr]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._found: dict[str, dict[str, Any]] = {}

    def apply_limits(self) -> None:
        """Give each queue the scenario's limits, remembering the ones it had."""
        for spec in self.scenario.queues:
            with Queue(spec.name, redis=self.redis_url, prefix=self.prefix) as q:
                self._found[spec.name] = q.limits()
                q.set_concurrency_limit(spec.concurrency_limit)
                rl = spec.rate_limit
                q.set_rate_limit(rl.max if rl else None, rl.per if rl else 1.0, key=rl.key if rl else None)
                q.set_aging(spec.aging if spec.aging > 0 else None)

    def restore_limits(self) -> None:
        """Put back the limits :meth:`apply_limits` found."""
        for name, old in self._found.items():
            with Queue(name, redis=self.redis_url, prefix=self.prefix) as q:
                q.set_concurrency_limit(old["concurrency_limit"])
                rl = old["rate_limit"]
                q.set_rate_limit(rl["max"] if rl else None, rl["per"] if rl else 1.0, key=rl["key"] if rl else None)
                q.set_aging(old["aging"])
        self._found.clear()

    def start(self) -> list[str]:
        """Apply the queue limits, then start every pool's processes; returns their worker
        ids (``<pool>-<n>``)."""
        self.apply_limits()
        eng = self.scenario.engine
        ids = []
        for pool in self.scenario.pools:
            for n in range(pool.workers):
                wid = f"{pool.name}-{n}"
                args = [sys.executable, "-m", "qsim.harness.pool_worker", "--redis", self.redis_url,
                        "--prefix", self.prefix, "--concurrency", str(pool.concurrency), "--policy", pool.policy,
                        "--lock-duration", str(eng.lock_duration), "--stalled-interval", str(eng.stalled_interval),
                        "--max-stalled", str(eng.max_stalled), "--grace", str(self.grace),
                        "--worker-id", wid, "--ready-key", self.ready_key]
                for q in pool.queues:
                    args += ["--queue", q, "--weight", f"{q}={int(pool.weight(q))}"]
                with (self.logdir / f"{wid}.log").open("wb") as log:
                    self.procs[wid] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                                       start_new_session=True)
                ids.append(wid)
        logger.info("started %d worker processes: %s", len(ids), ", ".join(ids))
        return ids

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until every process reported it is running.

        Raises:
            HarnessError: A process exited (its log tail is in the message) or
                did not start within ``timeout`` seconds.
        """
        client: Any = connect(self.redis_url, socket_connect_timeout=5.0)
        want = set(self.procs)
        deadline = time.monotonic() + timeout
        try:
            while want:
                got = client.blpop([self.ready_key], timeout=0.5)
                if got:
                    want.discard(got[1])
                for wid in sorted(want):
                    proc = self.procs[wid]
                    if proc.poll() is not None:
                        tail = (self.logdir / f"{wid}.log").read_text(errors="replace")[-2000:]
                        raise HarnessError(f"worker process {wid} exited with {proc.returncode} at start:\n{tail}")
                if time.monotonic() > deadline:
                    raise HarnessError(f"worker processes {sorted(want)} did not start within {timeout:.0f} s")
        finally:
            client.close()

    def stop(self, timeout: float | None = None) -> dict[str, int | None]:
        """SIGTERM every process, wait up to ``timeout`` (default grace + 5 s), then SIGKILL; put
        back the queues' limits; returns the exit codes."""
        timeout = self.grace + 5.0 if timeout is None else timeout
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for wid, proc in self.procs.items():
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                logger.warning("worker process %s did not stop within %.0f s: killed", wid, timeout)
                proc.kill()
                proc.wait()
        try:
            self.restore_limits()
        except QsimError as e:
            logger.warning("could not put back the queues' limits: %s", e)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        return {w: p.returncode for w, p in self.procs.items()}
