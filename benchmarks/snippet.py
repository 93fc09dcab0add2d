"""Write a benchmark's figures as a Markdown snippet that the docs include (pymdownx.snippets, ``--8<--``).

A snippet says when, where and how it was measured: the date (UTC), the machine (cores, CPU model, load
average at the start and end of the run), Python and Redis versions, and the exact command, so a figure on
the site is never typed by hand and never loses its context. Snippets live in docs/snippets/benchmarks/
(left out of the site's pages; mkdocs.yml), one per benchmark and size.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["SNIPPETS", "machine", "write_snippet"]

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = ROOT / "docs" / "snippets" / "benchmarks"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=10).stdout
        return next((w.split("=", 1)[1] for w in out.split() if w.startswith("v=")), "unknown")
    except OSError:
        return "unknown"


def machine() -> str:
    """One line: cores, CPU model, load average now, Python and Redis versions."""
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} cores ({_cpu_model()}), load average {load} (1/5/15 min) at the end, "
            f"Python {platform.python_version()}, Redis {_redis_version()}")


def write_snippet(name: str, body: str, *, started: float, argv: list[str] | None = None) -> Path:
    """Write ``body`` (Markdown) under a header naming the run's date, machine and command; return the path."""
    argv = sys.argv if argv is None else argv
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(argv[0], ROOT), *argv[1:]])
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    took = time.time() - started
    header = (f"<!-- written by {os.path.relpath(argv[0], ROOT)}: do not edit; run the command below again -->\n"
              f"Measured {when} ({took:.0f} s) by `{command}` on {machine()}.\n\n")
    SNIPPETS.mkdir(parents=True, exist_ok=True)
    path = SNIPPETS / f"{name}.md"
    path.write_text(header + body.rstrip() + "\n", encoding="utf-8")
    return path
