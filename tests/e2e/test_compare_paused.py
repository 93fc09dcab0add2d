"""A comparison whose engine run the machine paused measures the engine again (qsim/harness/pauses.py).

The pause is real: the ``qsim compare`` process is stopped with SIGSTOP for 0.8 s while its first engine
run is under way (its workers and Redis go on; its arrivals stop), as a frozen virtual machine would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from qsim.harness.pauses import PAUSE_LIMIT
from waiting import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.mark.timeout(150)
def test_a_comparison_whose_engine_run_was_paused_is_measured_again_and_says_so(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    argv = [sys.executable, "-m", "qsim", "compare", "steady", "--jobs", "150", "--check", "--json", "--redis",
            redis_url]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as compare:
        wait_until(lambda: client.keys("qsim-run-*:{work}:completed"), timeout=60)  # the first run is under way
        os.kill(compare.pid, signal.SIGSTOP)
        time.sleep(0.8)
        os.kill(compare.pid, signal.SIGCONT)
        out, err = compare.communicate(timeout=120)
    client.close()
    doc = json.loads(out)
    runs = doc["paused"]["runs"]
    assert len(runs) == 2 and runs[0] >= 0.7 and runs[1] < PAUSE_LIMIT, (runs, err[-2000:])
    assert doc["paused"]["limit"] == PAUSE_LIMIT
    assert "paused the engine's run for" in err and "measuring it again" in err, err[-2000:]
    assert doc["engine"]["jobs"]["arrived"] == doc["model"]["jobs"]["arrived"] and doc["engine"]["jobs"]["lost"] == 0
    assert doc["check"]["passed"], doc["check"]["failed"]
    assert compare.returncode == 0, err[-2000:]


def test_the_table_says_the_engine_was_measured_again() -> None:
    from qsim.analysis.fidelity.compare import paused_note

    again = paused_note({"runs": [3.31, 0.004], "limit": PAUSE_LIMIT})
    assert "paused the engine's run for 3.31 s" in again and "measured again, the figures" in again
    assert "which was paused too" not in again
    twice = paused_note({"runs": [3.31, 1.2, 0.6], "limit": PAUSE_LIMIT})
    assert "for 3.31 s" in twice and "measured again 2 times" in twice and "paused too (0.60 s)" in twice
