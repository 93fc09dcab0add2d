"""A pool run as a user's worker command (qsim/harness/commands.py, command_start.py), with any command: no Node.

The processes report on the ready list after their cold start, get the pool's variables, take the
harness's signals themselves (``exec``), and an autoscaler that stops one SIGKILLs it at the end of its grace.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
import redis

from qsim.bullmq.autoscaling import BullMQAutoscaler, worker_environment
from qsim.harness.commands import CommandProcesses
from qsim.spec.scenario import Scenario
from waiting import wait_until

pytestmark = [pytest.mark.redis]

#: Prints its variables, then idles; ``trap`` decides what SIGTERM does.
IDLE = 'echo "queue=$QSIM_QUEUE id=$QSIM_WORKER_ID concurrency=$QSIM_CONCURRENCY grace=$QSIM_GRACE"; {trap}; ' \
       'while :; do sleep 0.05; done'


def scaled(grace: float = 0.5) -> Scenario:
    return Scenario.from_dict({
        "name": "cmd", "duration": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "constant", "mean": 0.1},
                  "arrival": {"kind": "poisson", "rate": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 3}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 3, "policy": "hpa", "metric": "in_flight", "target": 1.0,
                         "poll": 1.0, "grace": grace}]})


def processes(s: Scenario, url: str, trap: str, tmp_path: Path) -> CommandProcesses:
    pools: CommandProcesses

    def env(pool: str, wid: str) -> dict[str, str]:
        return worker_environment(s, pool, wid, url=url, prefix="bull", queues={"q": "orders"},
                                  grace=pools.grace(pool))

    pools = CommandProcesses(s, url, ["sh", "-c", IDLE.format(trap=trap)], environment=env, prefix="bull",
                             ready_key="t:ready", logdir=tmp_path)
    return pools


def test_a_command_process_waits_for_its_cold_start_gets_its_variables_and_takes_sigterm(
        redis_url: str, tmp_path: Path) -> None:
    # Given a pool whose process runs a shell command that exits 0 on SIGTERM, started with a 1.5 s cold start
    pools = processes(scaled(), redis_url, 'trap "exit 0" TERM', tmp_path)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        begun = time.time()
        (wid,) = pools.start("p", 1, take_work_at=begun + 1.5)
        # Then it reports on the ready list only once its cold start has passed
        got = client.blpop(["t:ready"], timeout=10)
        assert got is not None and got[1] == wid == "p-0"
        assert time.time() - begun >= 1.5
        # And the command itself (not a wrapper) got the pool's variables and takes the SIGTERM
        time.sleep(0.5)
        assert "queue=orders id=p-0 concurrency=3 grace=0.5" in pools.log_tail(wid)
        pools.send(wid, signal.SIGTERM)
        assert pools.procs[wid].wait(5) == 0
    finally:
        pools.stop_all(timeout=2)
        client.close()


def test_a_command_that_cannot_run_exits_127_with_the_reason(redis_url: str, tmp_path: Path) -> None:
    s = scaled()
    pools = CommandProcesses(s, redis_url, ["/nonexistent/worker"], environment=lambda p, w: {}, prefix="bull",
                             ready_key="t:ready", logdir=tmp_path)
    (wid,) = pools.start("p", 1)
    assert pools.procs[wid].wait(15) == 127
    assert "cannot run the worker command '/nonexistent/worker'" in pools.log_tail(wid)


def test_a_stopped_worker_that_ignores_sigterm_is_killed_at_the_end_of_its_grace(redis_url: str,
                                                                                  tmp_path: Path) -> None:
    # Given an autoscaled pool of one process that ignores SIGTERM, grace 0.5 s
    s = scaled(grace=0.5)
    pools = processes(s, redis_url, 'trap "" TERM', tmp_path)
    ids = pools.start("p", 1)
    pools.wait_ready(ids, timeout=15)
    wait_until(lambda: "queue=orders" in pools.log_tail(ids[0]), timeout=10)  # its trap is set

    async def scale_down() -> BullMQAutoscaler:
        scaler = BullMQAutoscaler(s, s.autoscalers[0], pools, url=redis_url, prefix="bull", queues=["orders"],
                                  ready_key="t:ready:p", seed=1, loop_t0=asyncio.get_running_loop().time())
        try:
            # When the autoscaler stops it
            began = time.monotonic()
            scaler.scale_down(1, 0.0)
            await scaler.finish()
            assert 0.4 <= time.monotonic() - began < 5.0
        finally:
            await scaler.close()
        return scaler

    try:
        scaler = asyncio.run(scale_down())
        # Then it was sent SIGKILL once the grace was over, as Kubernetes does, and the autoscaler says so
        assert scaler.killed == ids
        assert pools.procs[ids[0]].returncode == -signal.SIGKILL
    finally:
        pools.stop_all(timeout=2)
