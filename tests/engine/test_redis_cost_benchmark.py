"""benchmarks/redis_cost.py's qsim side on a real redis-server, small: the add modes it compares.

The benchmark itself (BullMQ beside qsim, 3,000 jobs, several runs) is not run in the suite; this checks
that what it measures for qsim holds together: a job added in a batch costs Redis fewer commands and
less CPU than one added by a call of its own, and the drain after it is the same work.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from benchmark_module import load_benchmark
from redis_server import RedisServer

pytestmark = pytest.mark.redis


def test_a_job_added_in_a_batch_costs_redis_less_than_one_added_alone(redis_url: str) -> None:
    bench = load_benchmark("redis_cost")
    # Given 600 no-op jobs added one call each, then 600 added in one add_bulk call, each drained by a worker
    one = bench.qsim_run(redis_url, 600, 5)
    bulk = bench.qsim_run(redis_url, 600, 5, bulk=True)
    # Then the batch saves each job the script call and the queue-wide reads (time, settings, wake-up marker)
    # that one call per job pays: a count, not a timing
    assert bulk["add_commands"] < one["add_commands"] - 2
    # and Redis's CPU for the adds (the same server, measured in this test: a ratio, not a figure) is far less
    assert bulk["add_us"] < 0.6 * one["add_us"]
    # while the drain is the same work either way: as many commands per job (give or take a batch's)
    assert abs(bulk["drain_commands"] - one["drain_commands"]) < 1.0
    assert bulk["commands"] == pytest.approx(bulk["add_commands"] + bulk["drain_commands"])


@pytest.mark.long
@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="valgrind (callgrind) is not installed")
def test_redis_instructions_per_job_repeat_and_a_batch_costs_fewer(tmp_path: Path) -> None:
    """benchmarks/redis_instructions.py's counter on a redis-server under callgrind (slow: the long run)."""
    cost, instructions = load_benchmark("redis_cost"), load_benchmark("redis_instructions")
    out = tmp_path / "callgrind.out"
    server = RedisServer(tmp_path, run_under=["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
    server.start(timeout=60)
    try:
        counter = instructions.Counter(server, out)
        cost.qsim_run(server.url, 50, 5)  # loads the scripts (compiled once per server), as the benchmark does
        # Given the same 1,000 jobs added in one batch and drained, twice, then added one call each and drained
        runs = []
        for bulk in (True, True, False):
            cost.qsim_run(server.url, 1000, 5, bulk=bulk, mark=counter.mark)
            runs.append(counter.phases(1000))
    finally:
        server.stop()
    (add1, drain1), (add2, drain2), (add_one, _) = runs
    # Then the same work counts the same instructions (a timing would move by a third on a busy machine)
    assert add2 == pytest.approx(add1, rel=0.05) and drain2 == pytest.approx(drain1, rel=0.05)
    # and a job added by a call of its own costs Redis more than one added in a batch
    assert add_one > 1.3 * add1
