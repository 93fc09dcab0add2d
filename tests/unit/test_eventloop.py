"""Which event loop a worker process runs on: uvloop when installed and wanted, asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qsim.cli import build_parser
from qsim.engine.eventloop import NO_UVLOOP_ENV, cancel_and_wait, loop_factory, run_process, uvloop_wanted


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.parametrize(("value", "wanted"), [("", True), ("0", True), ("1", False), ("true", False),
                                               ("YES", False), ("on", False)])
def test_the_environment_variable_turns_uvloop_off(value: str, wanted: bool) -> None:
    assert uvloop_wanted(True, {NO_UVLOOP_ENV: value}) is wanted
    assert uvloop_wanted(False, {NO_UVLOOP_ENV: value}) is False  # the caller's refusal wins


def test_without_uvloop_installed_the_default_loop_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given uvloop cannot be imported
    monkeypatch.setitem(sys.modules, "uvloop", None)
    monkeypatch.delenv(NO_UVLOOP_ENV, raising=False)
    # Then no factory is chosen and the coroutine runs on asyncio's own loop
    assert loop_factory() is None
    assert run_process(_loop_module()).startswith("asyncio")


def test_uvloop_is_used_when_installed_unless_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv(NO_UVLOOP_ENV, raising=False)
    assert run_process(_loop_module()).startswith("uvloop")
    assert run_process(_loop_module(), use_uvloop=False).startswith("asyncio")
    monkeypatch.setenv(NO_UVLOOP_ENV, "1")
    assert run_process(_loop_module()).startswith("asyncio")


def test_run_process_refuses_to_run_inside_a_running_loop() -> None:
    async def inside() -> None:
        coro = _loop_module()
        with pytest.raises(RuntimeError):
            run_process(coro)
        coro.close()

    asyncio.run(inside())


def test_worker_command_takes_no_uvloop() -> None:
    args = build_parser().parse_args(["worker", "m:f", "--queue", "q", "--no-uvloop"])
    assert args.no_uvloop is True
    assert build_parser().parse_args(["worker", "m:f", "--queue", "q"]).no_uvloop is False


@pytest.mark.parametrize("uvloop", [True, False])
def test_sigusr1_logs_what_each_task_of_the_process_awaits(uvloop: bool, tmp_path: Any) -> None:
    import os
    import signal
    import subprocess
    import time

    # Given a process whose main coroutine waits in a function of its own
    code = ("import asyncio, logging, sys\n"
            "from qsim.engine.eventloop import run_process\n"
            "logging.basicConfig(level=logging.WARNING)\n"
            "async def stuck_in_here():\n"
            "    print('ready', flush=True)\n"
            "    await asyncio.sleep(5)\n"
            "run_process(stuck_in_here())\n")
    (tmp_path / "stuck.py").write_text(code)
    env = {**os.environ, NO_UVLOOP_ENV: "" if uvloop else "1"}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "stuck.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # When it gets SIGUSR1
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    # Then its log names the task and the line it waits on, and the signal did not end it early
    assert "SIGUSR1: 1 tasks" in err and "stuck_in_here" in err and "await asyncio.sleep(5)" in err, err


async def _sends_at_once() -> None:  # like redis-py's send of a command: done without suspending
    return None


async def _loop_of_sends() -> None:  # like a worker's stalled-job check: Redis calls in a loop
    while True:
        await asyncio.wait_for(_sends_at_once(), 5.0)  # (redis-py sends so when its client has a socket timeout)
        await asyncio.sleep(0)


def test_cancel_and_wait_ends_a_task_whose_cancel_is_lost() -> None:
    async def main() -> tuple[int, int]:
        lost = ended = 0
        for steps in range(8):  # cancels landing at each point of the loop
            # Given a loop of sends, cancelled once after a few steps of the event loop
            task = asyncio.ensure_future(_loop_of_sends())
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=0.2)
            lost += not done
            # When cancel_and_wait stops it
            async with asyncio.timeout(5):
                await cancel_and_wait([task])
            # Then it has ended, however its first cancel went
            ended += task.cancelled()
        return lost, ended

    lost, ended = asyncio.run(main())
    assert ended == 8
    if sys.version_info < (3, 12):  # the cause: a cancel landing in wait_for just as its awaitable finished
        assert lost > 0


_LEFTOVERS = """
import asyncio
from qsim.engine.eventloop import run_process

async def sends_at_once():
    return None

async def loop_of_sends():
    while True:
        await asyncio.wait_for(sends_at_once(), 5.0)
        await asyncio.sleep(0)

async def main():
    for _ in range(8):  # left running, each at another point of its loop when main ends
        asyncio.ensure_future(loop_of_sends())
        await asyncio.sleep(0)
    return 7

print(run_process(main(), use_uvloop=False))
"""


def test_run_process_ends_tasks_left_running_whose_cancel_is_lost() -> None:
    # Given a process whose main coroutine leaves loops of sends running (asyncio's runner cancels each once,
    # then waits for them: forever, on Python 3.11, for one whose cancel was lost)
    # When it ends
    try:
        out = subprocess.run([sys.executable, "-c", _LEFTOVERS], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    except subprocess.TimeoutExpired:
        pytest.fail("run_process() did not return: a task left running outlived its cancel")
    # Then run_process returned main's result
    assert out.returncode == 0 and out.stdout == "7\n", out.stderr[-2000:]


def test_cancel_and_wait_raises_what_a_task_raised_when_asked() -> None:
    # Given a task that failed before it was cancelled, and one that runs until cancelled
    async def main(raise_errors: bool) -> None:
        async def fails() -> None:
            raise OSError("redis went away")

        failed = asyncio.ensure_future(fails())
        forever = asyncio.ensure_future(asyncio.sleep(3600))
        await asyncio.sleep(0)
        await cancel_and_wait([failed, forever], raise_errors=raise_errors)
        assert forever.cancelled()

    # Then by default what they raised is dropped, and with raise_errors the failure comes through
    asyncio.run(main(False))
    with pytest.raises(OSError, match="redis went away"):
        asyncio.run(main(True))
