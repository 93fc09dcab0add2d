"""Waiting for a condition in tests (tests/ is on sys.path via tests/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "wait_until"]

ROOT = Path(__file__).resolve().parents[1]


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
