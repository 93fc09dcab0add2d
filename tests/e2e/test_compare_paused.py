"""A comparison whose measured run the machine paused measures it again (qsim/harness/pauses.py), on qsim's
engine and on BullMQ workers alike.

The pause is real: the ``qsim compare`` process is stopped with SIGSTOP for 0.8 s while its first run is
under way (its workers and Redis go on; its arrivals stop), as a frozen virtual machine would stop it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from bullmq_node import SCRIPTS, BullMQ, node_missing  # type: ignore[import-not-found]

from qsim.harness.pauses import PAUSE_LIMIT
from waiting import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def paused_compare(argv: list[str], redis_url: str, started: str) -> tuple[dict[str, Any], str, int]:
    """Run ``qsim compare ARGV --json``, stopped for 0.8 s once Redis has a key matching ``started`` (its first
    run under way); its JSON document, its stderr and its exit code."""
    client = redis.Redis.from_url(redis_url)
    with subprocess.Popen([sys.executable, "-m", "qsim", "compare", *argv, "--json", "--redis", redis_url],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as compare:
        wait_until(lambda: client.keys(started) or compare.poll() is not None, timeout=60)
        assert compare.poll() is None, compare.communicate()[1][-2000:]
        os.kill(compare.pid, signal.SIGSTOP)
        time.sleep(0.8)
        os.kill(compare.pid, signal.SIGCONT)
        out, err = compare.communicate(timeout=120)
    client.close()
    return json.loads(out), err, compare.returncode


@pytest.mark.timeout(150)
def test_a_comparison_whose_engine_run_was_paused_is_measured_again_and_says_so(redis_url: str) -> None:
    doc, err, code = paused_compare(["steady", "--jobs", "150", "--check"], redis_url, "qsim-run-*:{work}:completed")
    runs = doc["paused"]["runs"]
    assert len(runs) == 2 and runs[0] >= 0.7 and runs[1] < PAUSE_LIMIT, (runs, err[-2000:])
    assert doc["paused"]["limit"] == PAUSE_LIMIT
    assert "paused the engine's run for" in err and "measuring it again" in err, err[-2000:]
    assert doc["engine"]["jobs"]["arrived"] == doc["model"]["jobs"]["arrived"] and doc["engine"]["jobs"]["lost"] == 0
    assert doc["check"]["passed"], doc["check"]["failed"]
    assert code == 0, err[-2000:]


@pytest.mark.timeout(200)
@pytest.mark.skipif(node_missing() is not None, reason=node_missing() or "")
def test_a_bullmq_comparison_whose_run_was_paused_is_measured_again(redis_url: str, tmp_path: Path) -> None:
    # Given BullMQ 6 workers that qsim starts (tests/node/worker.js) for 90 jobs of 50 ms at 15 a second
    toml = tmp_path / "s.toml"
    toml.write_text('name = "s"\nduration = 6\nseed = 3\n[[queues]]\nname = "paused"\n[[jobs]]\nname = "j"\n'
                    'queue = "paused"\n[jobs.arrival]\nkind = "constant"\nrate = 15.0\n[jobs.service]\n'
                    'kind = "constant"\nmean = 0.05\n[[pools]]\nname = "p"\nqueues = ["paused"]\nconcurrency = 4\n')
    command = f"env NODE_PATH={shlex.quote(str(BullMQ('6').modules))} node {shlex.quote(str(SCRIPTS / 'worker.js'))}"
    # When the compare process is stopped for 0.8 s while its first run is under way
    argv = [str(toml), "--target", "bullmq", "--queue", "paused", "--worker-command", command]
    doc, err, code = paused_compare(argv, redis_url, "bull:paused:completed")
    # Then BullMQ was measured again, with new job ids, and the document says so
    paused = doc["paused"]
    assert len(paused["runs"]) == 2 and paused["runs"][0] >= 0.7, (paused, err[-2000:])
    assert paused["runs"][1] < PAUSE_LIMIT and "paused BullMQ's run for" in err
    bullmq, jobs = doc["bullmq"], doc["engine"]["jobs"]
    assert bullmq["run_id"].endswith("-1") and bullmq["added"] == 90
    assert jobs["lost"] == 0 and jobs["unfinished"] == 0 and jobs["completed"] == jobs["arrived"]
    assert code == 0, err[-2000:]


def test_the_table_says_the_engine_was_measured_again() -> None:
    from qsim.analysis.fidelity.compare import paused_note

    again = paused_note({"runs": [3.31, 0.004], "limit": PAUSE_LIMIT})
    assert "paused the engine's run for 3.31 s" in again and "measured again, the figures" in again
    assert "which was paused too" not in again
    twice = paused_note({"runs": [3.31, 1.2, 0.6], "limit": PAUSE_LIMIT})
    assert "for 3.31 s" in twice and "measured again 2 times" in twice and "paused too (0.60 s)" in twice
    assert "paused BullMQ's run for 3.31 s" in paused_note({"runs": [3.31, 0.0], "limit": PAUSE_LIMIT}, "bullmq")
