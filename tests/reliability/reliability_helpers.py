"""Helpers for the reliability tests (imported by name: this folder is on sys.path)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from waiting import ROOT, wait_until  # noqa: F401 - re-exported for the tests here

HERE = Path(__file__).resolve().parent


def load_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` as a module."""
    spec = importlib.util.spec_from_file_location(f"qsim_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def spawn(args: list[str], **kw: Any) -> subprocess.Popen[str]:
    """A Python subprocess in the repo root with qsim importable (text pipes)."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{HERE}")
    env.update(kw.pop("env", {}))
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, text=True, **kw)
