"""benchmarks/redis_cost.py's qsim side on a real redis-server, small: the add modes it compares.

The benchmark itself (BullMQ beside qsim, 3,000 jobs, several runs) is not run in the suite; this checks
that what it measures for qsim holds together: a job added in a batch costs Redis fewer commands and
less CPU than one added by a call of its own, and the drain after it is the same work.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[2]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("qsim_bench_redis_cost", ROOT / "benchmarks" / "redis_cost.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_job_added_in_a_batch_costs_redis_less_than_one_added_alone(redis_url: str) -> None:
    bench = _benchmark()
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
