"""PauseWatch (qsim/harness/pauses.py) sees its process stopped, and nothing on a running machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from qsim.harness.pauses import PAUSE_LIMIT, PauseWatch

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
