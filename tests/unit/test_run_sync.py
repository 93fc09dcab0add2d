"""Ctrl-C ends what run_sync runs even when the coroutine loses its first cancel (qsim/harness/aio.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

# A coroutine that loses the first cancel, as Python 3.11's wait_for can inside redis-py: before, the runner's
# one cancel was all it got, and the run went on to its end (exit 0) after Ctrl-C.
CHILD = """
import asyncio, sys
from qsim.harness.aio import run_sync

async def main():
    try:
        print("running", flush=True)
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        print("first cancel lost", flush=True)
    await asyncio.sleep(30)
    return "ran to its end"

try:
    print(run_sync(main), flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_ends_a_run_whose_first_cancel_was_lost() -> None:
    with subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "running"
        started = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=20)
    assert child.returncode == 130, out
    assert out.split() == ["first", "cancel", "lost", "interrupted"] and time.monotonic() - started < 10
