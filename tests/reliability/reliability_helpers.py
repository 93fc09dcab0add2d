"""Helpers for the reliability tests (imported by name: this folder is on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmark_module import load_benchmark  # noqa: F401 - re-exported for the tests here
from waiting import ROOT, wait_until  # noqa: F401 - re-exported for the tests here

HERE = Path(__file__).resolve().parent


def spawn(args: list[str], **kw: Any) -> subprocess.Popen[str]:
    """A Python subprocess in the repo root with qsim importable (text pipes)."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{HERE}")
    env.update(kw.pop("env", {}))
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, text=True, **kw)
