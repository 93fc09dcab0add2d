"""Waiting for a condition in tests (tests/ is on sys.path via tests/conftest.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ROOT", "wait_until", "busy_factor", "timing_allowance", "measured_until_passed", "ATTEMPTS"]

ROOT = Path(__file__).resolve().parents[1]

T = TypeVar("T")

#: How many runs a check of the engine's timing against the model may take (see :func:`measured_until_passed`).
ATTEMPTS = 3


def wait_until(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll ``pred`` until truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


def busy_factor() -> float:
    """How much busier than one runnable task per core the machine has been over the last minute (>= 1).

    The load average per core: 1 on an idle or exactly loaded machine, 3 when three tasks want each
    core. Timing bounds that a busy machine's scheduling stretches are scaled by it (the machine's own
    baseline, measured at the time of the test), so a check holds beside other work.
    """
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def timing_allowance(idle: float) -> float:
    """``idle`` s of allowed lateness, stretched by :func:`busy_factor`."""
    return idle * busy_factor()


def measured_until_passed(measure: Callable[[], T], passed: Callable[[T], bool], attempts: int = ATTEMPTS,
                          describe: Callable[[T], str] = repr) -> list[T]:
    """Every run of ``measure()`` until one has ``passed`` or ``attempts`` runs were made; the last is the one to
    judge. Each run that failed before it is printed (``describe(run)``), so a run measured again shows in the
    test's output.

    For checks of the engine's timing against the model: on a shared machine (a CI runner beside other
    work) one run can be slowed by something no pause watch sees and fail, where an engine that is off fails
    every run. The test asserts what no run may do in any of them (lose a job).
    """
    runs: list[T] = []
    while len(runs) < attempts:
        runs.append(measure())
        if passed(runs[-1]):
            break
    for i, run in enumerate(runs[:-1], 1):
        print(f"\nrun {i} of {len(runs)} failed, measured again:\n{describe(run)}")
    return runs
