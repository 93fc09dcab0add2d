"""A benchmark script imported as a module, for the tests that check what it measures on a small scale."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` as a module (registered as ``qsim_bench_<name>``)."""
    spec = importlib.util.spec_from_file_location(f"qsim_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod
