"""PauseWatch (qsim/harness/pauses.py) sees its process stopped, and nothing on a running machine; a paused run
is measured again, at most REMEASURE times."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from qsim.harness.pauses import PAUSE_LIMIT, REMEASURE, PauseWatch, paused_part, remeasured

CHILD = """
import sys, time
from qsim.harness.pauses import PauseWatch
with PauseWatch() as watch:
    print("watching", flush=True)
    time.sleep(1.5)
print(f"{watch.longest:.4f}", flush=True)
"""


def test_a_process_stopped_for_half_a_second_sees_that_pause() -> None:
    with subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "watching"
        time.sleep(0.2)
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.6)
        os.kill(child.pid, signal.SIGCONT)
        longest = float(child.stdout.readline())
        assert child.wait(10) == 0
    assert 0.5 <= longest < 1.5, longest


def test_a_running_process_sees_no_pause_even_beside_busy_threads() -> None:
    def spin(until: float) -> None:
        while time.monotonic() < until:
            pass

    with PauseWatch() as watch:
        spin(time.monotonic() + 0.5)  # holds the GIL as much as Python lets it: the watch still gets its turns
    assert watch.longest < PAUSE_LIMIT and not watch.paused, watch.longest


@pytest.mark.parametrize(("longest", "runs"), [
    ([0.0], 1),  # not paused: measured once
    ([0.8, 0.01], 2),  # paused once, then a clean run
    ([0.8, 0.6, 0.5, 0.4], REMEASURE + 1),  # paused each time: at most REMEASURE runs again, the last one kept
])
def test_a_paused_run_is_measured_again_and_the_last_run_kept(longest: list[float], runs: int) -> None:
    attempts: list[int] = []

    async def once(attempt: int) -> tuple[str, float]:
        attempts.append(attempt)
        return f"run {attempt}", longest[attempt]

    result, pauses = asyncio.run(remeasured(once, "the engine"))
    assert attempts == list(range(runs)) and result == f"run {runs - 1}"
    assert pauses == longest[:runs]
    part = paused_part(pauses)
    assert (part is None) == (max(pauses) < PAUSE_LIMIT)
    assert part is None or part == {"runs": pauses, "limit": PAUSE_LIMIT}
