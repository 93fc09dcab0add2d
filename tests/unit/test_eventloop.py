"""Which event loop a worker process runs on: uvloop when installed and wanted, asyncio's own otherwise."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from qsim.cli import build_parser
from qsim.engine.eventloop import NO_UVLOOP_ENV, loop_factory, run_process, uvloop_wanted


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
